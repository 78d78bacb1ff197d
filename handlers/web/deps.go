// Package web is what the HTTP layer's audiences share (handlers/api, console, support, webhooks): the
// dependencies, every middleware (request ids, the access and call logs, security headers, body limits,
// keys and rate limits, sessions and CSRF), the client address, and the responders — the API's error
// body with each refusal code's status, and the console's pages and error pages.
package web

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"videogen/billing"
	"videogen/billing/payments"
	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/auth"
	"videogen/internal/domain/calllog"
	"videogen/internal/domain/media"
	"videogen/internal/domain/members"
	"videogen/internal/domain/upstream"
	"videogen/internal/domain/videos"
	"videogen/internal/domain/webhooks"
	"videogen/internal/infra/db"
	"videogen/internal/infra/ratelimit"
	"videogen/internal/money"
	"videogen/internal/staff/metrics"
)

// Deps is what the handlers need from the rest of the service.
type Deps struct {
	DB      *db.DB
	Log     *slog.Logger
	Keys    *apikeys.Authenticator
	Limiter ratelimit.Limiter
	CallLog *calllog.Writer
	Videos  *videos.Service
	Prices  *billing.Prices
	// ModelOffer is what a model alias can be sold with now (upstream.Pool.Offer): the durations, the
	// part of sizes (ratio → size) its routes render, the inputs and sound; ok is false when no
	// credential serves it, and GET /v1/models and /pricing then leave it out or say so.
	ModelOffer func(alias string, sizes map[string]string) (offer upstream.Offer, ok bool)
	// MayCancel reports whether the provider behind a task's credential could stop it in its status now
	// (upstream.Pool.MayCancel): the console offers Cancel only then. Nil: any submitted task may be asked.
	MayCancel   func(credentialID, status string) bool
	MediaPolicy videos.MediaPolicy
	Media       *media.Service
	Importer    media.Opener  // fetches import links through the address guard
	PresignTTL  time.Duration // lifetime of the S3 links /media redirects to
	Now         func() time.Time
	// Stopping is done when the server stops waiting for requests to finish: one still reading its body
	// or fetching an import is then answered 503 shutting_down (nil: never).
	Stopping context.Context
	// Draining reports that a graceful shutdown has begun (nil: never): /readyz answers 503 so the proxy
	// stops sending, and every answer closes its connection so none is reused into the closing listener.
	Draining func() bool
	// Transfers bounds the uploads and imports running at once, per account and in all (nil: unbounded).
	Transfers *Transfers

	// The console's needs.
	Auth           *auth.Service
	Secrets        []string       // APP_SECRET values: the first signs, all verify
	SecureCookies  bool           // PUBLIC_BASE_URL is https
	TrustedProxies []netip.Prefix // whose X-Forwarded-For is believed
	PublicBaseURL  string
	TestTopups     bool
	SupportEmail   string // SUPPORT_EMAIL: where customers write for help
	MailPrinted    bool   // e-mails go to the log (no RESEND_API_KEY): the pages that promise one say so
	// TestTopupMin and TestTopupMax bound a test top-up (TEST_TOPUP_MIN, TEST_TOPUP_MAX).
	TestTopupMin, TestTopupMax money.Micros
	Payments                   *payments.Service // Stripe top-ups and balance alerts
	// Metrics counts requests for /metrics (nil: not counted).
	Metrics *metrics.Metrics
	// Webhooks is the customers' webhook endpoints and their deliveries.
	Webhooks *webhooks.Service
	// WebhookSends limits what an account sends to its endpoints on demand — the console's "Send test
	// event" and "Resend", the API's test — per account (docs/webhooks.md, "Fair to every account").
	WebhookSends ratelimit.Limiter
	// Members is an account's members: invitations, roles, removals (docs/members.md).
	Members *members.Service
}

// Base is what every audience's handlers share: the dependencies, and the middleware and responders of
// web (this package), promoted into each audience's handler type.
type Base struct {
	Deps

	arriving sync.Map // *fasthttp.RequestHeader → arrival: API requests whose body is still being read
}

// NewBase returns the shared part of the handlers, with defaults filled in.
func NewBase(d Deps) *Base {
	if d.Stopping == nil {
		d.Stopping = context.Background()
	}
	return &Base{Deps: d}
}

// MaxJSONBody is the largest JSON request body (enforced by fasthttp while it reads the body).
const MaxJSONBody = 1 << 20

// StripeWebhookPath is where Stripe sends its events (docs/stripe.md): the page body limits leave it to
// the webhook, which refuses a compressed body in Stripe's own JSON.
const StripeWebhookPath = "/webhooks/stripe"
