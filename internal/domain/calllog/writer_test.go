package calllog_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"videogen/internal/domain/calllog"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestCloseWritesEverything: rows recorded before Close are all written, concurrent writers included, and
// a row recorded after Close is reported, never a panic.
func TestCloseWritesEverything(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		d, err := db.Open(context.Background(), dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if _, err := d.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		var logs strings.Builder
		var mu sync.Mutex
		w := calllog.NewWriter(d, slog.New(slog.NewTextHandler(lockedWriter{&logs, &mu}, nil)))
		go func() { _ = w.Run(context.Background()) }()
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 500; i++ {
					w.Record(models.CallLog{RequestID: "r", Method: "GET", Path: "/v1/models", Status: 200})
				}
			}(g)
		}
		wg.Wait()
		if err := w.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		w.Record(models.CallLog{RequestID: "late", Method: "GET", Path: "/v1/models", Status: 200})
		var n int64
		d.R.Model(&models.CallLog{}).Count(&n)
		if n != 4000 {
			t.Fatalf("%d rows written, want 4000", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(logs.String(), "late") {
			t.Fatalf("a row after Close was not reported: %q", logs.String())
		}
	})
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
