package handlers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// zeros is an endless body of zero bytes, read lazily: a large upload is never held in the test's memory.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestRefusalsReachTheClient sends each kind of request that the server refuses before reading its body,
// from Go's own HTTP client, 50 times, and requires the refusal every time. Without a graceful close
// (RFC 9112 §9.6: answer, stop, keep reading and discarding for a while, then close) the kernel resets
// the connection over the unread body and the client often sees "connection reset by peer" instead.
func TestRefusalsReachTheClient(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), nil)
	key := s.NewAccount(t, "10").Key
	longAuth := "Bearer " + strings.Repeat("x", 8000)
	cases := []struct {
		name, path, ctype, auth string
		size                    int64
		status                  int
		code                    string // the API's error.code; "" for a page
	}{
		{"create with a 2 MiB body", "/v1/videos", "application/json", "Bearer " + key, 2 << 20, 413, "request_too_large"},
		{"import with a 2 MiB body", "/uploads/v1/import", "application/json", "Bearer " + key, 2 << 20, 413, "request_too_large"},
		{"upload of 2 MiB without a key", "/uploads/v1/files", "multipart/form-data; boundary=b", "", 2 << 20, 401, "missing_api_key"},
		{"upload over the request limit", "/uploads/v1/files", "multipart/form-data; boundary=b", "Bearer " + key, 400 << 20, 413, "request_too_large"},
		{"console form with a 2 MiB body", "/signin", "application/x-www-form-urlencoded", "", 2 << 20, 413, ""},
		{"create with an 8,000-character Authorization", "/v1/videos", "application/json", longAuth, 2 << 20, 431, "invalid_request"},
		{"upload with an 8,000-character Authorization", "/uploads/v1/files", "multipart/form-data; boundary=b", longAuth, 2 << 20, 431, "invalid_request"},
		{"console form with an 8,000-character Authorization", "/signin", "application/x-www-form-urlencoded", longAuth, 2 << 20, 431, "invalid_request"},
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			failures := 0
			for i := 0; i < 50; i++ {
				req, err := http.NewRequest("POST", s.URL+tc.path, io.LimitReader(zeros{}, tc.size))
				if err != nil {
					t.Fatal(err)
				}
				req.ContentLength = tc.size
				req.Header.Set("Content-Type", tc.ctype)
				if tc.auth != "" {
					req.Header.Set("Authorization", tc.auth)
				}
				resp, err := client.Do(req)
				if err != nil {
					failures++
					t.Errorf("try %d: %v", i+1, err)
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					failures++
					t.Errorf("try %d: read the answer: %v", i+1, err)
					continue
				}
				if resp.StatusCode != tc.status {
					t.Fatalf("try %d: status %d, want %d: %.300s", i+1, resp.StatusCode, tc.status, body)
				}
				if tc.code != "" {
					var e struct {
						Error struct{ Code string } `json:"error"`
					}
					if json.Unmarshal(body, &e) != nil || e.Error.Code != tc.code {
						t.Fatalf("try %d: body %.300s, want error.code %s", i+1, body, tc.code)
					}
				} else if !strings.Contains(string(body), "<html") {
					t.Fatalf("try %d: a form's refusal is a page, got %.300s", i+1, body)
				}
			}
			if failures > 0 {
				t.Errorf("%d of 50 refusals were lost", failures)
			}
		})
	}
}
