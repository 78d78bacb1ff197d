package alertcheck_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/tasks"
	"videogen/internal/infra/mail"
	"videogen/internal/jobs/ledgercheck"
	"videogen/internal/server"
	"videogen/internal/staff/metrics"
	"videogen/internal/staff/ops"
	"videogen/internal/testkit"
	"videogen/models"
)

var video = map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a lighthouse at dusk"}

// absentUntil are the metrics alert rules read that a freshly started instance does not export yet, by
// design, and what makes them appear (docs/decisions.md, "Alert series from the start"). Every other
// metric a rule names must be in the first scrape: a rule whose series appears only once something has
// happened cannot fire on an installation where it never did.
var absentUntil = map[string]string{
	// A share of traffic: with no request there is nothing to compare, and the rule's traffic guard
	// keeps it quiet anyway. Series by route and status, as many as the requests make.
	"videogen_http_requests_total": "a request is answered",
}

// TestMetricsNamedByRulesAreExported: every metric an alert rule reads is one a freshly started server's
// /metrics exports. A rule naming a metric that does not exist is valid PromQL that never fires, which
// promtool's own tests (over series they make up) cannot see; nor can they see a series that exists only
// after an event — a ledger check's time, which VideogenLedgerCheckStale reads, before any check ran.
//
// Samples, not only the registry's descriptions: a family with no series is not in the exposition. The
// server is as fresh as an installation gets: its ledger check and its Stripe reconciliation never ran
// (both intervals 0, so neither runs behind the test's back), and nobody sent it a request. Stripe is
// configured (the Stripe front), and REDIS_URL is set: videogen_ratelimit_shared exists only there.
// Only the metrics of absentUntil may be missing; the test then makes each appear.
func TestMetricsNamedByRulesAreExported(t *testing.T) {
	rules := loadRules(t)
	named := map[string][]string{} // metric → the alerts that read it
	for _, r := range rules {
		for _, m := range ruleMetrics(r.Expr) {
			named[m] = append(named[m], r.Alert)
		}
	}
	if len(named) < 15 {
		t.Fatalf("only %d metrics found in the rules' expressions: %v", len(named), named)
	}
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		front := testkit.NewStripeFront(t)
		front.List("GET /v1/checkout/sessions", []map[string]any{}, 0)
		front.List("GET /v1/payment_intents", []map[string]any{}, 0)
		env := front.Env()
		env["METRICS_ADDR"] = "127.0.0.1:0"
		env["LEDGER_CHECK_INTERVAL"] = "0"
		env["STRIPE_RECONCILE_INTERVAL"] = "0"
		// The machine's Redis: videogen_ratelimit_shared is exported where REDIS_URL is set.
		env["REDIS_URL"] = "redis://127.0.0.1:6379/0"
		s := testkit.Start(t, dbURL, env)

		var names []string
		for name := range named {
			names = append(names, name)
		}
		sort.Strings(names)
		fams := families(t, s)
		for _, name := range names {
			// up is Prometheus' own: whether it could scrape the target.
			if name == "up" || absentUntil[name] != "" {
				continue
			}
			if !exported(fams, name) {
				t.Errorf("%v read(s) %s, which a freshly started /metrics does not export", named[name], name)
			}
		}
		// Never run reads as nothing found, at time 0: decades old, which VideogenLedgerCheckStale fires on
		// (alerts_test.yml has the case).
		for _, name := range []string{"videogen_ledger_check_timestamp_seconds", "videogen_ledger_check_problems",
			"videogen_stripe_reconcile_timestamp_seconds", "videogen_stripe_reconcile_differences"} {
			if v, ok := value(fams, name); !ok || v != 0 {
				t.Errorf("%s before any run: %v (found %v), want 0", name, v, ok)
			}
		}
		if up, _ := value(fams, "videogen_metrics_database_up"); up != 1 {
			t.Errorf("videogen_metrics_database_up = %v", up)
		}
		for name := range absentUntil {
			if named[name] == nil {
				t.Errorf("absentUntil names %s, which no rule reads: take it out", name)
			}
			if exported(fams, name) {
				t.Errorf("%s is exported from the start: take it out of absentUntil", name)
			}
		}

		// What makes the rest appear: requests, answered and refused.
		acct := s.NewAccount(t, "10")
		s.CreateVideo(t, acct.Key, video)
		if r := s.Do(t, "GET", "/v1/models", "", nil); r.Status != 401 {
			t.Fatalf("no key: %d", r.Status)
		}
		fams = families(t, s)
		for name, until := range absentUntil {
			if !exported(fams, name) {
				t.Errorf("%v read(s) %s, which /metrics does not export once %s", named[name], name, until)
			}
		}
	})
}

