package auth_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/auth"
	"videogen/internal/domain/notify"
	"videogen/internal/infra/mail"
	"videogen/internal/infra/ratelimit"
	"videogen/internal/testkit"
	"videogen/models"
)

// statements records the SQL a database handle runs (both its writer and its reader), with the
// arguments left out: what work was done, not for whom.
type statements struct {
	mu  sync.Mutex
	sql []string
}

func (s *statements) watch(t *testing.T, dbs ...*gorm.DB) {
	t.Helper()
	record := func(tx *gorm.DB) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.sql = append(s.sql, tx.Statement.SQL.String())
	}
	for i, d := range dbs {
		name := "test:record-statements-" + string(rune('a'+i))
		cb := d.Callback()
		for _, err := range []error{
			cb.Create().After("gorm:create").Register(name, record),
			cb.Query().After("gorm:query").Register(name, record),
			cb.Update().After("gorm:update").Register(name, record),
			cb.Delete().After("gorm:delete").Register(name, record),
			cb.Row().After("gorm:row").Register(name, record),
			cb.Raw().After("gorm:raw").Register(name, record),
		} {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (s *statements) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sql
	s.sql = nil
	return out
}

// TestResetRequestsAnswerAlike: the reset form does the very same work for a registered address as for
// one nobody registered — the same statements, in the same order — so its answer cannot tell them apart
// by its time. The link and its e-mail are made afterwards, by the job, for the registered one only.
func TestResetRequestsAnswerAlike(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		d := testkit.OpenDB(t, dbURL)
		ctx := context.Background()
		c := &clock{t: time.Now().UTC().Truncate(time.Microsecond)}
		sent := mail.NewRecorder()
		outbox, err := mail.NewOutbox(d, sent, slog.Default(), mail.OutboxConfig{Owner: "test", Secrets: []string{"test-app-secret"}, Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		svc := &auth.Service{DB: d, Notify: &notify.Notifier{Outbox: outbox}, BaseURL: "https://videogen.example", Now: c.now,
			Secrets: []string{"test-app-secret"}, Throttle: auth.Throttles{Recovery: ratelimit.NewLocal(auth.DefaultRates.Recovery)}}
		if _, err := accounts.Create(ctx, d, accounts.NewUser{Email: "known@example.com", Password: "paper-boats-float-42", Verified: true}); err != nil {
			t.Fatal(err)
		}
		count := func(model any, where string, args ...any) int64 {
			t.Helper()
			var n int64
			if err := d.R.Model(model).Where(where, args...).Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}

		var rec statements
		rec.watch(t, d.W, d.R)
		if err := svc.RequestReset(ctx, "Known@Example.com", auth.Client{IP: "192.0.2.1"}); err != nil {
			t.Fatal(err)
		}
		known := rec.take()
		if err := svc.RequestReset(ctx, "nobody@example.com", auth.Client{IP: "192.0.2.1"}); err != nil {
			t.Fatal(err)
		}
		unknown := rec.take()
		if len(known) == 0 || !slices.Equal(known, unknown) {
			t.Fatalf("the two answers did different work:\nregistered: %q\nunknown:    %q", known, unknown)
		}
		for _, q := range known {
			if strings.Contains(q, "users") || strings.Contains(q, "email_tokens") || strings.Contains(q, "mail_outbox") {
				t.Fatalf("answering read or wrote %q: work that differs by address", q)
			}
		}
		// Not an address at all: nothing queued, and the same (empty) answer.
		if err := svc.RequestReset(ctx, "not an address", auth.Client{IP: "192.0.2.1"}); err != nil {
			t.Fatal(err)
		}
		if n := count(&models.ResetRequest{}, "1 = 1"); n != 2 {
			t.Fatalf("%d requests queued, want 2", n)
		}
		if n := count(&models.EmailToken{}, "purpose = ?", models.PurposeReset); n != 0 {
			t.Fatalf("%d reset links issued while answering", n)
		}

		// The job: a link for the registered address, in the same commit as its e-mail; nothing for the other.
		n, err := svc.HandleResetRequests(ctx)
		if err != nil || n != 1 {
			t.Fatalf("handled: %d e-mails, %v; want 1", n, err)
		}
		if n := count(&models.ResetRequest{}, "1 = 1"); n != 0 {
			t.Fatalf("%d requests left after handling", n)
		}
		if n := count(&models.EmailToken{}, "purpose = ?", models.PurposeReset); n != 1 {
			t.Fatalf("%d reset links, want 1", n)
		}
		if got, want := count(&models.MailOutbox{}, "recipient = ?", "known@example.com"), int64(1); got != want {
			t.Fatalf("%d e-mails queued to the registered address", got)
		}
		if n := count(&models.MailOutbox{}, "recipient = ?", "nobody@example.com"); n != 0 {
			t.Fatal("an e-mail was queued to an address nobody registered")
		}
		if _, err := outbox.DeliverDue(ctx); err != nil {
			t.Fatal(err)
		}
		if m, ok := sent.Last("known@example.com"); !ok || !strings.Contains(m.Text, "https://videogen.example/password/reset?token=") {
			t.Fatalf("the reset e-mail: %+v", m)
		}

		// A request older than a link lasts (the service was down) is dropped, not answered late.
		if err := svc.RequestReset(ctx, "known@example.com", auth.Client{IP: "192.0.2.1"}); err != nil {
			t.Fatal(err)
		}
		c.add(auth.ResetTTL + time.Minute)
		if n, err := svc.HandleResetRequests(ctx); err != nil || n != 0 || count(&models.ResetRequest{}, "1 = 1") != 0 {
			t.Fatalf("a stale request: %d e-mails, %v", n, err)
		}

		// The e-mail throttle holds: three e-mails to an address in ten minutes, then requests are dropped.
		for range 4 {
			if err := svc.RequestReset(ctx, "known@example.com", auth.Client{IP: "192.0.2.1"}); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := svc.HandleResetRequests(ctx); err != nil || n != 2 {
			t.Fatalf("four requests after one e-mail: %d e-mails, %v; want 2 (three in all)", n, err)
		}
	})
}
