// Package payments puts money into wallets through Stripe and takes it back out when Stripe gives it
// back: Checkout top-ups, auto-recharge of a saved card, refunds and disputes, receipts and low-balance
// e-mails, and reconciliation against Stripe's own records (docs/stripe.md).
//
// The one rule: nothing is credited that Stripe did not collect, and nothing collected goes uncredited.
// The wallet is credited only from Stripe's signed webhooks (or from reconciliation, which reads the same
// facts from Stripe's API), exactly once per Checkout Session or PaymentIntent — the ledger's unique
// (kind, external_id) index says so, not a check in code.
package payments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
	"gorm.io/gorm"

	"videogen/internal/domain/notify"
	"videogen/internal/infra/db"
	"videogen/internal/infra/queue"
	"videogen/internal/money"
)

// Config is how the payments part behaves.
type Config struct {
	PublicBaseURL string // success and cancel pages, links in e-mails
	WebhookSecret string // STRIPE_WEBHOOK_SECRET: verifies Stripe-Signature
	MinTopup      money.Micros
	MaxTopup      money.Micros
	// RechargeCap is how many automatic top-ups an account may have in 24 hours; the next crossing
	// switches auto-recharge off instead of charging again (a loop guard).
	RechargeCap int
	// Owner names this instance (or command) in the reconciliation runs it records.
	Owner string
	// ReconcileEvery is how often one instance reconciles the last 72 hours in the background (a periodic
	// job on River's elected leader); 0: never.
	ReconcileEvery time.Duration
	// AlertsEvery is how often the balance crossings that charges left due are turned into low-balance
	// e-mails and auto-recharges (default 30s; docs/jobs.md, "Payments").
	AlertsEvery time.Duration
	// WebhookBudget bounds the answer to a webhook delivery (STRIPE_WEBHOOK_TIMEOUT; default 8s): Stripe
	// stops waiting after about 10 s.
	WebhookBudget time.Duration
}

// Deps are the parts payments uses.
type Deps struct {
	DB *db.DB
	// Queue takes the payments' jobs (docs/jobs.md, "Payments"); New registers their workers on it.
	Queue  *queue.Queue
	Stripe *client.API // nil: card payments are off on this installation
	Notify *notify.Notifier
	Log    *slog.Logger
	Now    func() time.Time
}

// Service is the payments part.
type Service struct {
	cfg    Config
	db     *db.DB
	queue  *queue.Queue
	stripe *client.API
	notify *notify.Notifier
	log    *slog.Logger
	now    func() time.Time
	live   bool // the secret key is a live one: only livemode events count
}

// New returns the payments service, its job kinds registered on d.Queue (and, where they apply, the
// periodic balance alerts and reconciliation).
func New(cfg Config, d Deps) *Service {
	if cfg.AlertsEvery <= 0 {
		cfg.AlertsEvery = 30 * time.Second
	}
	if cfg.RechargeCap <= 0 {
		cfg.RechargeCap = 3
	}
	s := &Service{cfg: cfg, db: d.DB, queue: d.Queue, stripe: d.Stripe, notify: d.Notify, log: d.Log, now: d.Now}
	if d.Stripe != nil {
		s.live = d.Stripe.Customers.Key != "" && (strings.HasPrefix(d.Stripe.Customers.Key, "sk_live_") || strings.HasPrefix(d.Stripe.Customers.Key, "rk_live_"))
	}
	s.addJobs()
	return s
}

// NewStripeClient returns a Stripe API client for key; apiBase replaces Stripe's address (tests point it
// at stripe-mock). Requests that change something carry idempotency keys, so the client's own retries of
// a failed network call are safe. The client's own failures go to log, redacted (stripeLog).
func NewStripeClient(key, apiBase string, log *slog.Logger) *client.API {
	cfg := &stripe.BackendConfig{LeveledLogger: stripeLog{log}, MaxNetworkRetries: stripe.Int64(2)}
	if apiBase != "" {
		cfg.URL = stripe.String(apiBase)
	}
	b := stripe.GetBackendWithConfig(stripe.APIBackend, cfg)
	return client.New(key, &stripe.Backends{API: b, Connect: b, Uploads: b})
}