// TestMetricsSeriesFromTheStart: the storage error counter has a series per operation at 0 before any
// failure, so increase() sees the first one; videogen_ratelimit_shared has none until the rate limiter
// reports (an instance without REDIS_URL never does, and has no 0 to be alerted on), then one.
func TestMetricsSeriesFromTheStart(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"METRICS_ADDR": "127.0.0.1:0"})
	fams := families(t, s)
	for _, op := range metrics.StorageOps {
		if v, ok := value(fams, "videogen_storage_errors_total", "op", op); !ok || v != 0 {
			t.Errorf("videogen_storage_errors_total{op=%q} = %v (found %v), want 0", op, v, ok)
		}
	}
	if v, ok := value(fams, "videogen_database_unavailable_total"); !ok || v != 0 {
		t.Errorf("videogen_database_unavailable_total = %v (found %v), want 0", v, ok)
	}
	if f := fams["videogen_ratelimit_shared"]; f != nil {
		t.Errorf("videogen_ratelimit_shared without Redis: %v", f)
	}
	s.Metrics.StorageFailed("put")
	s.Metrics.RateLimitShared(false)
	fams = families(t, s)
	for name, want := range map[string]float64{"videogen_ratelimit_shared": 0, "videogen_ratelimit_fallbacks_total": 1} {
		if v, ok := value(fams, name); !ok || v != want {
			t.Errorf("%s = %v (found %v), want %v", name, v, ok, want)
		}
	}
	if v, _ := value(fams, "videogen_storage_errors_total", "op", "put"); v != 1 {
		t.Errorf("videogen_storage_errors_total{op=\"put\"} = %v after a failed put", v)
	}
}

// TestMetricsChecksNeverRun: an instance whose ledger check has not run exports the check's series at
// 0 — nothing found, at time 0, which VideogenLedgerCheckStale reads as stale — and a check then gives
// its time; an instance without Stripe exports no reconciliation series at all, not even for a run
// recorded while Stripe was configured (no run could ever clear its differences).
func TestMetricsChecksNeverRun(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0", "LEDGER_CHECK_INTERVAL": "0"})
		ctx := context.Background()
		if err := s.DB.W.Create(&models.StripeReconcileRun{At: time.Now().UTC(), Owner: "web-1",
			Since: time.Now().UTC().Add(-72 * time.Hour), Differences: 2}).Error; err != nil {
			t.Fatal(err)
		}
		fams := families(t, s)
		for _, name := range []string{"videogen_ledger_check_timestamp_seconds", "videogen_ledger_check_problems", "videogen_ledger_drift_accounts"} {
			if v, ok := value(fams, name); !ok || v != 0 {
				t.Errorf("%s before any check: %v (found %v), want 0", name, v, ok)
			}
		}
		for _, name := range []string{"videogen_stripe_reconcile_differences", "videogen_stripe_reconcile_timestamp_seconds"} {
			if f := fams[name]; f != nil {
				t.Errorf("%s without Stripe: %v", name, f)
			}
		}

		before := time.Now()
		if _, err := ledgercheck.Check(ctx, s.DB, "alertcheck", time.Now); err != nil {
			t.Fatal(err)
		}
		fams = families(t, s)
		if at, _ := value(fams, "videogen_ledger_check_timestamp_seconds"); at < float64(before.Unix()) || at > float64(time.Now().Unix()+1) {
			t.Errorf("videogen_ledger_check_timestamp_seconds = %v after a check, want its time (%d)", at, before.Unix())
		}
		if v, ok := value(fams, "videogen_ledger_check_problems"); !ok || v != 0 {
			t.Errorf("videogen_ledger_check_problems = %v (found %v) after a clean check, want 0", v, ok)
		}
	})
}

