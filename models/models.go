// Package models holds the GORM models of videogen's tables and the queries that belong to them.
package models

import (
	"encoding/json"
	"fmt"
	"time"
)

// Account is a tenant: it owns the wallet, the keys and the tasks. Balances are micro-dollars and change
// only together with a ledger entry (billing.Ledger).
type Account struct {
	ID              int64
	Name            string
	AvailableMicros int64
	ReservedMicros  int64
	WaitingTasks    int // tasks queued without an upstream slot yet (the backlog)
	// TimeZone is the IANA zone the account's calendar periods (a key's daily or monthly spend limit, the
	// monthly statement) are counted in; "" means UTC (docs/decisions.md, "The account's time zone").
	TimeZone       string
	DisabledAt     *time.Time
	DisabledReason string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// The billing details printed on the monthly statements (docs/usage.md); "" when not given.
	BillingName    string
	BillingAddress string // several lines
	BillingTaxID   string `gorm:"column:billing_tax_id"`
	// RequireSecondFactor: every member must sign in with two steps (an owner's choice).
	RequireSecondFactor bool
}

// Disabled reports whether staff disabled the account: its keys answer 401 account_disabled.
func (a *Account) Disabled() bool { return a.DisabledAt != nil }

// Roles a user may have.
const (
	RoleMember  = "member"
	RoleSupport = "support"
	RoleAdmin   = "admin"
)

