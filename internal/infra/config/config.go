// Package config reads videogen's settings from environment variables and checks them before start.
package config

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"videogen/internal/money"
)

// Config is every setting of the service. Each field is one environment variable; `help` says what it
// means and is printed by `videogen serve --help`, so the README and the binary never disagree.
type Config struct {
	// Addr's default depends on APP_ENV (Load, DefaultAddr); defaultDoc shows it in serve --help.
	Addr          string `env:"ADDR" defaultDoc:"localhost:8080 (:8080 with APP_ENV=production)" help:"listen address; the host localhost means both loopback addresses, 127.0.0.1 and ::1 (this machine only); outside production a server reachable from other machines logs a warning at start"`
	DataDir       string `env:"DATA_DIR" envDefault:"data" help:"folder for the SQLite file, the dev secret, stored outputs and the simulator's state"`
	DatabaseURL   string `env:"DATABASE_URL" help:"a postgres:// URL selects PostgreSQL; otherwise a SQLite file path (default DATA_DIR/videogen.db)"`
	PublicBaseURL string `env:"PUBLIC_BASE_URL" envDefault:"http://localhost:8080" help:"base of links in e-mails, signed media URLs and Stripe return URLs"`
	AppSecret     string `env:"APP_SECRET" help:"HMAC key(s), comma-separated (first signs, all verify); generated once into DATA_DIR in development"`
	AppEnv        string `env:"APP_ENV" envDefault:"development" help:"development or production (production refuses unsafe settings)"`
	LogLevel      string `env:"LOG_LEVEL" envDefault:"info" help:"debug, info, warn or error"`
	PprofAddr     string `env:"PPROF_ADDR" help:"serve Go's pprof profiles on this address (loopback only; unset = off)"`
	MetricsAddr   string `env:"METRICS_ADDR" help:"serve Prometheus metrics at /metrics on this address, a listener of its own (never ADDR's); unset = off"`

	SupportEmail   string `env:"SUPPORT_EMAIL" help:"the address customers write to for help (shown where the console cannot do it for them, e.g. a wallet with no card payments); unset = the pages say to ask the installation's operator"`
	TestTopups     bool   `env:"TEST_TOPUPS" help:"1 allows test top-ups ('add test funds', no card); only with a loopback PUBLIC_BASE_URL"`
	TrustedProxies string `env:"TRUSTED_PROXIES" help:"comma-separated addresses or CIDRs whose X-Forwarded-For is believed"`
	RedisURL       string `env:"REDIS_URL" help:"redis:// URL for rate limits shared across instances; unset = in-process limits"`

	StripeSecretKey      string        `env:"STRIPE_SECRET_KEY" help:"Stripe secret key (unset = no card top-ups)"`
	StripeWebhookSecret  string        `env:"STRIPE_WEBHOOK_SECRET" help:"Stripe webhook signing secret"`
	StripeAPIBase        string        `env:"STRIPE_API_BASE" help:"Stripe API base URL override, for tests"`
	StripeWebhookTimeout time.Duration `env:"STRIPE_WEBHOOK_TIMEOUT" envDefault:"8s" help:"the most a Stripe webhook waits for its answer (Stripe gives up after about 10 s): the event is recorded, then processed in what is left; the rest is finished in the background"`
	TopupMin             string        `env:"TOPUP_MIN" envDefault:"5" help:"smallest card top-up, in USD"`
	TopupMax             string        `env:"TOPUP_MAX" envDefault:"1000" help:"largest card top-up, in USD"`
	TestTopupMin         string        `env:"TEST_TOPUP_MIN" envDefault:"1" help:"smallest test top-up (TEST_TOPUPS=1), in USD"`
	TestTopupMax         string        `env:"TEST_TOPUP_MAX" envDefault:"1000" help:"largest test top-up (TEST_TOPUPS=1), in USD: a typo cannot make an absurd balance"`
	RechargeCap          int           `env:"AUTO_RECHARGE_MAX_PER_DAY" envDefault:"3" help:"automatic top-ups an account may have in 24 hours; one more switches auto-recharge off"`
	ReconcileEvery       time.Duration `env:"STRIPE_RECONCILE_INTERVAL" envDefault:"24h" help:"how often one instance compares Stripe's payments of the last 72 h with the credited top-ups and logs differences (0 = never)"`
	ResendAPIKey         string        `env:"RESEND_API_KEY" help:"Resend API key (unset = e-mails are printed to the log)"`
	MailFrom             string        `env:"MAIL_FROM" envDefault:"videogen <no-reply@localhost>" help:"sender of e-mails"`
	ResendAPIBase        string        `env:"RESEND_API_BASE" help:"Resend API base URL override, for tests"`

	RateLimitRPS         float64       `env:"RATE_LIMIT_RPS" envDefault:"10" help:"per-key request rate (token bucket refill per second)"`
	RateLimitBurst       int           `env:"RATE_LIMIT_BURST" envDefault:"40" help:"per-key burst (token bucket size)"`
	MaxQueued            int           `env:"MAX_QUEUED_PER_ACCOUNT" envDefault:"50" help:"tasks an account may have waiting for an upstream slot before create answers 429 no_capacity"`
	MaxUploadsPerAccount int           `env:"MAX_UPLOADS_PER_ACCOUNT" envDefault:"4" help:"uploads and imports one account may run at once on an instance; more get 429 rate_limited"`
	MaxUploads           int           `env:"MAX_UPLOADS" envDefault:"64" help:"uploads and imports an instance runs at once, all accounts together; more get 429 rate_limited"`
	KeyCacheTTL          time.Duration `env:"API_KEY_CACHE_TTL" envDefault:"2s" help:"how long an API key lookup is cached; bounds how late another instance sees a revocation"`
	PollCacheTTL         time.Duration `env:"POLL_CACHE_TTL" envDefault:"1s" help:"how long a poll may be answered from memory for an unfinished task (0 = always read the database)"`

	UpstreamsFile       string        `env:"UPSTREAMS_FILE" help:"YAML file of upstream credentials: kind, base URL, secret source, concurrency, models served and their cost (docs/upstreams.md); reloaded on SIGHUP and by 'videogen upstreams reload'; unset = the built-in simulator"`
	UpstreamBaseURL     string        `env:"UPSTREAM_BASE_URL" help:"deprecated (use UPSTREAMS_FILE): base URL of one OpenAI-style /v1/videos upstream serving every model"`
	UpstreamAPIKeys     string        `env:"UPSTREAM_API_KEYS" help:"deprecated (use UPSTREAMS_FILE): comma-separated credentials for UPSTREAM_BASE_URL (kept out of the database)"`
	UpstreamConcurrency int           `env:"UPSTREAM_CONCURRENCY" envDefault:"4" help:"deprecated (use UPSTREAMS_FILE): tasks in flight per UPSTREAM_API_KEYS credential"`
	UpstreamTimeout     time.Duration `env:"UPSTREAM_TIMEOUT" envDefault:"30s" help:"timeout of one upstream submit or poll call"`
	BreakerFailures     int           `env:"UPSTREAM_BREAKER_FAILURES" envDefault:"5" help:"failed submissions in a row (no answer, 5xx, refused key) that open a credential's circuit breaker: it takes no new task for UPSTREAM_BREAKER_COOLDOWN"`
	BreakerCooldown     time.Duration `env:"UPSTREAM_BREAKER_COOLDOWN" envDefault:"30s" help:"how long an open circuit breaker keeps a credential from new tasks before one submission probes it"`
	UpstreamsWatch      time.Duration `env:"UPSTREAMS_WATCH_INTERVAL" envDefault:"2s" help:"how often each instance publishes its upstream health and checks for 'videogen upstreams reload'"`

	SimDuration    time.Duration `env:"SIM_DURATION" envDefault:"20s" help:"how long a simulated generation takes, queued to completed (0: at once)"`
	SimOutput      string        `env:"SIM_OUTPUT" envDefault:"realistic" help:"what a simulated generation serves: realistic (a video of the size and length asked) or tiny (the same 5 KB video for every task, so a load test measures the worker apart from the bytes)"`
	SimCredentials int           `env:"SIM_CREDENTIALS" envDefault:"2" help:"simulated upstream credentials in the pool"`
	SimConcurrency int           `env:"SIM_CONCURRENCY" envDefault:"4" help:"tasks each simulated credential runs at once"`
	SimDataDir     string        `env:"SIM_DATA_DIR" help:"where the simulator keeps its tasks (default DATA_DIR/sim); they outlive a platform restart"`

	Workers                bool          `env:"WORKERS" envDefault:"true" help:"run the task workers in this process"`
	WorkerID               string        `env:"WORKER_ID" help:"name of this instance in task leases (default host-pid)"`
	WorkerTasks            int           `env:"WORKER_CONCURRENCY" envDefault:"64" help:"tasks this instance's worker handles at once (a submission, a poll or a download each); each one waiting on the upstream or the database holds one"`
	QueueTimeout           time.Duration `env:"QUEUE_TIMEOUT" envDefault:"30m" help:"a task waiting this long for an upstream slot fails and is refunded"`
	RunTimeout             time.Duration `env:"RUN_TIMEOUT" envDefault:"30m" help:"a task running upstream longer than this fails and is refunded"`
	PollMin                time.Duration `env:"POLL_INTERVAL_MIN" envDefault:"1s" help:"first interval between upstream polls of a task"`
	PollMax                time.Duration `env:"POLL_INTERVAL_MAX" envDefault:"30s" help:"longest interval between upstream polls of a task"`
	JobsPoll               time.Duration `env:"JOBS_POLL_INTERVAL" envDefault:"1s" help:"how often each job queue (e-mail, webhooks, payments, chores) looks for due jobs: the longest a new job waits"`
	LeaseDuration          time.Duration `env:"LEASE_DURATION" envDefault:"60s" help:"how long a worker holds a claimed task before another instance may take it"`
	OutputRetention        time.Duration `env:"OUTPUT_RETENTION" envDefault:"168h" help:"how long generated videos are kept and downloadable"`
	FFmpegPath             string        `env:"FFMPEG_PATH" envDefault:"ffmpeg" help:"the ffmpeg program (a path, or a name looked up on PATH) that makes the thumbnail and spritesheet of videos whose provider serves none (Seedance on Ark); off = such videos get none"`
	ShutdownTimeout        time.Duration `env:"SHUTDOWN_TIMEOUT" envDefault:"20s" help:"the shutdown budget, counted from the end of SHUTDOWN_DRAIN_DELAY: requests get half of it, then those still receiving a body are answered 503 shutting_down; the rest is for the call log, e-mail and the worker"`
	ShutdownDrain          time.Duration `env:"SHUTDOWN_DRAIN_DELAY" envDefault:"5s" help:"after SIGTERM or SIGINT, how long the instance keeps accepting and serving, with /readyz at 503 and every answer closing its connection, so a proxy's health check takes it out of rotation before the port closes; longer than the proxy's health interval (deploy/Caddyfile: 1s). A second signal ends it early; 0 = none. SHUTDOWN_TIMEOUT starts after it"`
	DatabaseConnectTimeout time.Duration `env:"DATABASE_CONNECT_TIMEOUT" envDefault:"5s" help:"how long one PostgreSQL connection attempt may take; a request that cannot connect in that time is answered 503 service_unavailable"`

	MediaURLTTL       time.Duration `env:"MEDIA_URL_TTL" envDefault:"24h" help:"how long a signed media URL from an upload or import stays valid"`
	MediaRetention    time.Duration `env:"MEDIA_RETENTION" envDefault:"48h" help:"uploaded and imported files are deleted this long after they arrive (kept while an unfinished task uses them)"`
	MediaSweepEvery   time.Duration `env:"MEDIA_SWEEP_INTERVAL" envDefault:"1m" help:"how often one instance (a periodic job of the elected leader) deletes input media and videos past their retention, and call-log rows past CALL_LOG_RETENTION"`
	StorageSweepEvery time.Duration `env:"STORAGE_SWEEP_INTERVAL" envDefault:"1h" help:"how often one instance lists the storage and deletes files no row names (left by a crash mid-write) that are over an hour old"`
	CallLogRetention  time.Duration `env:"CALL_LOG_RETENTION" envDefault:"2160h" help:"call-log rows are deleted this long after the call (90 days; at least 24h, there is no keep-forever); the ledger and the audit log are never deleted"`
	LedgerCheckEvery  time.Duration `env:"LEDGER_CHECK_INTERVAL" envDefault:"1h" help:"how often one instance checks every balance against the sum of its ledger entries and every finished task's reservation; drift is logged as an error, shown on /support and counted in /metrics (0 = never)"`
	S3Endpoint        string        `env:"S3_ENDPOINT" help:"S3-compatible endpoint URL (https://s3.eu-west-1.amazonaws.com, http://127.0.0.1:7070); unset = files on local disk under DATA_DIR"`
	S3Bucket          string        `env:"S3_BUCKET" help:"bucket for media and outputs (it must exist)"`
	S3AccessKeyID     string        `env:"S3_ACCESS_KEY_ID" help:"S3 access key id"`
	S3SecretKey       string        `env:"S3_SECRET_ACCESS_KEY" help:"S3 secret access key (kept out of the database and logs)"`
	S3Region          string        `env:"S3_REGION" envDefault:"us-east-1" help:"S3 region"`
	S3PresignTTL      time.Duration `env:"S3_PRESIGN_TTL" envDefault:"5m" help:"lifetime of the presigned S3 link a /media URL redirects to"`
}

