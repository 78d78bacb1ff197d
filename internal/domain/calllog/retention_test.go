package calllog_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
		s := calllog.NewSweeper(calllog.RetentionConfig{Retention: 24 * time.Hour, Every: time.Minute, Batch: 100},
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

// TestSweepStopsAtContextEnd: a sweep whose time is up (River cancels a job at its timeout, or at a hard
// stop) stops between or inside its batches, says why, and leaves the rest to the next sweep.
func TestSweepStopsAtContextEnd(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := open(t, url)
		now := time.Now().UTC().Truncate(time.Microsecond)
		var rows []models.CallLog
		for i := range 30 {
			rows = append(rows, models.CallLog{At: now.Add(-time.Duration(30+i) * time.Hour), RequestID: fmt.Sprintf("req_old%d", i), Method: "GET", Path: "/", Status: 200})
		}
		if err := d.W.Create(&rows).Error; err != nil {
			t.Fatal(err)
		}
		s := calllog.NewSweeper(calllog.RetentionConfig{Retention: 24 * time.Hour, Every: time.Minute, Batch: 10},
			calllog.RetentionDeps{DB: d, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: func() time.Time { return now }})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if n, err := s.Sweep(ctx, now); !errors.Is(err, context.Canceled) || n != 0 {
			t.Fatalf("a sweep out of time deleted %d rows (%v), want none and context.Canceled", n, err)
		}
		var left int64
		d.R.Model(&models.CallLog{}).Count(&left)
		if left != 30 {
			t.Fatalf("%d rows left, want the 30 for the next sweep", left)
		}
		if n, err := s.Sweep(context.Background(), now); err != nil || n != 30 {
			t.Fatalf("the next sweep deleted %d rows (%v), want 30", n, err)
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
