package calllog_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"videogen/internal/domain/calllog"
	"videogen/internal/infra/db"
	"videogen/internal/testkit"
	"videogen/models"
)

// start runs a writer with cfg on d until the test ends; its log goes to logs.
func start(t *testing.T, d *db.DB, cfg calllog.Config, logs *testkit.LockedBuffer) *calllog.Writer {
	t.Helper()
	w := calllog.NewWriterWith(cfg, d, slog.New(slog.NewTextHandler(logs, nil)))
	go func() { _ = w.Run(context.Background()) }()
	t.Cleanup(func() { _ = w.Close(context.Background()) })
	return w
}

func callRow(id string, account *int64) models.CallLog {
	return models.CallLog{At: time.Now().UTC().Truncate(time.Microsecond), RequestID: id, AccountID: account, KeyPrefix: "vg_live_ab12",
		Method: "POST", Path: "/v1/videos", Status: 200, LatencyMicros: 1234, TaskID: "video_x", AmountReservedMicros: 500000,
		BytesIn: 77, Files: 1}
}

// stored reads the call-log row of a request id through the read pool, as the console does.
func stored(t *testing.T, d *db.DB, id string) (models.CallLog, bool) {
	t.Helper()
	var rows []models.CallLog
	if err := d.R.Where("request_id = ?", id).Find(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) > 1 {
		t.Fatalf("%d rows for %s, want at most one", len(rows), id)
	}
	if len(rows) == 0 {
		return models.CallLog{}, false
	}
	return rows[0], true
}

// TestRecordReturnsOnceCommitted: when Record returns, the row is in the database, every field as
// recorded — an idle writer commits a lone row at once, with no timer to wait for.
func TestRecordReturnsOnceCommitted(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := open(t, url)
		w := start(t, d, calllog.Config{}, &testkit.LockedBuffer{})
		acct := testkit.NewAccount(t, d, "1").ID
		for i := range 20 {
			want := callRow(fmt.Sprintf("req_lone%d", i), &acct)
			if i%2 == 1 {
				want.AccountID, want.KeyPrefix = nil, "" // refused before its key was known
			}
			w.Record(want)
			got, ok := stored(t, d, want.RequestID)
			if !ok {
				t.Fatalf("row %s not in the database when Record returned", want.RequestID)
			}
			got.ID = 0
			if !got.At.Equal(want.At) || (got.AccountID == nil) != (want.AccountID == nil) || (got.AccountID != nil && *got.AccountID != acct) {
				t.Fatalf("stored %+v, recorded %+v", got, want)
			}
			got.At, got.AccountID, want.AccountID = want.At, nil, nil
			if got != want {
				t.Fatalf("stored %+v, recorded %+v", got, want)
			}
		}
		if st := w.Stats(); st.Batches != 20 || st.Rows != 20 || st.Waiting != 0 || st.Lost != 0 {
			t.Fatalf("stats %+v, want 20 batches of one row", st)
		}
	})
}

// TestRecordsGroupCommitted: the rows that arrive while a batch commits are committed together, at most
// MaxBatch to a transaction, and each request returns only once its own batch has committed. The test
// holds the database's write lock so that all the requests are seen waiting before the first commit.
func TestRecordsGroupCommitted(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := open(t, url)
		const n, bound = 120, 50
		w := start(t, d, calllog.Config{MaxBatch: bound, Patience: time.Minute}, &testkit.LockedBuffer{})
		// SQLite: the transaction holds the one writer connection. PostgreSQL: the lock holds every INSERT.
		hold, err := d.WSQL().BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if d.Postgres {
			if _, err := hold.Exec("LOCK TABLE call_logs IN SHARE MODE"); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		returned := 0
		for i := range n {
			wg.Go(func() {
				w.Record(callRow(fmt.Sprintf("req_group%d", i), nil))
				mu.Lock()
				returned++
				mu.Unlock()
			})
		}
		testkit.Eventually(t, 30*time.Second, "every request waiting for its row", func() bool { return w.Stats().Waiting == n },
			func() string { return fmt.Sprintf("%+v", w.Stats()) })
		mu.Lock()
		early := returned
		mu.Unlock()
		if early != 0 {
			t.Fatalf("%d Records returned while the database could not commit", early)
		}
		if err := hold.Rollback(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		st := w.Stats()
		// The first batch (taken before the others arrived) and full batches of the rest.
		if st.Rows != n || st.Batches > 1+(n+bound-1)/bound || st.Largest > bound || st.Waiting != 0 || st.Lost != 0 {
			t.Fatalf("stats %+v: want %d rows in at most %d transactions of at most %d rows", st, n, 1+(n+bound-1)/bound, bound)
		}
		var count int64
		d.R.Model(&models.CallLog{}).Where("request_id LIKE 'req_group%'").Count(&count)
		if count != n {
			t.Fatalf("%d rows stored, want %d", count, n)
		}
	})
}