// Load reads the configuration from environ (nil means the process environment).
func Load(environ map[string]string) (*Config, error) {
	opts := env.Options{}
	if environ != nil {
		opts.Environment = environ
	}
	var c Config
	if err := env.ParseWithOptions(&c, opts); err != nil {
		return nil, fmt.Errorf("read configuration: %w", err)
	}
	c.PublicBaseURL = strings.TrimRight(c.PublicBaseURL, "/")
	if c.DatabaseURL == "" {
		c.DatabaseURL = filepath.Join(c.DataDir, "videogen.db")
	}
	if c.SimDataDir == "" {
		c.SimDataDir = filepath.Join(c.DataDir, "sim")
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr(c.Production())
	}
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		c.WorkerID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return &c, nil
}

// DefaultAddr is ADDR when it is unset. Outside production, this machine only: development lets any
// tenant aim webhooks at loopback ports and prints e-mailed links to the log, which is for one developer,
// not for a network. "localhost", not 127.0.0.1, so that http://localhost:8080 (the README's, and
// PUBLIC_BASE_URL's default) answers whichever loopback address the client's resolver gives first: the
// server listens on both (docs/decisions.md, "Development listens on this machine only"). In production
// every interface, as before: the units and containers set ADDR, and production refuses those
// development conveniences anyway.
func DefaultAddr(production bool) string {
	if production {
		return ":8080"
	}
	return "localhost:8080"
}