// TestMetricsTasksOverdue: a task submitted upstream counts as overdue once its run deadline (RUN_TIMEOUT
// after submission) has passed and no sweep ended it — here no instance runs a worker; a task still
// waiting for a slot never does. The settings the rules compare with are exported beside it.
func TestMetricsTasksOverdue(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		clock := &aheadClock{}
		s := testkit.StartWith(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0", "WORKERS": "false",
			"RUN_TIMEOUT": "10m", "QUEUE_TIMEOUT": "20m"}, server.Options{Now: clock.Now})
		acct := s.NewAccount(t, "10")
		running := s.CreateVideo(t, acct.Key, video)["id"].(string)
		s.CreateVideo(t, acct.Key, video) // stays waiting for a slot

		// Submitted as the worker submits it: a slot, a submission time and a run deadline.
		cred := s.Pool.Configured()[0].ID
		got, err := s.Tasks.AssignWaiting(context.Background(), "alertcheck", time.Minute, 2, tasks.Routing{Credentials: []string{cred},
			Aliases: s.Pool.Aliases,
			Candidates: func(t *models.Task) ([]string, error) { // only the running one; the other stays waiting
				if t.ID != running {
					return nil, nil
				}
				return []string{cred}, nil
			},
			UpstreamModel: func(string, string) string { return "sim-model" }}, s.Cfg.RunTimeout, time.Now().Add(time.Hour))
		if err != nil || len(got.Tasks) != 1 || got.Tasks[0].ID != running {
			t.Fatalf("assign a slot to the running task: %+v %v", got.Tasks, err)
		}

		check := func(when string, want float64) {
			t.Helper()
			fams := families(t, s)
			if v, ok := value(fams, "videogen_tasks_overdue"); !ok || v != want {
				t.Errorf("%s: videogen_tasks_overdue = %v (found %v), want %v", when, v, ok, want)
			}
			for name, want := range map[string]float64{"videogen_run_timeout_seconds": 600, "videogen_queue_timeout_seconds": 1200} {
				if v, ok := value(fams, name); !ok || v != want {
					t.Errorf("%s = %v (found %v), want %v", name, v, ok, want)
				}
			}
		}
		check("just submitted", 0)
		clock.Advance(9 * time.Minute)
		check("9 minutes into a 10-minute RUN_TIMEOUT", 0)
		clock.Advance(2 * time.Minute)
		check("11 minutes in", 1)
	})
}

// TestMetricsUpstreamRefusals: a credential whose key the provider refused ([sim:401]) and one whose
// account is out of credit are each exported with their reason, 1, and 0 for the other reason; a mark
// cleared as a reload clears it (auth_error NULL, its kind left behind) is 0 again.
func TestMetricsUpstreamRefusals(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0", "SIM_CREDENTIALS": "2"})
		creds := s.Pool.Configured()
		if len(creds) != 2 {
			t.Fatalf("%d credentials", len(creds))
		}
		refused, broke := creds[0], creds[1]
		fams := families(t, s)
		for _, c := range creds {
			for _, reason := range []string{"key", "credit"} {
				if v, ok := value(fams, "videogen_credential_refused", "credential", c.ID, "label", c.Name, "reason", reason); !ok || v != 0 {
					t.Errorf("before any refusal: videogen_credential_refused{%s, %s} = %v (found %v)", c.ID, reason, v, ok)
				}
			}
		}

		// The provider's answer to the other credential was insufficient_quota: the mark Pool records.
		msg := "429 insufficient_quota: You exceeded your current quota"
		if err := s.DB.W.Model(&models.UpstreamCredential{}).Where("id = ?", broke.ID).
			Updates(map[string]any{"auth_error": msg, "auth_error_at": time.Now().UTC(), "auth_error_kind": "credit"}).Error; err != nil {
			t.Fatal(err)
		}
		// Only the first can take it, and the simulator refuses its key.
		acct := s.NewAccount(t, "10")
		s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a lighthouse [sim:401]"})

		want := map[[2]string]float64{{refused.ID, "key"}: 1, {refused.ID, "credit"}: 0, {broke.ID, "key"}: 0, {broke.ID, "credit"}: 1}
		var got map[[2]string]float64
		testkit.Eventually(t, 30*time.Second, "the key refused and the account out of credit are exported", func() bool {
			fams = families(t, s)
			got = map[[2]string]float64{}
			for k := range want {
				got[k], _ = value(fams, "videogen_credential_refused", "credential", k[0], "reason", k[1])
			}
			return fmt.Sprint(got) == fmt.Sprint(want)
		}, func() string { return fmt.Sprintf("got %v, want %v", got, want) })
		for _, c := range creds {
			if v, _ := value(fams, "videogen_credential_enabled", "credential", c.ID); v != 1 {
				t.Errorf("videogen_credential_enabled{%s} = %v: the refusal alerts need it", c.ID, v)
			}
		}

		// Cleared as Pool.Sync clears a mark: the kind stays in its column, the mark is gone.
		if err := s.DB.W.Model(&models.UpstreamCredential{}).Where("id = ?", broke.ID).
			Updates(map[string]any{"auth_error": nil, "auth_error_at": nil, "auth_error_key": nil}).Error; err != nil {
			t.Fatal(err)
		}
		if v, ok := value(families(t, s), "videogen_credential_refused", "credential", broke.ID, "reason", "credit"); !ok || v != 0 {
			t.Errorf("after the mark was cleared: videogen_credential_refused{credit} = %v (found %v), want 0", v, ok)
		}
	})
}

