package main_test

import (
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/internal/infra/ids"
	"videogen/internal/testkit"
	"videogen/models"
)

// reconcile runs `videogen stripe reconcile args...` and returns stdout, stderr and the exit status. The
// race detector's runtime sleeps a second before a successful exit by default (atexit_sleep_ms), which
// would be most of each run's time here; GORACE turns that off.
func reconcile(t *testing.T, dir string, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	env = maps.Clone(env)
	env["GORACE"] = "atexit_sleep_ms=0"
	return run(t, dir, env, append([]string{"stripe", "reconcile"}, args...)...)
}

// reconcileRow is one line of `videogen stripe reconcile`'s table.
type reconcileRow struct {
	Kind, StripeID, Topup, Account, StripeAmount, Credited, Note string
}

var reconcileKinds = map[string]bool{"paid_not_credited": true, "paid_unknown_topup": true, "amount_differs": true,
	"credited_not_paid": true, "flagged_for_staff": true}

// reconcileRows reads the difference lines of the command's output.
func reconcileRows(t *testing.T, out string) []reconcileRow {
	t.Helper()
	var rows []reconcileRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || !reconcileKinds[f[0]] {
			continue
		}
		rows = append(rows, reconcileRow{f[0], f[1], f[2], f[3], f[4], f[5], strings.Join(f[6:], " ")})
	}
	return rows
}

// reconcileSince reads the start of the period from the command's header line.
func reconcileSince(t *testing.T, out string) time.Time {
	t.Helper()
	_, rest, ok := strings.Cut(out, "Stripe reconciliation since ")
	if !ok {
		t.Fatalf("no header:\n%s", out)
	}
	at, err := time.Parse(time.RFC3339, strings.Fields(rest)[0])
	if err != nil {
		t.Fatalf("header: %v\n%s", err, out)
	}
	return at
}