// User is a person who signs in; each belongs to one account, as one of its members.
type User struct {
	ID           int64
	AccountID    int64
	Email        string
	PasswordHash string
	Role         string // videogen staff or not: member, support or admin (RoleMember…)
	// AccountRole is what the person may do in their account: owner, admin, developer, billing or viewer
	// (internal/domain/members, docs/members.md).
	AccountRole string
	// RemovedAt is when the member was removed from the account (or left it): the row stays for the
	// history that names them, but it signs in no more.
	RemovedAt       *time.Time
	EmailVerifiedAt *time.Time
	TermsAcceptedAt *time.Time
	TimeZone        string // IANA name chosen in the console; "" = the browser's, else UTC
	// AccountName is the name of the user's account, read with a signed-in session for the console's
	// header; not a column of users.
	AccountName string `gorm:"-"`
	// AccountRequiresSecondFactor is the account's RequireSecondFactor, read with the session likewise.
	AccountRequiresSecondFactor bool `gorm:"-"`
	LastSignInAt                *time.Time
	// The second factor (staff): the TOTP secret sealed with a key derived from APP_SECRET, when it was
	// confirmed, and the last time step accepted (each code is good once).
	TOTPSealed    []byte     `gorm:"column:totp_sealed"`
	TOTPEnabledAt *time.Time `gorm:"column:totp_enabled_at"`
	TOTPLastStep  int64      `gorm:"column:totp_last_step"`
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Verified reports whether the user confirmed their e-mail address.
func (u *User) Verified() bool { return u.EmailVerifiedAt != nil }

// Removed reports whether the member was removed from their account (or left it).
func (u *User) Removed() bool { return u.RemovedAt != nil }

// Staff reports whether the user may review every tenant (support and admin).
func (u *User) Staff() bool { return u.Role == RoleSupport || u.Role == RoleAdmin }

// Session is one console sign-in. The cookie holds the token; the database only its hash.
type Session struct {
	ID         int64
	UserID     int64
	TokenHash  string
	CreatedAt  time.Time
	LastSeenAt time.Time
	ExpiresAt  time.Time
	RevokedAt  *time.Time
	IP         string
	UserAgent  string
	// SecondFactorAt is when this sign-in passed the second factor (staff pages need it).
	SecondFactorAt *time.Time
}

// RecoveryCode is one of a staff user's ten single-use codes for when the authenticator is lost, stored hashed.
type RecoveryCode struct {
	ID        int64
	UserID    int64
	CodeHash  string
	CreatedAt time.Time
	UsedAt    *time.Time
}

// E-mail token purposes.
const (
	PurposeVerify = "verify"
	PurposeReset  = "reset"
)

// EmailToken is a single-use link sent by e-mail, stored hashed.
type EmailToken struct {
	ID        int64
	UserID    int64
	Purpose   string
	TokenHash string
	// SignupProofHash is the hash of the sign-up browser's proof, on the verification link a sign-up
	// sends; "" on every other link.
	SignupProofHash string
	CreatedAt       time.Time
	ExpiresAt       time.Time
	UsedAt          *time.Time
}

// RevokedByCLI is APIKey.RevokedBy for a key revoked with `videogen keys revoke`.
const RevokedByCLI = "cli"

// APIKey is a Bearer key. The secret itself is never stored: only its SHA-256 and a display prefix.
type APIKey struct {
	ID         int64
	AccountID  int64
	CreatedBy  *int64
	Name       string
	Prefix     string
	SecretHash string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
	// RevokedBy is who revoked it: the member's e-mail, RevokedByCLI, or "" (revoked before it was kept).
	RevokedBy string
	// Scopes are what the key may do beyond videos and uploads, space-separated (apikeys.ScopeWebhooks).
	Scopes string
	// What the key may spend per LimitPeriod ("day" or "month", in the account's time zone); nil with
	// period "" is no limit (internal/domain/apikeys, Limits).
	SpendLimitMicros *int64
	LimitPeriod      string
	// AllowedModels is the model ids the key may use, comma-separated; "" is every model.
	AllowedModels string
	// CreatorEmail is the e-mail of the member who created the key, filled in for the pages that show
	// it (WithMembers); not a column.
	CreatorEmail string `gorm:"-"`
}

// Price is the per-second price of one model, editable by an admin.
type Price struct {
	Model           string `gorm:"primaryKey"`
	MicrosPerSecond int64
	UpdatedAt       time.Time
	UpdatedBy       string // the staff member who set it ("" for the seeded price)
}

// Ledger entry kinds (docs/design.md §3).
const (
	KindTopup      = "topup"
	KindTestTopup  = "test_topup"
	KindAdjustment = "adjustment"
	KindReserve    = "reserve"
	KindSettle     = "settle"
	KindRelease    = "release"
	// Money Stripe gave back (docs/stripe.md): each may leave available below zero.
	KindRefund     = "refund"      // a refund of a top-up, once per Stripe refund id
	KindDispute    = "dispute"     // a chargeback opened, once per Stripe dispute id
	KindDisputeWon = "dispute_won" // the disputed amount returned when the dispute closes in our favour
)

// LedgerEntry is one change of an account's balances. Entries are only ever inserted.
type LedgerEntry struct {
	ID             int64
	AccountID      int64
	Kind           string
	DeltaAvailable int64
	DeltaReserved  int64
	AvailableAfter int64
	ReservedAfter  int64
	TaskID         *string
	Reason         string
	// CustomerNote is what the customer reads of an adjustment; Reason is for staff ("" shows
	// "Adjustment by support").
	CustomerNote string
	Actor        string
	ExternalID   *string
	CreatedAt    time.Time
	// Member is the e-mail of the member behind the entry — who added the funds, or whose key made the
	// video — filled in for the pages that show it (WithMembers); not a column.
	Member string `gorm:"-"`
}

// UpstreamCredential is one credential of the upstream pool. Its secret stays in the environment; the
// row holds what several instances must agree on: how many tasks it runs now and how many it may.
type UpstreamCredential struct {
	ID             string `gorm:"primaryKey"`
	Provider       string
	Label          string
	MaxConcurrency int
	InFlight       int
	Enabled        bool
	BaseURL        string
	// AuthError says why a configured credential takes no new task: the provider refused the key.
	AuthError    *string
	AuthErrorAt  *time.Time
	AuthErrorKey *string // digest of the refused key (KeyDigest), never the key
	// AuthErrorKind is what the mark is: "key" (the key refused) or "credit" (the account out of credit).
	AuthErrorKind *string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// UpstreamHealth is one instance's view of one credential's health (docs/upstreams.md#health).
type UpstreamHealth struct {
	CredentialID string `gorm:"primaryKey"`
	Instance     string `gorm:"primaryKey"`
	Breaker      string // closed, half-open or open
	Calls        int64
	Errors       int64
	P50Ms        int64 `gorm:"column:p50_ms"`
	P95Ms        int64 `gorm:"column:p95_ms"`
	P99Ms        int64 `gorm:"column:p99_ms"`
	LastError    string
	LastErrorAt  *time.Time
	// ClosedRoutes: the aliases whose route the provider refused for this key, one "alias: why" a line.
	ClosedRoutes string
	UpdatedAt    time.Time
}

// TableName keeps GORM from pluralising.
func (UpstreamHealth) TableName() string { return "upstream_health" }

// UpstreamReloadAck is an instance's answer to a reload signal: the seq it acted on and why it refused
// the file ("" when it installed it).
type UpstreamReloadAck struct {
	Instance string `gorm:"primaryKey"`
	Seq      int64
	Error    string
	At       time.Time
}

// ControlSignal is a counter an operator command bumps to tell every running instance to do something
// (re-read UPSTREAMS_FILE).
type ControlSignal struct {
	Name      string `gorm:"primaryKey"`
	Seq       int64
	UpdatedAt time.Time
}

// Task is one video generation.
type Task struct {
	ID            string `gorm:"primaryKey"`
	AccountID     int64
	APIKeyID      *int64 `gorm:"column:api_key_id"`
	Model         string
	Prompt        string
	Seconds       int
	Size          string
	AspectRatio   string
	GenerateAudio bool
	Watermark     bool
	Inputs        string // JSON of the media inputs (TaskInputs)
	Status        string // tasks.Queued, InProgress, Completed or Failed
	Progress      int
	PriceMicros   int64  // per second, frozen at creation
	AmountMicros  int64  // price × seconds, frozen at creation
	BillingState  string // billing.Reserved, Settled or Released
	ErrorCode     *string
	ErrorMessage  *string

	CredentialID   *string
	UpstreamTaskID *string
	UpstreamKey    *string
	SubmitAttempts int
	// UpstreamRetries counts fresh submissions on the same route after a failure the provider calls
	// passing (Veo's audio filter); at most one.
	UpstreamRetries int
	PollCount       int
	NextCheckAt     time.Time
	QueueDeadline   time.Time
	RunDeadline     *time.Time
	SubmittedAt     *time.Time
	LeaseOwner      *string
	LeaseUntil      *time.Time
	OutputKey       *string
	OutputBytes     *int64
	// The still images stored beside the output (internal/domain/stills), forgotten with it.
	ThumbnailKey   *string
	SpritesheetKey *string
	// The last frame as the provider returned it (content?variant=last_frame) and its image type.
	LastFrameKey  *string
	LastFrameType *string
	Seed          *int64

	// What the provider reports it rendered (docs/upstreams.md#rendered); nil where it did not say.
	RenderedSeed       *int64
	RenderedSize       *string
	RenderedResolution *string
	RenderedRatio      *string
	RenderedSeconds    *float64
	RenderedFPS        *int `gorm:"column:rendered_fps"`
	// UpstreamCancel is how asking the provider to stop a task we gave up on went: cancelled,
	// not_cancellable or failed (docs/upstreams.md#cancel); nil when nothing was asked.
	UpstreamCancel *string

	// What the task cost upstream (docs/upstreams.md#cost), recorded when its output is copied.
	UpstreamModel         *string
	UsageCompletionTokens *int64
	UsageTotalTokens      *int64
	UpstreamCostMicros    *int64

	// RemixedFromVideoID is the completed video this task remixes (POST /v1/videos/{id}/remix); nil for
	// a plain create.
	RemixedFromVideoID *string

	CreatedAt   time.Time
	UpdatedAt   time.Time
	CompletedAt *time.Time
	ExpiresAt   *time.Time
	// DeletedAt is when the customer deleted the task (DELETE /v1/videos/{id}): the API no longer shows
	// it, its stored video is gone, and the console shows it as deleted. Deliberately not gorm.DeletedAt,
	// which would hide the row from every query — the ledger audit, the console and staff still read it.
	DeletedAt *time.Time
}

// VideoRequest is what a video is asked to be: a create request's fields with every default applied.
// The one type flows from the API's parser (videos.ParseCreate) through the task's columns to the
// upstream; its JSON is the upstream wire form of POST /v1/videos (seconds as a string, as OpenAI's API
// takes it; media URLs omitted when empty).
type VideoRequest struct {
	Model         string `json:"model"`
	Prompt        string `json:"prompt"`
	Seconds       int    `json:"seconds,string"`
	Size          string `json:"size"`
	AspectRatio   string `json:"aspect_ratio"`
	GenerateAudio bool   `json:"generate_audio"`
	Watermark     bool   `json:"watermark"`
	// Seed, when given, asks the provider for a reproducible generation (-1 or absent: random).
	Seed *int64 `json:"seed,omitempty"`
	TaskInputs
}

// Request is the task's video request, its media as it was created with them.
func (t *Task) Request() (VideoRequest, error) {
	in, err := t.StoredInputs()
	return VideoRequest{Model: t.Model, Prompt: t.Prompt, Seconds: t.Seconds, Size: t.Size, AspectRatio: t.AspectRatio,
		GenerateAudio: t.GenerateAudio, Watermark: t.Watermark, Seed: t.Seed, TaskInputs: in}, err
}

// TaskInputs are the media URLs a task was created with.
type TaskInputs struct {
	ImageURLs     []string `json:"image_urls,omitempty"`
	VideoURLs     []string `json:"video_urls,omitempty"`
	AudioURLs     []string `json:"audio_urls,omitempty"`
	StartImageURL string   `json:"start_image_url,omitempty"`
	EndImageURL   string   `json:"end_image_url,omitempty"`
	// Media is what probing found of each file, in the fields' order: the capability checks of create
	// and routing read it (docs/upstreams.md#capabilities). Stored with the task, so routing a waiting
	// task needs no further read.
	Media []MediaProbe `json:"media,omitempty"`
}

// MediaProbe is one media input of a request as its stored file was found: its field and position,
// its type and size, and what probing read of it (zero: not known).
type MediaProbe struct {
	Field       string `json:"field"`
	Position    int    `json:"position"`
	ContentType string `json:"content_type"`
	Bytes       int64  `json:"bytes"`
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
	DurationMs  int64  `json:"duration_ms,omitempty"`
}

// Count is how many media inputs there are.
func (in TaskInputs) Count() int {
	n := len(in.ImageURLs) + len(in.VideoURLs) + len(in.AudioURLs)
	if in.StartImageURL != "" {
		n++
	}
	if in.EndImageURL != "" {
		n++
	}
	return n
}

// TaskEvent is one line of a task's log: a status change or a notable step.
type TaskEvent struct {
	ID         int64
	TaskID     string
	At         time.Time
	FromStatus string
	ToStatus   string
	Detail     string
}

// IdempotencyKey binds a client's Idempotency-Key to the task it created.
type IdempotencyKey struct {
	AccountID   int64  `gorm:"primaryKey"`
	Key         string `gorm:"primaryKey"`
	RequestHash string
	TaskID      string
	CreatedAt   time.Time
}

// CallLog is one API request as the customer's call log shows it.
type CallLog struct {
	ID                   int64
	At                   time.Time
	RequestID            string
	AccountID            *int64
	KeyPrefix            string
	Method               string
	Path                 string
	Status               int
	ErrorCode            string
	ErrorMessage         string // the refusal's error.message as the client read it, clipped (docs/console.md)
	LatencyMicros        int64
	TaskID               string
	AmountReservedMicros int64
	BytesIn              int64
	Files                int
	// Member is the e-mail of the member who created the call's key, filled in for the pages that show
	// it (WithMembers); not a column.
	Member string `gorm:"-"`
}

// MailOutbox is the record of one e-mail: written with the event that causes it, in the transaction that
// also inserts its River job (internal/infra/mail), and kept after delivery for support (recipient,
// subject, times, the last error). The body (text and HTML) is sealed with a key derived from APP_SECRET,
// since it carries one-time links, and blanked once the message is sent or given up.
type MailOutbox struct {
	ID             int64
	Kind           string
	Recipient      string
	Subject        string
	SealedBody     []byte
	IdempotencyKey string
	CreatedAt      time.Time
	SentAt         *time.Time
	FailedAt       *time.Time
	LastError      string
}

// TableName is fixed: an outbox is one thing.
func (MailOutbox) TableName() string { return "mail_outbox" }

// StoredInputs decodes the media inputs the task was created with (Inputs).
func (t *Task) StoredInputs() (TaskInputs, error) {
	var in TaskInputs
	if t.Inputs == "" {
		return in, nil
	}
	if err := json.Unmarshal([]byte(t.Inputs), &in); err != nil {
		return in, fmt.Errorf("decode the inputs of %s: %w", t.ID, err)
	}
	return in, nil
}

// BillingProfile is what an account has agreed with us about payments: its Stripe Customer, a saved
// card for auto-recharge, and the balance thresholds it watches (docs/stripe.md).
type BillingProfile struct {
	AccountID            int64 `gorm:"primaryKey"`
	StripeCustomerID     *string
	PaymentMethodID      string
	CardLabel            string
	LowBalanceMicros     int64 // e-mail a warning when available first drops under this (0: never)
	LowBalanceArmed      bool
	LowBalanceDue        bool
	RechargeEnabled      bool
	RechargeBelowMicros  int64
	RechargeAmountMicros int64
	RechargeArmed        bool
	RechargeDue          bool
	RechargeOffReason    string // why auto-recharge was switched off by us ("" when the customer did)
	UpdatedAt            time.Time
}

// Top-up sources and states.
const (
	TopupCheckout     = "checkout"
	TopupAutoRecharge = "auto_recharge"

	TopupPending  = "pending"
	TopupCredited = "credited"
	TopupFailed   = "failed"
	TopupExpired  = "expired"
	TopupCanceled = "canceled"
)

// Topup is one attempt to put money in through Stripe. The wallet is credited only from Stripe's webhook.
type Topup struct {
	ID                    string `gorm:"primaryKey"`
	AccountID             int64
	UserID                *int64
	Source                string
	State                 string
	AmountMicros          int64 // what we asked Stripe for
	CreditedMicros        int64 // what Stripe reported collected, and we credited
	SaveCard              bool
	StripeSessionID       *string
	StripePaymentIntentID *string
	Flag                  string // for staff: the credit differs from what was asked
	Failure               string // why a payment failed, as Stripe said
	ReceiptURL            string
	ReceiptDue            bool // credited, and its receipt (a job) not sent yet
	CreatedAt             time.Time
	UpdatedAt             time.Time
	CreditedAt            *time.Time
}

// Stripe event states.
const (
	EventPending   = "pending"
	EventProcessed = "processed"
	EventIgnored   = "ignored"
)

// StripeEvent is one webhook event as received, kept so a replay is recognised; a pending one's job
// retries it (docs/jobs.md, "Payments").
type StripeEvent struct {
	ID            string `gorm:"primaryKey"`
	Type          string
	Payload       string
	State         string
	Note          string // what processing did, or why the event is still pending
	StripeCreated time.Time
	ReceivedAt    time.Time
	ProcessedAt   *time.Time
}

// AuditEntry is one staff action or one staff look at a tenant. Rows are only ever inserted: no code
// path updates or deletes them, and the database refuses it (docs/support.md).
type AuditEntry struct {
	ID          int64
	At          time.Time
	ActorUserID *int64
	Actor       string // the staff member's e-mail, or "cli"
	Action      string // e.g. "account.view", "balance.credit" (internal/domain/audit)
	TargetType  string // "account", "task", "call", "user", "price"
	TargetID    string
	AccountID   *int64 // the tenant concerned, when there is one
	Reason      string
	IP          string
	Detail      string
}

// TableName is fixed: a log is one thing.
func (AuditEntry) TableName() string { return "audit_log" }

// LedgerCheck is one run of the ledger self-check.
type LedgerCheck struct {
	ID         int64
	At         time.Time
	Owner      string
	Problems   int
	Accounts   string // ids of the accounts that drifted, comma-separated
	Detail     string
	DurationMs int64
}

// StripeReconcileRun is one completed reconciliation with Stripe (billing/payments).
type StripeReconcileRun struct {
	ID             int64
	At             time.Time
	Owner          string
	Since          time.Time // the period compared starts here
	Sessions       int
	PaymentIntents int
	Differences    int    // left after the run: those --apply credited are not counted
	Applied        int    // credited by --apply during the run
	Detail         string // the first differences, one a line
}
