package mail_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/infra/mail"
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

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newOutbox(t *testing.T, d *db.DB, send mail.Sender, owner string, c *clock, secrets ...string) *mail.Outbox {
	t.Helper()
	if len(secrets) == 0 {
		secrets = []string{"first secret"}
	}
	o, err := mail.NewOutbox(d, send, slog.New(slog.NewTextHandler(io.Discard, nil)), mail.OutboxConfig{
		Owner: owner, Lease: time.Minute, Secrets: secrets, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func enqueue(t *testing.T, d *db.DB, o *mail.Outbox, to, text string) {
	t.Helper()
	err := d.Tx(context.Background(), func(tx *gorm.DB) error {
		return o.Enqueue(tx, mail.Message{To: to, Subject: "Confirm", Text: text, HTML: "<p>" + text + "</p>", Tags: map[string]string{"kind": "verify"}})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func deliver(t *testing.T, o *mail.Outbox) int {
	t.Helper()
	n, err := o.DeliverDue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
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

		t.Run("a message commits with its transaction or not at all", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			send := &flaky{}
			o := newOutbox(t, d, send, "a", c)
			_ = d.Tx(ctx, func(tx *gorm.DB) error {
				if err := o.Enqueue(tx, mail.Message{To: "gone@example.com", Subject: "x", Text: "x"}); err != nil {
					t.Fatal(err)
				}
				return errors.New("the sign-up failed after queueing")
			})
			enqueue(t, d, o, "kept@example.com", "link https://example.com/verify?token=SECRET123")
			if n := deliver(t, o); n != 1 {
				t.Fatalf("delivered %d, want 1", n)
			}
			if _, sent := send.counts(); sent != 1 || send.sent[0].To != "kept@example.com" {
				t.Fatalf("sent %+v", send.sent)
			}
			var row models.MailOutbox
			if err := d.R.Take(&row).Error; err != nil {
				t.Fatal(err)
			}
			if row.SentAt == nil || row.SealedBody != nil || row.Attempts != 1 {
				t.Fatalf("sent row: sent_at %v, body kept %v, attempts %d", row.SentAt, row.SealedBody != nil, row.Attempts)
			}
			if n := deliver(t, o); n != 0 {
				t.Fatalf("delivered %d more", n)
			}
		})

		t.Run("the stored body does not show its link", func(t *testing.T) {
			d := fresh(t)
			o := newOutbox(t, d, &flaky{}, "a", &clock{t: time.Now()})
			enqueue(t, d, o, "sealed@example.com", "link https://example.com/verify?token=TOKEN_IN_CLEAR")
			var row models.MailOutbox
			if err := d.R.Take(&row).Error; err != nil {
				t.Fatal(err)
			}
			if len(row.SealedBody) == 0 || bytes.Contains(row.SealedBody, []byte("TOKEN_IN_CLEAR")) {
				t.Fatalf("the body is stored in the clear: %q", row.SealedBody)
			}
			// Readdressed in the database, it no longer opens: the link cannot be sent elsewhere.
			if err := d.W.Model(&models.MailOutbox{}).Where("id = ?", row.ID).Update("recipient", "attacker@example.com").Error; err != nil {
				t.Fatal(err)
			}
			send := &flaky{}
			other := newOutbox(t, d, send, "b", &clock{t: time.Now()})
			if n := deliver(t, other); n != 0 || len(send.attempts) != 0 {
				t.Fatalf("a readdressed message went out: %+v", send.attempts)
			}
		})

		t.Run("failures are retried later with the same key until delivered once", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			send := &flaky{failures: 2}
			o := newOutbox(t, d, send, "a", c)
			enqueue(t, d, o, "retry@example.com", "hello")
			deliver(t, o)
			if n := deliver(t, o); n != 0 {
				t.Fatal("a failed message was retried at once")
			}
			c.add(5 * time.Second) // the first wait
			deliver(t, o)
			c.add(14 * time.Second)
			if n := deliver(t, o); n != 0 {
				t.Fatal("the second retry came before its 15 s wait")
			}
			c.add(time.Second)
			if n := deliver(t, o); n != 1 {
				t.Fatalf("third attempt: delivered %d", n)
			}
			attempts, sent := send.counts()
			if attempts != 3 || sent != 1 {
				t.Fatalf("%d attempts, %d sent; want 3 and 1", attempts, sent)
			}
			for _, a := range send.attempts {
				if a.IdempotencyKey != send.attempts[0].IdempotencyKey || a.IdempotencyKey == "" {
					t.Fatalf("idempotency keys differ between attempts: %q vs %q", a.IdempotencyKey, send.attempts[0].IdempotencyKey)
				}
			}
		})

		t.Run("a message that never goes through is given up after a day", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			send := &flaky{failures: 1 << 30}
			o := newOutbox(t, d, send, "a", c)
			enqueue(t, d, o, "never@example.com", "hello")
			for i := 0; i < 40; i++ {
				deliver(t, o)
				c.add(time.Hour)
			}
			var row models.MailOutbox
			if err := d.R.Take(&row).Error; err != nil {
				t.Fatal(err)
			}
			if row.FailedAt == nil || row.SealedBody != nil || row.LastError == "" {
				t.Fatalf("failed_at %v, body kept %v, last error %q", row.FailedAt, row.SealedBody != nil, row.LastError)
			}
			if attempts, _ := send.counts(); attempts < 20 || attempts > 30 {
				t.Fatalf("%d attempts in a day of backoff", attempts)
			}
		})

		t.Run("a claimed message is another instance's only after its lease", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			block := &blocking{release: make(chan struct{}), started: make(chan struct{}, 1)}
			a := newOutbox(t, d, block, "a", c)
			second := &flaky{}
			b := newOutbox(t, d, second, "b", c)
			enqueue(t, d, a, "lease@example.com", "hello")
			done := make(chan struct{})
			go func() { defer close(done); _, _ = a.DeliverDue(ctx) }()
			<-block.started // a holds the message and is sending it
			if n := deliver(t, b); n != 0 {
				t.Fatal("b took a message a holds")
			}
			c.add(2 * time.Minute) // a died: its lease ran out
			if n := deliver(t, b); n != 1 {
				t.Fatal("b did not take the message after a's lease")
			}
			close(block.release)
			<-done
			if second.sent[0].IdempotencyKey != block.key {
				t.Fatalf("b sent with key %q, a with %q: the provider could not deduplicate", second.sent[0].IdempotencyKey, block.key)
			}
		})

		t.Run("two instances deliver each message once", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			s1, s2 := &flaky{}, &flaky{}
			a, b := newOutbox(t, d, s1, "a", c), newOutbox(t, d, s2, "b", c)
			for i := 0; i < 40; i++ {
				enqueue(t, d, a, "many@example.com", "hello")
			}
			var wg sync.WaitGroup
			for _, o := range []*mail.Outbox{a, b} {
				wg.Add(1)
				go func() { defer wg.Done(); _, _ = o.DeliverDue(ctx) }()
			}
			wg.Wait()
			_, n1 := s1.counts()
			_, n2 := s2.counts()
			keys := map[string]bool{}
			for _, m := range append(s1.sent, s2.sent...) {
				keys[m.IdempotencyKey] = true
			}
			if n1+n2 != 40 || len(keys) != 40 {
				t.Fatalf("sent %d + %d with %d distinct keys, want 40 in all", n1, n2, len(keys))
			}
		})

		t.Run("a rotated secret still opens queued mail", func(t *testing.T) {
			d := fresh(t)
			c := &clock{t: time.Now()}
			old := newOutbox(t, d, &flaky{}, "a", c, "old secret")
			enqueue(t, d, old, "rotate@example.com", "hello")
			send := &flaky{}
			rotated := newOutbox(t, d, send, "a", c, "new secret", "old secret")
			if n := deliver(t, rotated); n != 1 || send.sent[0].Text != "hello" {
				t.Fatalf("after rotation: delivered %d", n)
			}
			enqueue(t, d, old, "lost@example.com", "hello")
			gone := newOutbox(t, d, &flaky{}, "a", c, "new secret")
			if n := deliver(t, gone); n != 0 {
				t.Fatal("a message opened without its secret")
			}
			var row models.MailOutbox
			if err := d.R.Where("recipient = ?", "lost@example.com").Take(&row).Error; err != nil || row.FailedAt == nil {
				t.Fatalf("a message that cannot be opened must be marked failed: %+v %v", row, err)
			}
		})
	})
}

// blocking is a sender that holds its first message until released.
type blocking struct {
	release chan struct{}
	started chan struct{}
	key     string
}

func (b *blocking) Send(ctx context.Context, m mail.Message) error {
	b.key = m.IdempotencyKey
	b.started <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil
}