// TestMetricsUpstreamBreakerOpen: a credential whose submissions fail opens its circuit breaker (here
// after one failure, with a cooldown longer than the test); the instance publishes it to
// upstream_health and /metrics exports it open.
func TestMetricsUpstreamBreakerOpen(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0", "SIM_CREDENTIALS": "1",
			"UPSTREAM_BREAKER_FAILURES": "1", "UPSTREAM_BREAKER_COOLDOWN": "1h", "UPSTREAMS_WATCH_INTERVAL": "100ms"})
		cred := s.Pool.Configured()[0]
		if v, ok := value(families(t, s), "videogen_upstream_breaker_open", "credential", cred.ID, "label", cred.Name); !ok || v != 0 {
			t.Fatalf("before any failure: videogen_upstream_breaker_open = %v (found %v), want 0", v, ok)
		}
		acct := s.NewAccount(t, "10")
		s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a lighthouse [sim:5xx-once]"})
		var v float64
		testkit.Eventually(t, 30*time.Second, "the breaker is exported open", func() bool {
			v, _ = value(families(t, s), "videogen_upstream_breaker_open", "credential", cred.ID, "label", cred.Name)
			return v == 1
		}, func() string { return fmt.Sprintf("videogen_upstream_breaker_open = %v", v) })
	})
}

// failingMail fails every e-mail until told to deliver.
type failingMail struct {
	deliver  atomic.Bool
	attempts atomic.Int64
}

func (f *failingMail) Send(ctx context.Context, m mail.Message) error {
	f.attempts.Add(1)
	if !f.deliver.Load() {
		return errors.New("the mail provider is down (test)")
	}
	return nil
}

// TestMetricsJobs: every queue and state is exported from the start, at zero; an e-mail the provider
// keeps failing is a retryable job of the mail queue (what VideogenMailFailing reads); once delivered it
// is counted no more, and no job waits for a worker.
func TestMetricsJobs(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		sender := &failingMail{}
		s := testkit.StartWith(t, dbURL, map[string]string{"METRICS_ADDR": "127.0.0.1:0", "WORKERS": "false"},
			server.Options{Mail: sender})
		fams := families(t, s)
		for _, q := range ops.JobQueues {
			for _, st := range ops.JobStates {
				if _, ok := value(fams, "videogen_jobs", "queue", q, "state", st); !ok {
					t.Errorf("no videogen_jobs{queue=%q,state=%q} in the first scrape", q, st)
				}
			}
			if v, ok := value(fams, "videogen_jobs_waiting_seconds", "queue", q); !ok || v != 0 {
				t.Errorf("videogen_jobs_waiting_seconds{queue=%q} = %v (found %v), want 0", q, v, ok)
			}
		}
		retrying := func() float64 {
			v, _ := value(families(t, s), "videogen_jobs", "queue", "mail", "state", "retryable")
			return v
		}
		if v := retrying(); v != 0 {
			t.Errorf("nothing queued: %v e-mails retrying", v)
		}

		// Queued as every e-mail is, in the transaction of what it is about.
		if err := s.DB.Tx(context.Background(), func(tx *gorm.DB) error {
			return s.Outbox.Enqueue(tx, mail.Message{To: "ada@example.com", Subject: "Confirm your address", Text: "a link"})
		}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the failed e-mail retrying", func() bool { return retrying() == 1 })
		sender.deliver.Store(true)
		testkit.Eventually(t, 30*time.Second, "the e-mail delivered", func() bool {
			var sent int64
			s.DB.R.Model(&models.MailOutbox{}).Where("sent_at IS NOT NULL").Count(&sent)
			return sent == 1
		})
		// River completes the job just after the record (its batch completer): then no state counts it.
		var left []string
		testkit.Eventually(t, 10*time.Second, "the e-mail's job counted in no state", func() bool {
			fams, left = families(t, s), nil
			for _, st := range ops.JobStates {
				if v, _ := value(fams, "videogen_jobs", "queue", "mail", "state", st); v != 0 {
					left = append(left, fmt.Sprintf("%v %s", v, st))
				}
			}
			return len(left) == 0
		}, func() string { return "after delivery: e-mails " + strings.Join(left, ", ") })
	})
}

