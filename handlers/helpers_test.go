package handlers_test

import (
	"context"
	"io"
	"net/http"
	"testing"

	"videogen/billing"
	"videogen/internal/testkit"
	"videogen/models"
)

func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

// doStream posts a streamed body; length -1 sends it chunked, without announcing its size.
func doStream(t *testing.T, url, key string, body io.Reader, length int64) *testkit.Resp {
	t.Helper()
	req, err := http.NewRequest("POST", url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &testkit.Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func creditUSD(s *testkit.Server, accountID int64, usd string) error {
	amt, err := billing.ParseUSD(usd)
	if err != nil {
		return err
	}
	_, err = billing.Credit{AccountID: accountID, Kind: models.KindAdjustment, Amount: amt, Reason: "test", Actor: "test"}.Apply(context.Background(), s.DB)
	return err
}