// TestRecordWhileTheDatabaseFails: a batch the database refuses is retried, and committed once the
// database takes it; refused for longer than Patience, its rows are written to the log at error level,
// every field, and the requests go on. While the database is known down (a batch was given up and none
// committed since), a batch gets one attempt. Once the database takes rows again, the writer commits as
// usual.
func TestRecordWhileTheDatabaseFails(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		d := open(t, url)
		breakTable := func() {
			t.Helper()
			if err := d.W.Exec("ALTER TABLE call_logs RENAME TO call_logs_away").Error; err != nil {
				t.Fatal(err)
			}
		}
		mend := func() {
			t.Helper()
			if err := d.W.Exec("ALTER TABLE call_logs_away RENAME TO call_logs").Error; err != nil {
				t.Fatal(err)
			}
		}

		// Refused for a while, then taken: committed, nothing lost.
		patient := start(t, d, calllog.Config{Patience: time.Minute}, &testkit.LockedBuffer{})
		breakTable()
		recorded := make(chan struct{})
		go func() { patient.Record(callRow("req_retried", nil)); close(recorded) }()
		testkit.Eventually(t, 30*time.Second, "the batch refused twice", func() bool { return patient.Stats().Failed >= 2 })
		select {
		case <-recorded:
			t.Fatal("Record returned while its row could not be committed")
		default:
		}
		mend()
		<-recorded
		if _, ok := stored(t, d, "req_retried"); !ok {
			t.Fatal("the retried row is not in the database")
		}
		if st := patient.Stats(); st.Lost != 0 || st.Rows != 1 {
			t.Fatalf("stats %+v", st)
		}

		// Refused past Patience: logged, and the request goes on.
		var logs testkit.LockedBuffer
		short := start(t, d, calllog.Config{Patience: 200 * time.Millisecond}, &logs)
		breakTable()
		short.Record(callRow("req_given_up", nil))
		if st := short.Stats(); st.Lost != 1 || st.Failed < 1 {
			t.Fatalf("stats %+v, want the row lost after failed attempts", st)
		}
		// The database is known down now: the next batch gets one attempt, not Patience of them.
		failed := short.Stats().Failed
		short.Record(callRow("req_given_up_at_once", nil))
		if st := short.Stats(); st.Lost != 2 || st.Failed != failed+1 {
			t.Fatalf("stats %+v after a batch during a known outage, want it given up after one attempt (%d failed before)", st, failed)
		}
		var line string
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "request_id=req_given_up") {
				line = l
			}
		}
		for _, want := range []string{"level=ERROR", "path=/v1/videos", "method=POST", "status=200", "key_prefix=vg_live_ab12",
			"task_id=video_x", "amount_reserved_micros=500000", "latency_micros=1234", "bytes_in=77", "files=1", "at="} {
			if !strings.Contains(line, want) {
				t.Fatalf("the lost row's log line lacks %q: %q\nlog:\n%s", want, line, logs.String())
			}
		}
		mend()
		for _, id := range []string{"req_given_up", "req_given_up_at_once"} {
			if _, ok := stored(t, d, id); ok {
				t.Fatalf("the row %s given up is in the database", id)
			}
		}
		short.Record(callRow("req_after", nil))
		if _, ok := stored(t, d, "req_after"); !ok {
			t.Fatal("the writer did not recover once the database took rows again")
		}
	})
}