// Production reports whether APP_ENV asks for production safety checks.
func (c *Config) Production() bool { return c.AppEnv == "production" }

// IsPostgres reports whether DATABASE_URL selects PostgreSQL.
func (c *Config) IsPostgres() bool {
	return strings.HasPrefix(c.DatabaseURL, "postgres://") || strings.HasPrefix(c.DatabaseURL, "postgresql://")
}

// Validate refuses settings that would be unsafe or contradictory. It runs before anything starts.
func (c *Config) Validate() error {
	var errs []error
	u, err := url.Parse(c.PublicBaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("PUBLIC_BASE_URL %q is not an http(s) URL", c.PublicBaseURL))
	}
	switch c.AppEnv {
	case "development", "production":
	default:
		errs = append(errs, fmt.Errorf("APP_ENV must be development or production, not %q", c.AppEnv))
	}
	if c.TestTopups && (u == nil || !isLoopbackHost(u.Hostname())) {
		errs = append(errs, errors.New("TEST_TOPUPS=1 is refused unless PUBLIC_BASE_URL is a loopback address"))
	}
	if c.Production() {
		if c.TestTopups {
			errs = append(errs, errors.New("production refuses TEST_TOPUPS"))
		}
		if c.ResendAPIKey == "" {
			errs = append(errs, errors.New("production refuses printed e-mails: set RESEND_API_KEY"))
		}
		if c.AppSecret == "" {
			errs = append(errs, errors.New("production requires APP_SECRET"))
		}
		if u != nil && u.Scheme != "https" {
			errs = append(errs, errors.New("production requires an https:// PUBLIC_BASE_URL"))
		}
		if c.StripeSecretKey == "" || c.StripeWebhookSecret == "" {
			errs = append(errs, errors.New("production requires STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET: customers pay by card"))
		}
	}
	if (c.StripeSecretKey == "") != (c.StripeWebhookSecret == "") {
		errs = append(errs, errors.New("STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET go together: payments are credited only from verified webhooks"))
	}
	if lo, hi, err := c.TopupBounds(); err != nil {
		errs = append(errs, err)
	} else if lo <= 0 || hi < lo {
		errs = append(errs, errors.New("TOPUP_MIN must be positive and TOPUP_MAX at least as large"))
	}
	if lo, hi, err := c.TestTopupBounds(); err != nil {
		errs = append(errs, err)
	} else if lo <= 0 || hi < lo {
		errs = append(errs, errors.New("TEST_TOPUP_MIN must be positive and TEST_TOPUP_MAX at least as large"))
	}
	if c.StripeWebhookTimeout < 100*time.Millisecond || c.StripeWebhookTimeout > 9*time.Second {
		errs = append(errs, errors.New("STRIPE_WEBHOOK_TIMEOUT must be between 100ms and 9s: Stripe stops waiting after 10s"))
	}
	if c.RechargeCap < 1 || c.ReconcileEvery < 0 {
		errs = append(errs, errors.New("AUTO_RECHARGE_MAX_PER_DAY must be at least 1 and STRIPE_RECONCILE_INTERVAL not negative"))
	}
	if c.PprofAddr != "" {
		if host, _, err := net.SplitHostPort(c.PprofAddr); err != nil || !isLoopbackHost(host) {
			errs = append(errs, fmt.Errorf("PPROF_ADDR %q must be a loopback address: profiles expose internals", c.PprofAddr))
		}
	}
	if err := c.checkMetricsAddr(); err != nil {
		errs = append(errs, err)
	}
	if c.CallLogRetention < 24*time.Hour {
		errs = append(errs, errors.New("CALL_LOG_RETENTION must be at least 24h: customers read their call log, and a retention promise is never switched off (set a longer one instead)"))
	}
	if c.LedgerCheckEvery < 0 || (c.LedgerCheckEvery > 0 && c.LedgerCheckEvery < time.Second) {
		errs = append(errs, errors.New("LEDGER_CHECK_INTERVAL must be 0 (never) or at least 1s"))
	}
	if c.UpstreamBaseURL != "" && strings.TrimSpace(c.UpstreamAPIKeys) == "" {
		errs = append(errs, errors.New("UPSTREAM_BASE_URL needs UPSTREAM_API_KEYS (or, better, describe the upstream in UPSTREAMS_FILE: docs/upstreams.md)"))
	}
	if c.UpstreamsFile != "" && (c.UpstreamBaseURL != "" || c.UpstreamAPIKeys != "") {
		errs = append(errs, errors.New("UPSTREAMS_FILE replaces UPSTREAM_BASE_URL and UPSTREAM_API_KEYS: unset those two and describe every upstream in the file (docs/upstreams.md)"))
	}
	if c.BreakerFailures < 1 || c.BreakerCooldown < 100*time.Millisecond || c.UpstreamsWatch < 100*time.Millisecond {
		errs = append(errs, errors.New("UPSTREAM_BREAKER_FAILURES must be at least 1, UPSTREAM_BREAKER_COOLDOWN and UPSTREAMS_WATCH_INTERVAL at least 100ms"))
	}
	if c.S3Endpoint != "" && (c.S3Bucket == "" || c.S3AccessKeyID == "" || c.S3SecretKey == "") {
		errs = append(errs, errors.New("S3_ENDPOINT needs S3_BUCKET, S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY"))
	}
	if c.MediaURLTTL < time.Second || c.MediaRetention < time.Minute || c.MediaSweepEvery <= 0 || c.StorageSweepEvery <= 0 || c.S3PresignTTL < time.Second {
		errs = append(errs, errors.New("MEDIA_URL_TTL and S3_PRESIGN_TTL must be at least 1s, MEDIA_RETENTION at least 1m, MEDIA_SWEEP_INTERVAL and STORAGE_SWEEP_INTERVAL positive"))
	}
	if c.RateLimitRPS <= 0 || c.RateLimitBurst < 1 {
		errs = append(errs, errors.New("RATE_LIMIT_RPS must be > 0 and RATE_LIMIT_BURST >= 1"))
	}
	if c.SimCredentials < 1 || c.SimConcurrency < 1 || c.UpstreamConcurrency < 1 || c.WorkerTasks < 1 {
		errs = append(errs, errors.New("SIM_CREDENTIALS, SIM_CONCURRENCY, UPSTREAM_CONCURRENCY and WORKER_CONCURRENCY must be >= 1"))
	}
	for name, d := range map[string]time.Duration{"LEASE_DURATION": c.LeaseDuration, "QUEUE_TIMEOUT": c.QueueTimeout,
		"RUN_TIMEOUT": c.RunTimeout, "OUTPUT_RETENTION": c.OutputRetention, "UPSTREAM_TIMEOUT": c.UpstreamTimeout,
		"SHUTDOWN_TIMEOUT": c.ShutdownTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be a positive duration such as 30s", name))
		}
	}
	if c.SimOutput != "realistic" && c.SimOutput != "tiny" {
		errs = append(errs, fmt.Errorf("SIM_OUTPUT is %q: want realistic or tiny", c.SimOutput))
	}
	if c.SimDuration < 0 {
		errs = append(errs, errors.New("SIM_DURATION must not be negative (0 completes at once, as make bench's worker run wants)"))
	}
	if c.LeaseDuration > 0 && c.LeaseDuration < 300*time.Millisecond {
		errs = append(errs, errors.New("LEASE_DURATION must be at least 300ms"))
	}
	if c.MaxUploadsPerAccount < 1 || c.MaxUploads < c.MaxUploadsPerAccount {
		errs = append(errs, errors.New("MAX_UPLOADS_PER_ACCOUNT must be at least 1 and MAX_UPLOADS at least as large"))
	}
	if c.MaxQueued < 1 {
		errs = append(errs, errors.New("MAX_QUEUED_PER_ACCOUNT must be at least 1"))
	}
	if c.KeyCacheTTL < 0 || c.PollCacheTTL < 0 {
		errs = append(errs, errors.New("API_KEY_CACHE_TTL and POLL_CACHE_TTL must not be negative"))
	}
	if c.PollMin <= 0 || c.PollMax < c.PollMin {
		errs = append(errs, errors.New("POLL_INTERVAL_MIN must be > 0 and <= POLL_INTERVAL_MAX"))
	}
	if d := c.ShutdownDrain; d < 0 || d > time.Minute {
		errs = append(errs, errors.New("SHUTDOWN_DRAIN_DELAY must be from 0 to 1m (a proxy needs a few health checks, not minutes)"))
	}
	if c.DatabaseConnectTimeout < time.Second {
		errs = append(errs, errors.New("DATABASE_CONNECT_TIMEOUT must be at least 1s (PostgreSQL's connect_timeout counts whole seconds)"))
	}
	return errors.Join(errs...)
}

