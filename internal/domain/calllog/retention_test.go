package calllog_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"videogen/internal/domain/calllog"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestSweepBatches: a backlog larger than a batch is deleted whole, a batch per statement, and only
// rows past the retention go.
func TestSweepBatches(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := open(t, url)
		now := time.Now().UTC().Truncate(time.Microsecond)
		var rows []models.CallLog
		for i := range 250 {
			rows = append(rows, models.CallLog{At: now.Add(-time.Duration(30+i) * time.Hour), RequestID: fmt.Sprintf("req_old%d", i), Method: "GET", Path: "/v1/models", Status: 200})
		}
		rows = append(rows, models.CallLog{At: now.Add(-23 * time.Hour), RequestID: "req_young", Method: "GET", Path: "/v1/models", Status: 200})
		if err := d.W.CreateInBatches(rows, 100).Error; err != nil {
			t.Fatal(err)
		}
		s := calllog.NewSweeper(calllog.RetentionConfig{Owner: "a", Retention: 24 * time.Hour, Every: time.Minute, Batch: 100},
			calllog.RetentionDeps{DB: d, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
		n, err := s.Sweep(context.Background(), now)
		if err != nil || n != 250 {
			t.Fatalf("swept %d rows (%v), want 250", n, err)
		}
		var left []string
		d.R.Model(&models.CallLog{}).Pluck("request_id", &left)
		if len(left) != 1 || left[0] != "req_young" {
			t.Fatalf("left %v, want only the row younger than the retention", left)
		}
	})
}

// TestSweepOneInstance: of several instances asking at once, one sweeps per interval.
func TestSweepOneInstance(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := open(t, url)
		now := time.Now().UTC().Truncate(time.Microsecond)
		if err := d.W.Create(&models.CallLog{At: now.Add(-48 * time.Hour), RequestID: "req_old", Method: "GET", Path: "/", Status: 200}).Error; err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		swept := map[string]int64{}
		for i := range 4 {
			owner := fmt.Sprintf("instance-%d", i)
			s := calllog.NewSweeper(calllog.RetentionConfig{Owner: owner, Retention: 24 * time.Hour, Every: time.Hour},
				calllog.RetentionDeps{DB: d, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }})
			wg.Go(func() {
				n, err := s.SweepIfDue(context.Background())
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				swept[owner] = n
				mu.Unlock()
			})
		}
		wg.Wait()
		var claimed []string
		d.R.Table("janitor_runs").Where("name = ?", "call_log_retention").Pluck("owner", &claimed)
		total := int64(0)
		for _, n := range swept {
			total += n
		}
		if len(claimed) != 1 || total != 1 || swept[claimed[0]] != 1 {
			t.Fatalf("claims %v, rows swept per instance %v: want one instance to sweep the one row", claimed, swept)
		}
	})
}

func open(t testing.TB, url string) *db.DB {
	t.Helper()
	d, err := db.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if _, err := d.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return d
}