// TestMetricsStripeReconcile: with Stripe configured, before any reconciliation the series read 0 at
// time 0 (never run, nothing found); a run is recorded and its differences exported with its time; a
// later clean run brings them to 0.
func TestMetricsStripeReconcile(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		front := testkit.NewStripeFront(t)
		nobody := map[string]any{"id": "cs_test_nobody", "object": "checkout.session", "mode": "payment", "currency": "usd",
			"amount_total": 1234, "payment_status": "paid", "status": "complete", "client_reference_id": "topup_nobody",
			"metadata": map[string]any{"topup_id": "topup_nobody"}}
		front.List("GET /v1/checkout/sessions", []map[string]any{nobody}, 0)
		front.List("GET /v1/payment_intents", []map[string]any{}, 0)
		env := front.Env()
		env["METRICS_ADDR"] = "127.0.0.1:0"
		env["STRIPE_RECONCILE_INTERVAL"] = "0" // the test runs it
		s := testkit.Start(t, dbURL, env)
		fams := families(t, s)
		for _, name := range []string{"videogen_stripe_reconcile_differences", "videogen_stripe_reconcile_timestamp_seconds"} {
			if v, ok := value(fams, name); !ok || v != 0 {
				t.Errorf("%s before any reconciliation: %v (found %v), want 0", name, v, ok)
			}
		}

		ctx := context.Background()
		before := time.Now()
		report, err := s.Payments.Reconcile(ctx, time.Now().Add(-72*time.Hour), false)
		if err != nil || len(report.Differences) != 1 {
			t.Fatalf("reconcile: %v %+v", err, report)
		}
		fams = families(t, s)
		if v, ok := value(fams, "videogen_stripe_reconcile_differences"); !ok || v != 1 {
			t.Errorf("videogen_stripe_reconcile_differences = %v (found %v), want 1", v, ok)
		}
		at, _ := value(fams, "videogen_stripe_reconcile_timestamp_seconds")
		if at < float64(before.Unix()) || at > float64(time.Now().Unix()+1) {
			t.Errorf("videogen_stripe_reconcile_timestamp_seconds = %v, want the run's time (%d)", at, before.Unix())
		}
		var run models.StripeReconcileRun
		if err := s.DB.R.Order("id DESC").Take(&run).Error; err != nil {
			t.Fatal(err)
		}
		if run.Differences != 1 || run.Sessions != 1 || !strings.Contains(run.Detail, "paid_unknown_topup cs_test_nobody") {
			t.Errorf("recorded run: %+v", run)
		}

		front.List("GET /v1/checkout/sessions", []map[string]any{}, 0)
		if _, err := s.Payments.Reconcile(ctx, time.Now().Add(-72*time.Hour), false); err != nil {
			t.Fatal(err)
		}
		fams = families(t, s)
		if v, ok := value(fams, "videogen_stripe_reconcile_differences"); !ok || v != 0 {
			t.Errorf("after a clean run: videogen_stripe_reconcile_differences = %v (found %v), want 0", v, ok)
		}
		if at2, _ := value(fams, "videogen_stripe_reconcile_timestamp_seconds"); at2 < at {
			t.Errorf("the newest run's time went back: %v then %v", at, at2)
		}
	})
}