// listCalls returns the calls to exactly path (not to one object under it).
func listCalls(front *testkit.StripeFront, path string) []testkit.StripeCall {
	var out []testkit.StripeCall
	for _, c := range front.Calls(path) {
		if c.Method == "GET" && c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// checkoutTopup writes a pending Checkout top-up with its session, as StartCheckout leaves it.
func checkoutTopup(t *testing.T, s *testkit.Server, accountID int64, cents int64, created time.Time) *models.Topup {
	t.Helper()
	id := ids.NewTopupID()
	sess := "cs_test_" + id
	top := &models.Topup{ID: id, AccountID: accountID, Source: models.TopupCheckout, State: models.TopupPending,
		AmountMicros: cents * 10_000, StripeSessionID: &sess, CreatedAt: created, UpdatedAt: created}
	if err := s.DB.W.Create(top).Error; err != nil {
		t.Fatal(err)
	}
	return top
}

// sessionOf is a Checkout Session of a top-up as Stripe lists it (and sends it in events).
func sessionOf(top *models.Topup, cents int64, paymentStatus string) map[string]any {
	return map[string]any{
		"id": *top.StripeSessionID, "object": "checkout.session", "mode": "payment", "currency": "usd",
		"amount_total": cents, "payment_status": paymentStatus, "status": "complete", "created": top.CreatedAt.Unix(),
		"client_reference_id": top.ID, "payment_intent": "pi_" + top.ID,
		"metadata": map[string]any{"topup_id": top.ID, "account_id": fmt.Sprint(top.AccountID), "source": models.TopupCheckout},
	}
}

// intentOf is a PaymentIntent as Stripe lists it.
func intentOf(id string, cents int64, status string, metadata map[string]any) map[string]any {
	received := int64(0)
	if status == "succeeded" {
		received = cents
	}
	return map[string]any{"id": id, "object": "payment_intent", "amount": cents, "amount_received": received,
		"currency": "usd", "status": status, "created": time.Now().Add(-time.Hour).Unix(), "metadata": metadata}
}

func availableMicros(t *testing.T, s *testkit.Server, accountID int64) int64 {
	t.Helper()
	var a models.Account
	if err := s.DB.R.Take(&a, accountID).Error; err != nil {
		t.Fatal(err)
	}
	return a.AvailableMicros
}

func topupEntries(t *testing.T, s *testkit.Server, externalID string) []models.LedgerEntry {
	t.Helper()
	var es []models.LedgerEntry
	if err := s.DB.R.Where("kind = ? AND external_id = ?", models.KindTopup, externalID).Find(&es).Error; err != nil {
		t.Fatal(err)
	}
	return es
}

func topupNow(t *testing.T, s *testkit.Server, id string) models.Topup {
	t.Helper()
	var top models.Topup
	if err := s.DB.R.Take(&top, "id = ?", id).Error; err != nil {
		t.Fatal(err)
	}
	return top
}

// reconcileFixture is a server's database with top-ups in every state reconciliation looks at, and a
// Stripe front that will list their payments.
type reconcileFixture struct {
	s            *testkit.Server
	front        *testkit.StripeFront
	env          map[string]string
	dir          string
	buyer, saver testkit.Account
	// paid and paid2 were credited by their webhooks, old too but before the period; lost's session was
	// paid but its webhook never came; unpaid's session is not paid; recharge is an auto-recharge whose
	// PaymentIntent (rpi) succeeded without its webhook.
	paid, paid2, old, lost, unpaid, recharge *models.Topup
	rpi                                      string
	foreign                                  map[string]any // a paid session that is not videogen's
	intents                                  []map[string]any
	buyerBefore                              int64
}

func newReconcileFixture(t *testing.T, dbURL string) *reconcileFixture {
	t.Helper()
	f := &reconcileFixture{front: testkit.NewStripeFront(t), dir: t.TempDir()}
	f.env = testkit.Env(t, dbURL, f.front.Env())
	f.env["STRIPE_RECONCILE_INTERVAL"] = "0" // the server must not reconcile on its own here
	s := testkit.Start(t, dbURL, f.env)
	f.s = s
	f.buyer, f.saver = s.NewAccount(t, ""), s.NewAccount(t, "")
	anHourAgo := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	webhookPaid := func(top *models.Topup, cents int64) {
		t.Helper()
		ev := testkit.StripeEvent("evt_"+top.ID, "checkout.session.completed", sessionOf(top, cents, "paid"))
		if r := s.PostStripeEvent(t, ev); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
	}
	f.paid = checkoutTopup(t, s, f.buyer.ID, 2550, anHourAgo)
	webhookPaid(f.paid, 2550)
	f.paid2 = checkoutTopup(t, s, f.buyer.ID, 1000, anHourAgo)
	webhookPaid(f.paid2, 1000)
	f.old = checkoutTopup(t, s, f.buyer.ID, 500, time.Now().Add(-96*time.Hour).UTC())
	webhookPaid(f.old, 500)
	f.lost = checkoutTopup(t, s, f.buyer.ID, 4000, anHourAgo)
	f.unpaid = checkoutTopup(t, s, f.buyer.ID, 1200, anHourAgo)
	rid := ids.NewTopupID()
	f.rpi = "pi_recharge_" + rid
	f.recharge = &models.Topup{ID: rid, AccountID: f.saver.ID, Source: models.TopupAutoRecharge, State: models.TopupPending,
		AmountMicros: 20_000_000, StripePaymentIntentID: &f.rpi, CreatedAt: anHourAgo, UpdatedAt: anHourAgo}
	if err := s.DB.W.Create(f.recharge).Error; err != nil {
		t.Fatal(err)
	}
	if f.buyerBefore = availableMicros(t, s, f.buyer.ID); f.buyerBefore != 40_500_000 {
		t.Fatalf("buyer's balance after the webhooks: %d", f.buyerBefore)
	}
	f.foreign = map[string]any{"id": "cs_test_not_ours", "object": "checkout.session", "mode": "payment", "currency": "usd",
		"amount_total": 9900, "payment_status": "paid", "status": "complete", "client_reference_id": nil, "metadata": map[string]any{}}
	f.intents = []map[string]any{
		intentOf("pi_"+f.paid.ID, 2550, "succeeded", map[string]any{"topup_id": f.paid.ID, "source": models.TopupCheckout}),
		intentOf(f.rpi, 2000, "succeeded", map[string]any{"topup_id": f.recharge.ID, "account_id": fmt.Sprint(f.saver.ID), "source": models.TopupAutoRecharge}),
		intentOf("pi_still_processing", 2000, "processing", map[string]any{"topup_id": "topup_elsewhere", "source": models.TopupAutoRecharge}),
		intentOf("pi_not_ours", 700, "succeeded", map[string]any{}),
	}
	f.front.List("GET /v1/payment_intents", f.intents, 1)
	return f
}

// checkRows compares the command's difference lines with want; each want.Note is a part of the note.
func checkRows(t *testing.T, out string, want []reconcileRow) {
	t.Helper()
	got := reconcileRows(t, out)
	if len(got) != len(want) {
		t.Fatalf("%d differences, want %d:\n%s", len(got), len(want), out)
	}
	for i, w := range want {
		g := got[i]
		if !strings.Contains(g.Note, w.Note) {
			t.Errorf("row %d: note %q lacks %q", i, g.Note, w.Note)
		}
		g.Note, w.Note = "", ""
		if g != w {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
}

// checkCredited checks that the top-up was credited once, by Stripe's amount, under externalID.
func (f *reconcileFixture) checkCredited(t *testing.T, top *models.Topup, externalID string, micros int64) {
	t.Helper()
	es := topupEntries(t, f.s, externalID)
	if len(es) != 1 || es[0].AccountID != top.AccountID || es[0].DeltaAvailable != micros {
		t.Errorf("topup entries of %s: %+v", externalID, es)
	}
	if now := topupNow(t, f.s, top.ID); now.State != models.TopupCredited || now.CreditedAt == nil || now.CreditedMicros != micros {
		t.Errorf("top-up %s: %+v", top.ID, now)
	}
}

// TestStripeReconcileDifferences: against Stripe's list format served a page at a time, the command
// fetches every page and lists every kind of difference — payments whose webhook never came, an amount
// that differs, a paid session naming a top-up videogen does not have, a credited top-up of the period
// missing from Stripe's list — skips payments that are not paid or not videogen's and top-ups before the
// period, exits 1, and without --apply changes nothing.
func TestStripeReconcileDifferences(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		f := newReconcileFixture(t, dbURL)
		unknown := map[string]any{"id": "cs_test_unknown_topup", "object": "checkout.session", "mode": "payment", "currency": "usd",
			"amount_total": 1500, "payment_status": "paid", "status": "complete", "client_reference_id": "topup_gone",
			"metadata": map[string]any{"topup_id": "topup_gone", "account_id": fmt.Sprint(f.buyer.ID)}}
		// paid2 is missing; paid's amount differs.
		sessions := []map[string]any{sessionOf(f.paid, 2000, "paid"), f.foreign, unknown,
			sessionOf(f.lost, 4000, "paid"), sessionOf(f.unpaid, 1200, "unpaid")}
		f.front.List("GET /v1/checkout/sessions", sessions, 1)

		out, errOut, code := reconcile(t, f.dir, f.env, "--since", "72h")
		if code != 1 {
			t.Fatalf("exit %d, want 1 (differences remain)\n%s%s", code, out, errOut)
		}
		buyer := fmt.Sprint(f.buyer.ID)
		checkRows(t, out, []reconcileRow{
			{"amount_differs", *f.paid.StripeSessionID, f.paid.ID, buyer, "$20.00", "$25.50", "differs from what Stripe collected"},
			{"paid_unknown_topup", "cs_test_unknown_topup", "-", "-", "$15.00", "-", "no top-up for it"},
			{"paid_not_credited", *f.lost.StripeSessionID, f.lost.ID, buyer, "$40.00", "-", "never credited"},
			{"paid_not_credited", f.rpi, f.recharge.ID, fmt.Sprint(f.saver.ID), "$20.00", "-", "never credited"},
			{"credited_not_paid", *f.paid2.StripeSessionID, f.paid2.ID, buyer, "-", "$10.00", "lists no paid payment"},
		})
		if !strings.Contains(out, "3 paid Checkout Session(s) and 1 succeeded auto-recharge PaymentIntent(s) listed; 5 difference(s)") ||
			!strings.Contains(out, "5 difference(s); nothing was changed") || !strings.Contains(errOut, "5 difference(s)") {
			t.Errorf("header or summary:\n%s%s", out, errOut)
		}
		if strings.Contains(out, "credited now") || strings.Contains(out, f.old.ID) {
			t.Errorf("credited without --apply, or the top-up credited before the period is listed:\n%s", out)
		}

		// Every page, each from where the last ended, all for the same period.
		since := reconcileSince(t, out)
		if d := time.Since(since) - 72*time.Hour; d < 0 || d > time.Minute {
			t.Errorf("the period starts %s, not 72 h ago", since)
		}
		for path, objects := range map[string][]map[string]any{"/v1/checkout/sessions": sessions, "/v1/payment_intents": f.intents} {
			calls := listCalls(f.front, path)
			if len(calls) != len(objects) {
				t.Fatalf("%d pages of %s fetched for %d objects a page each", len(calls), path, len(objects))
			}
			for i, c := range calls {
				after := ""
				if i > 0 {
					after = objects[i-1]["id"].(string)
				}
				if c.Form.Get("created[gte]") != strconv.FormatInt(since.Unix(), 10) || c.Form.Get("limit") != "100" ||
					c.Form.Get("starting_after") != after {
					t.Errorf("%s page %d: %v, want created[gte]=%d limit=100 starting_after=%q", path, i, c.Form, since.Unix(), after)
				}
			}
		}

		// Nothing changed.
		for _, top := range []*models.Topup{f.lost, f.recharge, f.unpaid} {
			if now := topupNow(t, f.s, top.ID); now.State != models.TopupPending || now.CreditedAt != nil {
				t.Errorf("changed without --apply: %+v", now)
			}
		}
		if es := append(topupEntries(t, f.s, *f.lost.StripeSessionID), topupEntries(t, f.s, f.rpi)...); len(es) != 0 {
			t.Errorf("credited without --apply: %+v", es)
		}
		if got := availableMicros(t, f.s, f.buyer.ID); got != f.buyerBefore {
			t.Errorf("buyer's balance %d, want %d", got, f.buyerBefore)
		}
		f.checkCredited(t, f.paid, *f.paid.StripeSessionID, 25_500_000)
	})
}

// TestStripeReconcileApply: --apply credits the payments whose webhook never came — a Checkout Session
// and an auto-recharge PaymentIntent — through the webhook's exactly-once path and exits 0, as nothing
// remains; run again, it credits nothing more.
func TestStripeReconcileApply(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		f := newReconcileFixture(t, dbURL)
		s := f.s
		f.front.List("GET /v1/checkout/sessions", []map[string]any{sessionOf(f.paid, 2550, "paid"), sessionOf(f.paid2, 1000, "paid"),
			f.foreign, sessionOf(f.lost, 4000, "paid"), sessionOf(f.unpaid, 1200, "unpaid")}, 1)

		out, errOut, code := reconcile(t, f.dir, f.env, "--since", "72h", "--apply")
		if code != 0 {
			t.Fatalf("exit %d, want 0 (the differences were resolved)\n%s%s", code, out, errOut)
		}
		checkRows(t, out, []reconcileRow{
			{"paid_not_credited", *f.lost.StripeSessionID, f.lost.ID, fmt.Sprint(f.buyer.ID), "$40.00", "-", "credited now"},
			{"paid_not_credited", f.rpi, f.recharge.ID, fmt.Sprint(f.saver.ID), "$20.00", "-", "credited now"},
		})
		if !strings.Contains(out, "3 paid Checkout Session(s) and 1 succeeded auto-recharge PaymentIntent(s) listed; 2 difference(s)") ||
			!strings.Contains(out, "2 credited now; 0 difference(s) remain") {
			t.Errorf("header or summary:\n%s", out)
		}
		f.checkCredited(t, f.lost, *f.lost.StripeSessionID, 40_000_000)
		f.checkCredited(t, f.recharge, f.rpi, 20_000_000)
		// The receipt is the server's job (it may have sent it already).
		if top := topupNow(t, s, f.lost.ID); top.StripePaymentIntentID == nil || *top.StripePaymentIntentID != "pi_"+f.lost.ID ||
			(!top.ReceiptDue && top.ReceiptURL == "") {
			t.Errorf("the credited top-up lacks its payment or its receipt: %+v", top)
		}
		if got := availableMicros(t, s, f.buyer.ID); got != f.buyerBefore+40_000_000 {
			t.Errorf("buyer's balance %d, want %d", got, f.buyerBefore+40_000_000)
		}
		if got := availableMicros(t, s, f.saver.ID); got != 20_000_000 {
			t.Errorf("saver's balance %d", got)
		}
		if top := topupNow(t, s, f.unpaid.ID); top.State != models.TopupPending || top.CreditedAt != nil {
			t.Errorf("the unpaid session's top-up changed: %+v", top)
		}

		// Again: nothing more is credited.
		out, errOut, code = reconcile(t, f.dir, f.env, "--since", "72h", "--apply")
		if code != 0 || !strings.Contains(out, "no differences") || len(reconcileRows(t, out)) != 0 {
			t.Fatalf("second --apply: exit %d\n%s%s", code, out, errOut)
		}
		f.checkCredited(t, f.lost, *f.lost.StripeSessionID, 40_000_000)
		f.checkCredited(t, f.recharge, f.rpi, 20_000_000)
		if got := availableMicros(t, s, f.buyer.ID); got != f.buyerBefore+40_000_000 {
			t.Errorf("buyer's balance %d after a second --apply", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestStripeReconcileCallShape: against stripe-mock itself, the command lists sessions and payment
// intents created since the period's start, a hundred a page, and changes nothing.
func TestStripeReconcileCallShape(t *testing.T) {
	front := testkit.NewStripeFront(t)
	env := testkit.Env(t, testkit.EmptySQLiteURL(t), front.Env())
	dir := t.TempDir()
	// reconcile works on an existing database only: make it as an operator would.
	if out, errOut, code := run(t, dir, env, "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, errOut)
	}
	start := time.Now()
	out, errOut, code := reconcile(t, dir, env, "--since", "72h", "--apply")
	end := time.Now()
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	since := reconcileSince(t, out)
	if since.Before(start.Add(-72*time.Hour).Truncate(time.Second)) || since.After(end.Add(-72*time.Hour)) {
		t.Errorf("period starts %s, not 72 h before the run", since)
	}
	// stripe-mock's session is unpaid and its payment intent not succeeded: neither is counted.
	if !strings.Contains(out, "0 paid Checkout Session(s) and 0 succeeded auto-recharge PaymentIntent(s) listed; 0 difference(s)") {
		t.Errorf("output:\n%s", out)
	}
	for _, path := range []string{"/v1/checkout/sessions", "/v1/payment_intents"} {
		calls := listCalls(front, path)
		if len(calls) != 1 {
			t.Fatalf("%d calls to %s", len(calls), path)
		}
		c := calls[0]
		if c.Form.Get("created[gte]") != strconv.FormatInt(since.Unix(), 10) || c.Form.Get("limit") != "100" {
			t.Errorf("%s: %v, want created[gte]=%d limit=100", path, c.Form, since.Unix())
		}
		if c.Authorization != "Bearer "+testkit.StripeKey {
			t.Errorf("%s authorized with %q", path, c.Authorization)
		}
	}
	if all := front.Calls("/"); len(all) != 2 {
		t.Errorf("calls: %+v", all)
	}
}

// TestStripeReconcileUsage: a bad period or a missing Stripe key is refused with exit status 2 before
// anything is asked of Stripe or the database.
func TestStripeReconcileUsage(t *testing.T) {
	front := testkit.NewStripeFront(t)
	dbPath := testkit.EmptySQLiteURL(t)
	env := testkit.Env(t, dbPath, front.Env())
	noKey := maps.Clone(env)
	for k := range front.Env() {
		delete(noKey, k)
	}
	dir := t.TempDir()
	cases := []struct {
		name string
		env  map[string]string
		args []string
		want []string
	}{
		{"not a duration", env, []string{"--since", "yesterday"}, []string{`invalid argument "yesterday" for "--since"`, "videogen stripe reconcile --help"}},
		{"zero", env, []string{"--since", "0s"}, []string{"--since must be a positive duration", "videogen stripe reconcile --help"}},
		{"negative", env, []string{"--since=-5h"}, []string{"--since must be a positive duration", "videogen stripe reconcile --help"}},
		{"argument", env, []string{"now"}, []string{`unknown command "now"`, "videogen stripe reconcile --help"}},
		{"no key", noKey, nil, []string{"STRIPE_SECRET_KEY is not set"}},
	}
	// The binary starts slowly under the race detector: the refusals run side by side.
	t.Run("refused", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				out, errOut, code := reconcile(t, dir, c.env, c.args...)
				if code != 2 || out != "" {
					t.Errorf("exit %d, want 2\nstdout: %s\nstderr: %s", code, out, errOut)
				}
				for _, w := range c.want {
					if !strings.Contains(errOut, w) {
						t.Errorf("stderr lacks %q: %s", w, errOut)
					}
				}
			})
		}
		t.Run("help", func(t *testing.T) {
			t.Parallel()
			help, _, code := reconcile(t, dir, env, "--help")
			if code != 0 || !strings.Contains(help, "Exit status:") || !strings.Contains(help, "1  differences remain") {
				t.Errorf("help: exit %d\n%s", code, help)
			}
		})
	})
	if calls := front.Calls("/"); len(calls) != 0 {
		t.Errorf("Stripe was called: %+v", calls)
	}
	if _, err := os.Stat(dbPath); !os.IsNotExist(err) {
		t.Errorf("the database was opened: %v", err)
	}
}

// TestStripeReconcileDaily: a server with STRIPE_RECONCILE_INTERVAL reconciles at once in the background
// and logs each difference as an error; a second instance on the same database does not reconcile again.
func TestStripeReconcileDaily(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		front := testkit.NewStripeFront(t)
		front.List("GET /v1/checkout/sessions", []map[string]any{{"id": "cs_test_nobody", "object": "checkout.session",
			"mode": "payment", "currency": "usd", "amount_total": 1234, "payment_status": "paid", "status": "complete",
			"client_reference_id": "topup_nobody", "metadata": map[string]any{"topup_id": "topup_nobody"}}}, 0)
		front.List("GET /v1/payment_intents", []map[string]any{}, 0)
		env := testkit.Env(t, dbURL, front.Env())
		env["STRIPE_RECONCILE_INTERVAL"] = "1h"
		env["LOG_LEVEL"] = "error"
		env2 := maps.Clone(env)
		env2["WORKER_ID"] = env["WORKER_ID"] + "-2"
		dir := t.TempDir()
		start := time.Now()
		p := serve(t, dir, env)
		testkit.Eventually(t, 20*time.Second, "a difference logged", func() bool {
			return strings.Contains(p.stderr.String(), "Stripe reconciliation difference")
		}, func() string { return p.stderr.String() })
		var line string
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(l, "Stripe reconciliation difference") {
				line = l
			}
		}
		for _, want := range []string{"level=ERROR", "kind=paid_unknown_topup", "stripe_id=cs_test_nobody", "stripe_amount=$12.34"} {
			if !strings.Contains(line, want) {
				t.Errorf("log line lacks %s: %s", want, line)
			}
		}
		calls := listCalls(front, "/v1/checkout/sessions")
		if len(calls) != 1 {
			t.Fatalf("%d session lists", len(calls))
		}
		gte, _ := strconv.ParseInt(calls[0].Form.Get("created[gte]"), 10, 64)
		if from := time.Unix(gte, 0); from.Before(start.Add(-72*time.Hour-time.Second)) || from.After(time.Now().Add(-72*time.Hour)) {
			t.Errorf("the daily run looked back to %s", from)
		}

		// Another instance on the same database: today's run is taken.
		p2 := serve(t, dir, env2)
		// Its background job's first round runs as it starts; a second lets it run, to show nothing comes
		// of it (a round that finds the run taken leaves no trace to wait for).
		time.Sleep(time.Second)
		if n := len(listCalls(front, "/v1/checkout/sessions")); n != 1 {
			t.Errorf("%d session lists after a second instance started, want 1", n)
		}
		if strings.Contains(p2.stderr.String(), "Stripe reconciliation") {
			t.Errorf("the second instance reconciled too:\n%s", p2.stderr.String())
		}
	})
}

