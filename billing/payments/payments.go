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
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
	"gorm.io/gorm"

	"videogen/billing"
	"videogen/internal/db"
	"videogen/internal/notify"
)

// Config is how the payments part behaves.
type Config struct {
	PublicBaseURL string // success and cancel pages, links in e-mails
	WebhookSecret string // STRIPE_WEBHOOK_SECRET: verifies Stripe-Signature
	MinTopup      billing.Micros
	MaxTopup      billing.Micros
	// RechargeCap is how many automatic top-ups an account may have in 24 hours; the next crossing
	// switches auto-recharge off instead of charging again (a loop guard).
	RechargeCap int
	// Owner names this instance in the daily reconciliation's claim, so one instance runs it.
	Owner          string
	ReconcileEvery time.Duration // 0: never in the background
	JobEvery       time.Duration // how often the background job looks for work (default 5s)
}

// Deps are the parts payments uses.
type Deps struct {
	DB     *db.DB
	Stripe *client.API // nil: card payments are off on this installation
	Notify *notify.Notifier
	Log    *slog.Logger
	Now    func() time.Time
}

// Service is the payments part.
type Service struct {
	cfg    Config
	db     *db.DB
	stripe *client.API
	notify *notify.Notifier
	log    *slog.Logger
	now    func() time.Time
	wake   chan struct{}
	live   bool // the secret key is a live one: only livemode events count
}

// New returns the payments service.
func New(cfg Config, d Deps) *Service {
	if cfg.JobEvery <= 0 {
		cfg.JobEvery = 5 * time.Second
	}
	if cfg.RechargeCap <= 0 {
		cfg.RechargeCap = 3
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	s := &Service{cfg: cfg, db: d.DB, stripe: d.Stripe, notify: d.Notify, log: d.Log, now: d.Now, wake: make(chan struct{}, 1)}
	if d.Stripe != nil {
		s.live = d.Stripe.Customers.Key != "" && (strings.HasPrefix(d.Stripe.Customers.Key, "sk_live_") || strings.HasPrefix(d.Stripe.Customers.Key, "rk_live_"))
	}
	return s
}

// NewStripeClient returns a Stripe API client for key; apiBase replaces Stripe's address (tests point it
// at stripe-mock). Requests that change something carry idempotency keys, so the client's own retries of
// a failed network call are safe. The client's log lines go to log (they name requests, never the key).
func NewStripeClient(key, apiBase string, log *slog.Logger) *client.API {
	cfg := &stripe.BackendConfig{LeveledLogger: stripeLog{log}, MaxNetworkRetries: stripe.Int64(2)}
	if apiBase != "" {
		cfg.URL = stripe.String(apiBase)
	}
	b := stripe.GetBackendWithConfig(stripe.APIBackend, cfg)
	return client.New(key, &stripe.Backends{API: b, Connect: b, Uploads: b})
}

// stripeLog hands stripe-go's own log lines to slog: its failures as warnings (ours say what they mean
// for the customer), the rest at debug.
type stripeLog struct{ log *slog.Logger }

func (l stripeLog) Debugf(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l stripeLog) Infof(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l stripeLog) Warnf(format string, v ...any)  { l.log.Warn(fmt.Sprintf(format, v...)) }
func (l stripeLog) Errorf(format string, v ...any) { l.log.Warn(fmt.Sprintf(format, v...)) }

// Enabled reports whether card payments are configured.
func (s *Service) Enabled() bool { return s != nil && s.stripe != nil }

// Bounds returns the smallest and largest top-up a customer may choose.
func (s *Service) Bounds() (min, max billing.Micros) { return s.cfg.MinTopup, s.cfg.MaxTopup }

// Wake asks the background job to look for work now.
func (s *Service) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// ErrNotConfigured is returned when card payments are off.
var ErrNotConfigured = errors.New("card payments are not configured on this installation")

// ErrStripeUnavailable wraps a failed call to Stripe: nothing was charged, the customer may try again.
var ErrStripeUnavailable = errors.New("Stripe could not be reached")

// cents converts micro-dollars to Stripe's smallest unit of USD; callers keep amounts whole cents.
func cents(m billing.Micros) int64 { return int64(m) / microsPerCent }

// fromCents converts Stripe's cents to micro-dollars.
func fromCents(c int64) billing.Micros { return billing.Micros(c * microsPerCent) }

const microsPerCent = int64(billing.PerUSD) / 100

// tx runs fn in a write transaction.
func (s *Service) tx(ctx context.Context, fn func(tx *gorm.DB) error) error { return s.db.Tx(ctx, fn) }
