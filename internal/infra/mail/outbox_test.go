package mail_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/infra/mail"
	"videogen/internal/infra/queue"
	"videogen/internal/testkit"
	"videogen/models"
)

// flaky is a sender whose first `failures` sends fail; it records every attempt.
type flaky struct {
	mu       sync.Mutex
	failures int
	attempts []mail.Message
	sent     []mail.Message
}

func (f *flaky) Send(_ context.Context, m mail.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attempts = append(f.attempts, m)
	if f.failures > 0 {
		f.failures--
		return errors.New("provider unavailable")
	}
	f.sent = append(f.sent, m)
	return nil
}

// delivered is a copy of the messages sent.
func (f *flaky) delivered() []mail.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sent)
}

// tried is a copy of every attempt.
func (f *flaky) tried() []mail.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.attempts)
}

func (f *flaky) counts() (attempts, sent int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.attempts), len(f.sent)
}

func openDB(t *testing.T, url string) *db.DB {
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

type clock struct {
	mu sync.Mutex
	t  time.Time
}

// now is in whole microseconds, as PostgreSQL keeps times: River stamps a job with it, and a job stamped
// with a time PostgreSQL rounded up would not be due at the same (stopped) clock's now.
func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.Truncate(time.Microsecond)
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// rig is one instance's outbox on a database, with the queue that works its jobs.
type rig struct {
	d *db.DB
	q *queue.Queue
	o *mail.Outbox
}

// newOutbox returns an outbox delivering through send on a queue of its own (an instance), not started.
func newOutbox(t *testing.T, d *db.DB, send mail.Sender, owner string, c *clock, secrets ...string) *rig {
	t.Helper()
	if len(secrets) == 0 {
		secrets = []string{"first secret"}
	}
	var out io.Writer = io.Discard
	if os.Getenv("MAIL_TEST_LOG") != "" {
		out = os.Stderr
	}
	log := slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})).With("instance", owner)
	q, err := queue.New(d, queue.Config{ID: owner, Poll: 20 * time.Millisecond, Now: c.now, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	o, err := mail.NewOutbox(d, q, send, log, mail.OutboxConfig{Secrets: secrets, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return &rig{d: d, q: q, o: o}
}

// start works the queue until the test ends.
func (r *rig) start(t *testing.T) {
	t.Helper()
	if err := r.q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.q.Stop(context.Background()) })
}

func enqueue(t *testing.T, r *rig, to, text string) {
	t.Helper()
	err := r.d.Tx(context.Background(), func(tx *gorm.DB) error {
		return r.o.Enqueue(tx, mail.Message{To: to, Subject: "Confirm", Text: text, HTML: "<p>" + text + "</p>", Tags: map[string]string{"kind": "verify"}})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// row is the record of the only e-mail to to.
func row(t *testing.T, d *db.DB, to string) models.MailOutbox {
	t.Helper()
	var r models.MailOutbox
	if err := d.R.Where("recipient = ?", to).Take(&r).Error; err != nil {
		t.Fatal(err)
	}
	return r
}

// sendJob is the River job of the e-mail recorded in row id.
func sendJob(t *testing.T, r *rig, id int64) *rivertype.JobRow {
	t.Helper()
	res, err := r.q.Client().JobList(context.Background(), river.NewJobListParams().Kinds(mail.SendArgs{}.Kind()).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range res.Jobs {
		var a mail.SendArgs
		if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
			t.Fatal(err)
		}
		if a.ID == id {
			return j
		}
	}
	t.Fatalf("no job for e-mail %d", id)
	return nil
}

func TestOutbox(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, url string) {
		ctx := context.Background()
		// Every case starts from an empty database of the engine under test.
		fresh := func(t *testing.T) *db.DB {
			if strings.HasPrefix(url, "postgres") {
				return openDB(t, testkit.PostgresURL(t))
			}
			return openDB(t, testkit.SQLiteURL(t))
		}
		wait := func(t *testing.T, what string, ok func() bool) {
			t.Helper()
			testkit.Eventually(t, 30*time.Second, what, ok)
		}

		t.Run("a message commits with its transaction or not at all, and is recorded sent", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			send := &flaky{}
			o := newOutbox(t, d, send, "a", c)
			_ = d.Tx(ctx, func(tx *gorm.DB) error {
				if err := o.o.Enqueue(tx, mail.Message{To: "gone@example.com", Subject: "x", Text: "x"}); err != nil {
					t.Fatal(err)
				}
				return errors.New("the sign-up failed after queueing")
			})
			enqueue(t, o, "kept@example.com", "link https://example.com/verify?token=SECRET123")
			o.start(t)
			wait(t, "the e-mail recorded sent", func() bool { return row(t, d, "kept@example.com").SentAt != nil })
			if sent := send.delivered(); len(sent) != 1 || sent[0].To != "kept@example.com" {
				t.Fatalf("sent %+v", sent)
			}
			var n int64
			if err := d.R.Model(&models.MailOutbox{}).Count(&n).Error; err != nil || n != 1 {
				t.Fatalf("%d records (%v): the rolled-back message left one", n, err)
			}
			r := row(t, d, "kept@example.com")
			if r.SealedBody != nil || r.FailedAt != nil || r.LastError != "" {
				t.Fatalf("sent record: body kept %v, failed_at %v, last error %q", r.SealedBody != nil, r.FailedAt, r.LastError)
			}
			// River completes its job after the record (its batch completer), after one attempt; the message
			// was sent once.
			wait(t, "the e-mail's job completed", func() bool { return sendJob(t, o, r.ID).State == rivertype.JobStateCompleted })
			if j := sendJob(t, o, r.ID); j.Attempt != 1 || len(send.delivered()) != 1 {
				t.Fatalf("job %s after %d attempts, %d sent", j.State, j.Attempt, len(send.delivered()))
			}
			if res, err := o.q.Client().JobList(ctx, river.NewJobListParams().Kinds(mail.SendArgs{}.Kind())); err != nil || len(res.Jobs) != 1 {
				t.Fatalf("jobs: %d, %v; want only the committed message's", len(res.Jobs), err)
			}
		})

		t.Run("the stored body does not show its link", func(t *testing.T) {
			d := fresh(t)
			o := newOutbox(t, d, &flaky{}, "a", &clock{t: time.Now()})
			enqueue(t, o, "sealed@example.com", "link https://example.com/verify?token=TOKEN_IN_CLEAR")
			r := row(t, d, "sealed@example.com")
			if len(r.SealedBody) == 0 || bytes.Contains(r.SealedBody, []byte("TOKEN_IN_CLEAR")) {
				t.Fatalf("the body is stored in the clear: %q", r.SealedBody)
			}
			// Readdressed in the database, it no longer opens: the link cannot be sent elsewhere.
			if err := d.W.Model(&models.MailOutbox{}).Where("id = ?", r.ID).Update("recipient", "attacker@example.com").Error; err != nil {
				t.Fatal(err)
			}
			send := &flaky{}
			other := newOutbox(t, d, send, "b", &clock{t: time.Now()})
			other.start(t)
			wait(t, "the readdressed message given up", func() bool { return row(t, d, "attacker@example.com").FailedAt != nil })
			if tried := send.tried(); len(tried) != 0 {
				t.Fatalf("a readdressed message went out: %+v", tried)
			}
		})

		t.Run("failures are retried on the schedule with the same key until delivered once", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			send := &flaky{failures: 2}
			o := newOutbox(t, d, send, "a", c)
			enqueue(t, o, "retry@example.com", "hello")
			id := row(t, d, "retry@example.com").ID
			o.start(t)
			// After each failure the job waits its turn by the service's clock: 5 s, then 15 s.
			for i, want := range []time.Duration{5 * time.Second, 15 * time.Second} {
				// A wait shorter than River's scheduler interval leaves the job available, due later.
				wait(t, fmt.Sprintf("failed attempt %d", i+1), func() bool {
					j := sendJob(t, o, id)
					return len(j.Errors) == i+1 && j.State != rivertype.JobStateRunning
				})
				j := sendJob(t, o, id)
				// (River keeps times on SQLite to the millisecond.)
				if got := j.ScheduledAt.Sub(c.now()); got < want-time.Millisecond || got > want+time.Millisecond {
					t.Fatalf("after failure %d the next attempt is in %v, want %v", i+1, got, want)
				}
				if r := row(t, d, "retry@example.com"); r.LastError != "provider unavailable" || r.SentAt != nil {
					t.Fatalf("after failure %d: last error %q, sent_at %v", i+1, r.LastError, r.SentAt)
				}
				c.add(want)
			}
			wait(t, "the third attempt delivers it", func() bool { return row(t, d, "retry@example.com").SentAt != nil })
			attempts, sent := send.counts()
			if attempts != 3 || sent != 1 {
				t.Fatalf("%d attempts, %d sent; want 3 and 1", attempts, sent)
			}
			tried := send.tried()
			for _, a := range tried {
				if a.IdempotencyKey != tried[0].IdempotencyKey || a.IdempotencyKey == "" {
					t.Fatalf("idempotency keys differ between attempts: %q vs %q", a.IdempotencyKey, tried[0].IdempotencyKey)
				}
			}
			if r := row(t, d, "retry@example.com"); r.LastError != "" {
				t.Fatalf("delivered, yet the last error stays: %q", r.LastError)
			}
		})

		t.Run("a message that never goes through is given up after a day", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			send := &flaky{failures: 1 << 30}
			o := newOutbox(t, d, send, "a", c)
			enqueue(t, o, "never@example.com", "hello")
			enqueue(t, o, "later@example.com", "hello")
			o.start(t)
			id := row(t, d, "never@example.com").ID
			failedOnce := func(id int64) bool {
				j := sendJob(t, o, id)
				return len(j.Errors) == 1 && j.State != rivertype.JobStateRunning
			}
			wait(t, "the first attempts fail", func() bool { return failedOnce(id) && failedOnce(row(t, d, "later@example.com").ID) })
			// A day later (the provider has not answered since), the next failure is the last.
			c.add(24 * time.Hour)
			wait(t, "the message given up", func() bool { return row(t, d, "never@example.com").FailedAt != nil })
			r := row(t, d, "never@example.com")
			if r.SealedBody != nil || r.LastError == "" || r.SentAt != nil {
				t.Fatalf("failed_at %v, body kept %v, last error %q", r.FailedAt, r.SealedBody != nil, r.LastError)
			}
			wait(t, "its job ended", func() bool { return sendJob(t, o, id).State == rivertype.JobStateCancelled })
			if attempts, _ := send.counts(); attempts != 4 {
				t.Fatalf("%d attempts, want 2 of each message", attempts)
			}
		})

		t.Run("two instances deliver each message once", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			s1, s2 := &flaky{}, &flaky{}
			a, b := newOutbox(t, d, s1, "a", c), newOutbox(t, d, s2, "b", c)
			for i := 0; i < 40; i++ {
				enqueue(t, a, fmt.Sprintf("many%d@example.com", i), "hello")
			}
			a.start(t)
			b.start(t)
			wait(t, "every message sent", func() bool {
				_, n1 := s1.counts()
				_, n2 := s2.counts()
				return n1+n2 >= 40
			})
			keys := map[string]bool{}
			for _, m := range append(s1.delivered(), s2.delivered()...) {
				keys[m.IdempotencyKey] = true
			}
			_, n1 := s1.counts()
			_, n2 := s2.counts()
			if n1+n2 != 40 || len(keys) != 40 {
				t.Fatalf("sent %d + %d with %d distinct keys, want 40 in all", n1, n2, len(keys))
			}
		})

		t.Run("a rotated secret still opens queued mail", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			old := newOutbox(t, d, &flaky{}, "a", c, "old secret") // never started: another instance works
			enqueue(t, old, "rotate@example.com", "hello")
			send := &flaky{}
			rotated := newOutbox(t, d, send, "b", c, "new secret", "old secret")
			rotated.start(t)
			wait(t, "the message sent after the rotation", func() bool { return row(t, d, "rotate@example.com").SentAt != nil })
			if sent := send.delivered(); sent[0].Text != "hello" {
				t.Fatalf("after rotation: %+v", sent)
			}
			// Once the old secret is dropped from every instance, what it sealed no longer opens.
			if err := rotated.q.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			enqueue(t, old, "lost@example.com", "hello")
			gone := newOutbox(t, d, &flaky{}, "c", c, "new secret")
			gone.start(t)
			wait(t, "a message that cannot be opened marked failed", func() bool { return row(t, d, "lost@example.com").FailedAt != nil })
		})

		t.Run("records of mail done with are kept 30 days", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now().UTC()}
			now := c.now()
			old, recent := now.Add(-31*24*time.Hour), now.Add(-29*24*time.Hour)
			for i, r := range []models.MailOutbox{
				{Recipient: "old-sent@example.com", CreatedAt: old, SentAt: &old},
				{Recipient: "old-failed@example.com", CreatedAt: old, FailedAt: &old},
				{Recipient: "recent@example.com", CreatedAt: recent, SentAt: &recent},
			} {
				r.Kind, r.Subject, r.IdempotencyKey = "verify", "s", fmt.Sprintf("k%d", i)
				if err := d.W.Create(&r).Error; err != nil {
					t.Fatal(err)
				}
			}
			o := newOutbox(t, d, &flaky{}, "a", c)
			o.start(t) // the prune runs once when the elected instance starts, then hourly
			wait(t, "the old records pruned", func() bool {
				var n int64
				_ = d.R.Model(&models.MailOutbox{}).Where("recipient LIKE 'old-%'").Count(&n).Error
				return n == 0
			})
			_ = row(t, d, "recent@example.com")
		})
	})
}

// TestRetrySchedule: 5 s, then three times longer each time, up to an hour; a day of it is about 30
// attempts, all within Resend's 24 hours of an idempotency key.
func TestRetrySchedule(t *testing.T) {
	var waits []time.Duration
	total := time.Duration(0)
	for n := 1; total < 24*time.Hour; n++ {
		w := mail.RetryAfter(n)
		waits = append(waits, w)
		total += w
	}
	if want := []time.Duration{5 * time.Second, 15 * time.Second, 45 * time.Second, 135 * time.Second, 405 * time.Second,
		1215 * time.Second, time.Hour, time.Hour}; !slices.Equal(waits[:len(want)], want) {
		t.Fatalf("waits %v, want %v …", waits[:len(want)], want)
	}
	if len(waits) < 20 || len(waits) > 30 {
		t.Fatalf("%d attempts in a day of backoff", len(waits))
	}
}