// TestStripeReconcileFlaggedAndConverted: a top-up credited by its webhook with another amount than it
// asked is listed for staff (flagged_for_staff, with the flag's words) on every run; and --apply credits a
// session that Adaptive Pricing charged in another currency by its USD amount, as the webhook would —
// not refused as a payment in euros.
func TestStripeReconcileFlaggedAndConverted(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		front := testkit.NewStripeFront(t)
		env := testkit.Env(t, dbURL, front.Env())
		env["STRIPE_RECONCILE_INTERVAL"] = "0"
		s := testkit.Start(t, dbURL, env)
		buyer := s.NewAccount(t, "")
		anHourAgo := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)

		flagged := checkoutTopup(t, s, buyer.ID, 3000, anHourAgo)
		// The webhook confirms an amount other than the top-up's with Stripe's API before crediting it.
		front.Object("GET /v1/checkout/sessions/"+*flagged.StripeSessionID, sessionOf(flagged, 2500, "paid"))
		ev := testkit.StripeEvent("evt_"+flagged.ID, "checkout.session.completed", sessionOf(flagged, 2500, "paid"))
		if r := s.PostStripeEvent(t, ev); r.Status != 200 || !strings.Contains(string(r.Body), `"outcome":"credited"`) {
			t.Fatalf("webhook: %d %s", r.Status, r.Body)
		}
		if top := topupNow(t, s, flagged.ID); !strings.Contains(top.Flag, "Stripe collected $25.00 for a top-up of $30.00") {
			t.Fatalf("the mismatch is not flagged: %+v", top)
		}
		converted := checkoutTopup(t, s, buyer.ID, 2500, anHourAgo)
		inEuros := sessionOf(converted, 2300, "paid")
		inEuros["currency"] = "eur"
		inEuros["currency_conversion"] = map[string]any{"amount_subtotal": 2500, "amount_total": 2500, "fx_rate": "0.92", "source_currency": "usd"}
		front.List("GET /v1/checkout/sessions", []map[string]any{sessionOf(flagged, 2500, "paid"), inEuros}, 0)
		front.List("GET /v1/payment_intents", []map[string]any{}, 0)

		dir := t.TempDir()
		out, errOut, code := reconcile(t, dir, env, "--since", "72h", "--apply")
		if code != 1 {
			t.Fatalf("exit %d, want 1 (the flag remains for staff)\n%s%s", code, out, errOut)
		}
		acct := fmt.Sprint(buyer.ID)
		checkRows(t, out, []reconcileRow{
			{"flagged_for_staff", *flagged.StripeSessionID, flagged.ID, acct, "$25.00", "$25.00", "Stripe collected $25.00 for a top-up of $30.00"},
			{"paid_not_credited", *converted.StripeSessionID, converted.ID, acct, "$25.00", "-", "credited now"},
		})
		if top := topupNow(t, s, converted.ID); top.Flag != "" || top.CreditedMicros != 25_000_000 {
			t.Errorf("the converted session's top-up: %+v", top)
		}
		if es := topupEntries(t, s, *converted.StripeSessionID); len(es) != 1 || es[0].DeltaAvailable != 25_000_000 {
			t.Errorf("topup entries of the converted session: %+v", es)
		}
		if got := availableMicros(t, s, buyer.ID); got != 50_000_000 {
			t.Errorf("balance %d, want 50000000", got)
		}

		// Again: the flag is still listed, nothing more is credited.
		out, errOut, code = reconcile(t, dir, env, "--since", "72h", "--apply")
		if code != 1 {
			t.Fatalf("second run: exit %d\n%s%s", code, out, errOut)
		}
		checkRows(t, out, []reconcileRow{
			{"flagged_for_staff", *flagged.StripeSessionID, flagged.ID, acct, "$25.00", "$25.00", "credited as Stripe reports"},
		})
		if got := availableMicros(t, s, buyer.ID); got != 50_000_000 {
			t.Errorf("balance %d after a second run", got)
		}
		testkit.CheckLedger(t, s.DB)
	})
}