// checkMetricsAddr refuses a METRICS_ADDR that is not host:port, or that is the public listener's: the
// metrics name routes, credentials and queue depths, which are for the operator's Prometheus only.
func (c *Config) checkMetricsAddr() error {
	if c.MetricsAddr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(c.MetricsAddr)
	if err != nil || port == "" {
		return fmt.Errorf("METRICS_ADDR %q must be host:port, such as 127.0.0.1:9090 or :9090", c.MetricsAddr)
	}
	pubHost, pubPort, err := net.SplitHostPort(c.Addr)
	if err != nil || port == "0" || port != pubPort {
		return nil // port 0 is a fresh port each time; different ports never meet
	}
	if host == pubHost || isWildcardHost(host) || isWildcardHost(pubHost) || coversLoopback(host, pubHost) || coversLoopback(pubHost, host) {
		return fmt.Errorf("METRICS_ADDR %q must not be the public listen address ADDR %q: metrics are never served on the public port", c.MetricsAddr, c.Addr)
	}
	return nil
}

// coversLoopback reports whether listen host a, being "localhost" (both loopback addresses, as the
// server listens on it), includes listen host b.
func coversLoopback(a, b string) bool {
	return a == "localhost" && (b == "127.0.0.1" || b == "::1")
}

// isWildcardHost reports whether a listen host means every interface.
func isWildcardHost(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// TopupBounds returns TOPUP_MIN and TOPUP_MAX as amounts, in whole cents.
func (c *Config) TopupBounds() (min, max money.Micros, err error) {
	if min, err = money.ParseUSD(c.TopupMin); err == nil {
		max, err = money.ParseUSD(c.TopupMax)
	}
	if err != nil || min%(money.PerUSD/100) != 0 || max%(money.PerUSD/100) != 0 {
		return 0, 0, fmt.Errorf("TOPUP_MIN and TOPUP_MAX must be dollar amounts in whole cents, such as 5 or 1000.00")
	}
	return min, max, nil
}

// TestTopupBounds returns TEST_TOPUP_MIN and TEST_TOPUP_MAX as amounts, in whole cents.
func (c *Config) TestTopupBounds() (min, max money.Micros, err error) {
	if min, err = money.ParseUSD(c.TestTopupMin); err == nil {
		max, err = money.ParseUSD(c.TestTopupMax)
	}
	if err != nil || min%(money.PerUSD/100) != 0 || max%(money.PerUSD/100) != 0 {
		return 0, 0, fmt.Errorf("TEST_TOPUP_MIN and TEST_TOPUP_MAX must be dollar amounts in whole cents, such as 1 or 1000.00")
	}
	return min, max, nil
}

// EnsureSecret fills AppSecret in development from DATA_DIR/app_secret, creating it once. Production
// never gets here without APP_SECRET (Validate refuses it).
func (c *Config) EnsureSecret() error {
	if c.AppSecret != "" {
		return nil
	}
	path := filepath.Join(c.DataDir, "app_secret")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		c.AppSecret = strings.TrimSpace(string(b))
		return nil
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return fmt.Errorf("generate app secret: %w", err)
	}
	secret := hex.EncodeToString(buf)
	// Two processes starting at once on a new DATA_DIR (a server and a command) must end with one secret:
	// each writes its own to a file of its own, and links it into place, which only one link can do; the
	// other reads the winner's. A plain write would let the second overwrite the first's while the first
	// already signs with it, and an O_EXCL create would let a reader see the file before its bytes.
	tmp, err := os.CreateTemp(c.DataDir, ".app_secret-*")
	if err != nil {
		return fmt.Errorf("write app secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write app secret: %w", err)
	}
	if _, err := tmp.WriteString(secret + "\n"); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write app secret: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write app secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write app secret: %w", err)
	}
	err = os.Link(tmp.Name(), path)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		// A file system without hard links (some network and container mounts): create the file only if
		// it is not there, and write it. A reader racing this write may find it empty, and says so.
		err = writeNew(path, secret+"\n")
	}
	if errors.Is(err, fs.ErrExist) {
		b, err := os.ReadFile(path)
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return fmt.Errorf("read the app secret another process is writing to %s (start again): %v", path, err)
		}
		c.AppSecret = strings.TrimSpace(string(b))
		return nil
	}
	if err != nil {
		return fmt.Errorf("write app secret: %w", err)
	}
	c.AppSecret = secret
	return nil
}

// writeNew creates path with content, failing with fs.ErrExist when it exists.
func writeNew(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Secrets returns the configured HMAC keys: the first signs, all verify.
func (c *Config) Secrets() []string {
	var out []string
	for _, s := range strings.Split(c.AppSecret, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Variable is one documented setting, for `serve --help` and the README.
type Variable struct {
	Name, Default, Help string
}

// Variables lists every setting in declaration order.
func Variables() []Variable {
	var out []Variable
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		def := f.Tag.Get("envDefault")
		if def == "" {
			def = f.Tag.Get("defaultDoc") // a default Load computes
		}
		out = append(out, Variable{Name: f.Tag.Get("env"), Default: def, Help: f.Tag.Get("help")})
	}
	return out
}
