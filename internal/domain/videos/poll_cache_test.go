package videos_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"videogen/billing"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/videos"
	"videogen/internal/infra/db"
	"videogen/internal/refusal"
	"videogen/internal/testkit"
)

// TestPollOfAnotherAccountsTaskReadsTheDatabase: once its owner has polled a task it is in the poll
// cache, but another account asking for it must go the same way as a request for an unknown id — a
// database read ending in not_found — or the quicker answer would tell that the id exists.
func TestPollOfAnotherAccountsTaskReadsTheDatabase(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		ctx := context.Background()
		d := pricedDB(t, url)
		owner, other := testkit.NewAccount(t, d, "10"), testkit.NewAccount(t, d, "10")
		svc := serviceOn(d, videos.NewPollCache(time.Minute))
		req, aerr := videos.ParseCreate([]byte(`{"model": "videogen-2.0-mini-480p", "prompt": "cached"}`), videos.MediaPolicy{})
		if aerr != nil {
			t.Fatal(aerr)
		}
		created, err := svc.Create(ctx, videos.Caller{AccountID: owner.ID}, req, "")
		if err != nil {
			t.Fatal(err)
		}
		id := created.Task.ID

		// Count the statements of each poll.
		poll := func(account int64, id string) (int64, error) {
			q := db.CountQueries(ctx)
			_, err := svc.Poll(q, account, id)
			return q.N(), err
		}
		if n, err := poll(owner.ID, id); err != nil || n != 1 {
			t.Fatalf("owner's first poll: %d reads, %v", n, err)
		}
		if n, err := poll(owner.ID, id); err != nil || n != 0 {
			t.Fatalf("owner's second poll should come from the cache: %d reads, %v", n, err)
		}
		unknownReads, err := poll(other.ID, "video_AAAAAAAAAAAAAAAAAAAAAAAA")
		if !errors.Is(err, refusal.NotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		othersReads, err := poll(other.ID, id)
		if !errors.Is(err, refusal.NotFound) {
			t.Fatalf("another account's task: %v", err)
		}
		if othersReads != unknownReads || othersReads != 1 {
			t.Fatalf("another account's task took %d reads, an unknown id %d: the two must not differ", othersReads, unknownReads)
		}
	})
}

// TestDeleteReachesAnotherInstancesPollCache: a finished task can still change — its customer may delete
// it — so another instance's cache serves it for at most its freshness bound, then answers not_found,
// instead of showing the deleted task until the entry is evicted.
func TestDeleteReachesAnotherInstancesPollCache(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		ctx := context.Background()
		d := pricedDB(t, url)
		acct := testkit.NewAccount(t, d, "10")
		const fresh = 200 * time.Millisecond
		instance := func() *videos.Service {
			return serviceOn(d, videos.NewPollCache(fresh))
		}
		a, b := instance(), instance()
		req, aerr := videos.ParseCreate([]byte(`{"model": "videogen-2.0-mini-480p", "prompt": "soon gone"}`), videos.MediaPolicy{})
		if aerr != nil {
			t.Fatal(aerr)
		}
		created, err := a.Create(ctx, videos.Caller{AccountID: acct.ID}, req, "")
		if err != nil {
			t.Fatal(err)
		}
		id := created.Task.ID
		if err := a.Tasks.Fail(ctx, created.Task, "generation_failed", "failed for the test"); err != nil {
			t.Fatal(err)
		}
		p, err := b.Poll(ctx, acct.ID, id)
		var v struct{ Status string }
		if err == nil {
			err = json.Unmarshal(p.JSON, &v)
		}
		if err != nil || v.Status != tasks.Failed {
			t.Fatalf("instance b's poll of the failed task: %+v, %v", v, err)
		}
		if _, err := a.Delete(ctx, acct.ID, id, "API key test"); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Poll(ctx, acct.ID, id); !errors.Is(err, refusal.NotFound) {
			t.Fatalf("the deleting instance still shows the task: %v", err)
		}
		time.Sleep(fresh)
		if _, err := b.Poll(ctx, acct.ID, id); !errors.Is(err, refusal.NotFound) {
			t.Fatalf("another instance shows the deleted task past its cache's freshness bound: %v", err)
		}
	})
}

// pricedDB opens a database on url with the price list seeded.
func pricedDB(t *testing.T, url string) *db.DB {
	t.Helper()
	d := testkit.OpenDB(t, url)
	if err := billing.SeedPrices(context.Background(), d, time.Now()); err != nil {
		t.Fatal(err)
	}
	return d
}

// serviceOn is the videos service these tests drive, on d, with polls as its poll cache (nil: none).
func serviceOn(d *db.DB, polls *videos.PollCache) *videos.Service {
	return &videos.Service{DB: d, Tasks: tasks.NewStore(d, time.Now), Prices: billing.NewPrices(d), MaxQueued: 50,
		QueueTimeout: time.Hour, Polls: polls, Now: time.Now, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}