// stripeLog hands stripe-go's failures to slog as warnings (our own lines say what they mean for the
// customer), redacted, and drops everything else whatever LOG_LEVEL says: at debug stripe-go logs every
// answer whole (stripe.go: Debugf("Response: %s")) — PaymentIntent client secrets, customers' e-mail
// addresses — and its errors quote answers ("body sample: '…'", or a body that is not a Stripe error).
type stripeLog struct{ log *slog.Logger }

func (stripeLog) Debugf(string, ...any) {}
func (stripeLog) Infof(string, ...any)  {}
func (l stripeLog) Warnf(format string, v ...any) {
	l.log.Warn(redactStripe(fmt.Sprintf(format, v...)))
}
func (l stripeLog) Errorf(format string, v ...any) {
	l.log.Warn(redactStripe(fmt.Sprintf(format, v...)))
}

var (
	stripeEmail  = regexp.MustCompile(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}`)
	stripeSecret = regexp.MustCompile(`[A-Za-z0-9_]*_secret_[A-Za-z0-9_]*`)
	stripeKey    = regexp.MustCompile(`\b(?:sk|rk|whsec)_[A-Za-z0-9_]+`)
	stripeQuery  = regexp.MustCompile(`\?[^\s"'\\]+`)
)

// maxStripeLogLine caps a line of stripe-go's: an error can carry a whole PaymentIntent or card.
const maxStripeLogLine = 300

// redactStripe makes a line of stripe-go's fit for the log: no answer bodies, e-mail addresses, client
// secrets, API keys or query strings (they may hold any of these), and not too long.
func redactStripe(line string) string {
	const undecodable = "Error decoding error from Stripe: "
	switch {
	case strings.Contains(line, "body sample"):
		line = line[:strings.Index(line, "body sample")] + "body not logged)"
	case strings.HasPrefix(line, undecodable):
		// What follows is the answer itself: JSON that is not a Stripe error.
		line = undecodable + "an answer that is not a Stripe error (body not logged)"
	}
	line = stripeEmail.ReplaceAllString(line, "[e-mail]")
	line = stripeSecret.ReplaceAllString(line, "[client secret]")
	line = stripeKey.ReplaceAllString(line, "[key]")
	line = stripeQuery.ReplaceAllString(line, "?[query]")
	if len(line) > maxStripeLogLine {
		line = strings.ToValidUTF8(line[:maxStripeLogLine], "") + " …(cut)"
	}
	return line
}

// Enabled reports whether card payments are configured.
func (s *Service) Enabled() bool { return s != nil && s.stripe != nil }

// Bounds returns the smallest and largest top-up a customer may choose.
func (s *Service) Bounds() (min, max money.Micros) { return s.cfg.MinTopup, s.cfg.MaxTopup }

// ErrNotConfigured is returned when card payments are off.
var ErrNotConfigured = errors.New("card payments are not configured on this installation")

// ErrStripeUnavailable wraps a failed call to Stripe: nothing was charged, the customer may try again.
var ErrStripeUnavailable = errors.New("Stripe could not be reached")

// stripeFailure wraps a failed call to Stripe, redacted like stripe-go's own log lines: a *stripe.Error
// prints as the whole error object (an attached PaymentIntent's client secret, a customer's e-mail in
// "Invalid email address: …"), and what this returns goes to the log and to an event's note. Every call
// to Stripe's API returns its failure through here.
func stripeFailure(call string, err error) error {
	return fmt.Errorf("%s: %w: %s", call, ErrStripeUnavailable, redactStripe(err.Error()))
}

// cents converts micro-dollars to Stripe's smallest unit of USD; callers keep amounts whole cents.
func cents(m money.Micros) int64 { return int64(m) / microsPerCent }

// fromCents converts Stripe's cents to micro-dollars.
func fromCents(c int64) money.Micros { return money.Micros(c * microsPerCent) }

const microsPerCent = int64(money.PerUSD) / 100

// tx runs fn in a write transaction.
func (s *Service) tx(ctx context.Context, fn func(tx *gorm.DB) error) error { return s.db.Tx(ctx, fn) }
