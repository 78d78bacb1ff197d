package auth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/auth"
	"videogen/internal/domain/notify"
	"videogen/internal/infra/mail"
	"videogen/internal/infra/queue"
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
// one nobody registered — the same statements, in the same order, and one job of the same shape — so its
// answer cannot tell them apart by its time. The link and its e-mail are made afterwards, by the job, for
// the registered one only; the job leaves nothing behind.
func TestResetRequestsAnswerAlike(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		d := testkit.OpenDB(t, dbURL)
		ctx := context.Background()
		c := &clock{t: time.Now().UTC().Truncate(time.Microsecond)}
		log := slog.New(slog.DiscardHandler)
		q, err := queue.New(d, queue.Config{ID: "test", Poll: 20 * time.Millisecond, Now: c.now, Log: log})
		if err != nil {
			t.Fatal(err)
		}
		sent := mail.NewRecorder()
		outbox, err := mail.NewOutbox(d, q, sent, log, mail.OutboxConfig{Secrets: []string{"test-app-secret"}, Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		svc := &auth.Service{DB: d, Notify: &notify.Notifier{Outbox: outbox}, BaseURL: "https://videogen.example", Now: c.now,
			Secrets: []string{"test-app-secret"}, Throttle: auth.Throttles{Recovery: ratelimit.NewLocal(auth.DefaultRates.Recovery)}, Queue: q}
		queue.Add(q, svc.ResetWorker())
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
		requests := func() []*rivertype.JobRow {
			t.Helper()
			res, err := q.Client().JobList(ctx, river.NewJobListParams().Kinds(auth.ResetArgs{}.Kind()))
			if err != nil {
				t.Fatal(err)
			}
			return res.Jobs
		}
		handled := func(what string) {
			t.Helper()
			testkit.Eventually(t, 30*time.Second, what, func() bool { return len(requests()) == 0 })
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
		if !slices.Equal(known, unknown) {
			t.Fatalf("the two answers did different work:\nregistered: %q\nunknown:    %q", known, unknown)
		}
		for _, q := range known {
			if strings.Contains(q, "users") || strings.Contains(q, "email_tokens") || strings.Contains(q, "mail_outbox") {
				t.Fatalf("answering read or wrote %q: work that differs by address", q)
			}
		}
		// Each answer inserted one job (River's INSERT, which the recorder above does not see), alike.
		jobs := requests()
		if len(jobs) != 2 {
			t.Fatalf("%d requests queued, want 2", len(jobs))
		}
		shape := func(j *rivertype.JobRow) string {
			var args map[string]any
			if err := json.Unmarshal(j.EncodedArgs, &args); err != nil {
				t.Fatal(err)
			}
			return fmt.Sprintf("%s %s %s %d %v", j.Kind, j.Queue, j.State, j.MaxAttempts, slices.Sorted(maps.Keys(args)))
		}
		if a, b := shape(jobs[0]), shape(jobs[1]); a != b {
			t.Fatalf("the two requests' jobs differ: %s against %s", a, b)
		}
		// Not an address at all: nothing queued, and the same (empty) answer.
		if err := svc.RequestReset(ctx, "not an address", auth.Client{IP: "192.0.2.1"}); err != nil {
			t.Fatal(err)
		}
		if n := len(requests()); n != 2 {
			t.Fatalf("%d requests queued, want 2", n)
		}
		if n := count(&models.EmailToken{}, "purpose = ?", models.PurposeReset); n != 0 {
			t.Fatalf("%d reset links issued while answering", n)
		}

		// The job: a link for the registered address, in the same commit as its e-mail; nothing for the other.
		if err := q.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = q.Stop(context.Background()) })
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if m, err := sent.WaitFor(wctx, "known@example.com"); err != nil || !strings.Contains(m.Text, "https://videogen.example/password/reset?token=") {
			t.Fatalf("the reset e-mail: %+v, %v", m, err)
		}
		handled("both requests handled, and forgotten")
		if n := count(&models.EmailToken{}, "purpose = ?", models.PurposeReset); n != 1 {
			t.Fatalf("%d reset links, want 1", n)
		}
		if got, want := count(&models.MailOutbox{}, "recipient = ?", "known@example.com"), int64(1); got != want {
			t.Fatalf("%d e-mails queued to the registered address", got)
		}
		if n := count(&models.MailOutbox{}, "recipient = ?", "nobody@example.com"); n != 0 {
			t.Fatal("an e-mail was queued to an address nobody registered")
		}

		// A request older than a link lasts (the service was down) is dropped, not answered late.
		if err := q.Insert(ctx, auth.ResetArgs{Email: "known@example.com", RequestedAt: c.now().Add(-auth.ResetTTL - time.Minute),
			ClientIP: "192.0.2.1"}, nil); err != nil {
			t.Fatal(err)
		}
		handled("the stale request dropped")
		if n := count(&models.MailOutbox{}, "recipient = ? AND kind = 'reset'", "known@example.com"); n != 1 {
			t.Fatalf("a stale request: %d reset e-mails, want the first only", n)
		}

		// The e-mail throttle holds: three e-mails to an address in ten minutes, then requests are dropped.
		for range 4 {
			if err := svc.RequestReset(ctx, "known@example.com", auth.Client{IP: "192.0.2.1"}); err != nil {
				t.Fatal(err)
			}
		}
		handled("four more requests handled")
		if n := count(&models.MailOutbox{}, "recipient = ? AND kind = 'reset'", "known@example.com"); n != 3 {
			t.Fatalf("four requests after one e-mail: %d reset e-mails in all, want 3", n)
		}
	})
}
