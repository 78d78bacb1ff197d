// Package server assembles videogen from its configuration — database, upstream pool (or the built-in
// simulator), workers, call log, HTTP app — and shuts it down in the right order.
package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	rtpprof "runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	_ "time/tzdata" // time zones of console viewers, even where the system has none

	"github.com/gofiber/fiber/v2"

	"github.com/stripe/stripe-go/v76/client"

	"videogen/billing"
	"videogen/billing/payments"
	"videogen/handlers"
	"videogen/handlers/web"
	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/auth"
	"videogen/internal/domain/calllog"
	"videogen/internal/domain/media"
	"videogen/internal/domain/members"
	"videogen/internal/domain/notify"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/sim"
	"videogen/internal/domain/videos"
	"videogen/internal/domain/webhooks"
	"videogen/internal/domain/worker"
	"videogen/internal/infra/blob"
	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
	"videogen/internal/infra/lingerclose"
	"videogen/internal/infra/mail"
	"videogen/internal/infra/mediafetch"
	"videogen/internal/infra/queue"
	"videogen/internal/infra/ratelimit"
	"videogen/internal/infra/runner"
	"videogen/internal/jobs/janitor"
	"videogen/internal/jobs/ledgercheck"
	"videogen/internal/staff/metrics"
)

// Server is a running videogen instance.
type Server struct {
	Cfg    *config.Config
	Log    *slog.Logger
	DB     *db.DB
	App    *fiber.App
	Worker *worker.Worker
	Sim    *sim.Sim // nil when a real upstream is configured
	// Pool is the upstream credentials (reloaded by ReloadUpstreams) and their health.
	Pool    *upstream.Pool
	Videos  *videos.Service
	Tasks   *tasks.Store
	Media   *media.Service
	Keys    *apikeys.Authenticator
	CallLog *calllog.Writer
	Auth    *auth.Service
	// Mail sends the e-mails: Resend with RESEND_API_KEY, else the log. Tests set their own before New
	// (see Options).
	Mail mail.Sender

	Outbox *mail.Outbox
	// Queue is River on the database: e-mail, webhook deliveries, payments' work and the chores (docs/jobs.md).
	Queue *queue.Queue
	// Payments is Stripe top-ups, auto-recharge and balance warnings (card payments off without keys).
	Payments *payments.Service
	// Metrics is what /metrics exports, on METRICS_ADDR (nil when that is unset).
	Metrics *metrics.Metrics
	// Webhooks is the customers' endpoints and the outbox of their events.
	Webhooks *webhooks.Service

	listener     atomic.Pointer[lingerclose.Listener] // set by Serve
	draining     atomic.Bool                          // a graceful shutdown has begun: /readyz answers 503
	stopRequests context.CancelFunc                   // ends handlers' patience: bodies still arriving get 503 shutting_down

	limits    *ratelimit.Store
	metricsLn net.Listener // METRICS_ADDR's listener, nil when off
	// parts are the background parts: built by New, run by Start, stopped in reverse order by Close.
	parts     *runner.Group
	lifeMu    sync.Mutex // Start and Close: nothing starts once closing has begun
	started   bool
	closed    bool
	closeOnce sync.Once
	reloadMu  sync.Mutex // one reload at a time
}

// Options replace parts a test needs to observe.
type Options struct {
	Mail mail.Sender // where e-mails go (default: Resend or the log, from the configuration)
	// ImportPolicy replaces production's import guard policy (port 443, public addresses, system
	// roots): tests allow their loopback TLS server here, explicitly.
	ImportPolicy *mediafetch.Policy
	// Now replaces the clock every part stamps what it stores with (default: real time).
	Now func() time.Time
}

// New builds the service from cfg and starts nothing: Start runs its background parts, Serve answers
// HTTP. It opens and migrates the database, then builds each part in dependency order, each given
// everything it needs when it is made: storage and the upstream pool, the task store, media, the poll
// cache, the worker (which tells the poll cache of its changes), the videos service (which wakes the
// worker), mail, accounts, the HTTP app, and the list of background parts (the job queues — e-mail,
// password resets, webhook deliveries, payments' work and the periodic chores, docs/jobs.md — the
// upstream watch, the worker where WORKERS is on). One clock (time.Now, or Options.Now)
// and one logger are given to every part.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...Options) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.EnsureSecret(); err != nil {
		return nil, err
	}
	var opt Options
	for _, o := range opts {
		if o.Mail != nil {
			opt.Mail = o.Mail
		}
		if o.ImportPolicy != nil {
			opt.ImportPolicy = o.ImportPolicy
		}
		if o.Now != nil {
			opt.Now = o.Now
		}
	}
	d, err := db.Open(ctx, db.WithConnectTimeout(cfg.DatabaseURL, cfg.DatabaseConnectTimeout))
	if err != nil {
		return nil, err
	}
	s := &Server{Cfg: cfg, Log: log, DB: d, parts: runner.NewGroup(log)}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close(context.Background())
		}
	}()
	if n, err := d.Migrate(ctx); err != nil {
		return nil, err
	} else if n > 0 {
		log.Info("database migrated", "migrations", n)
	}
	clock := time.Now
	if opt.Now != nil {
		clock = opt.Now
	}
	if err := billing.SeedPrices(ctx, d, clock()); err != nil {
		return nil, err
	}

	creds, err := s.upstreamCredentials()
	if err != nil {
		return nil, err
	}
	pool := upstream.NewPool(d, upstream.NewHealth(upstream.HealthConfig{Failures: cfg.BreakerFailures, Cooldown: cfg.BreakerCooldown,
		Instance: cfg.WorkerID, Log: log.With("part", "upstreams"), Now: clock}), creds)
	if err := pool.Check(ctx, creds); err != nil {
		return nil, err
	}
	if err := pool.Sync(ctx, creds, false, clock()); err != nil {
		return nil, err
	}
	if err := pool.Health.Refresh(ctx, d, ids(creds), 3*cfg.UpstreamsWatch); err != nil {
		return nil, err
	}
	s.Pool = pool
	if cfg.MetricsAddr != "" {
		s.Metrics = metrics.New(d, log.With("part", "metrics"), clock, metrics.Settings{
			RunTimeout: cfg.RunTimeout, QueueTimeout: cfg.QueueTimeout, Stripe: cfg.StripeSecretKey != ""})
	}
	blobs, mediaStore, err := stores(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Every failed storage call is counted for videogen_storage_errors_total (alert VideogenStorageErrors).
	blobs, mediaStore = blob.Counted(blobs, s.Metrics.StorageFailed), blob.Counted(mediaStore, s.Metrics.StorageFailed)
	if s.limits, err = ratelimit.Connect(cfg.RedisURL, clock, ratelimit.Options{Log: log.With("part", "ratelimit"),
		OnShared: s.Metrics.RateLimitShared}); err != nil {
		return nil, err
	}
	if s.Queue, err = queue.New(d, queue.Config{ID: cfg.WorkerID, Poll: cfg.JobsPoll, Lease: cfg.LeaseDuration, Now: clock, Log: log,
		Workers: map[string]int{queue.Webhooks: 16}}); err != nil {
		return nil, err
	}
	mailer := opt.Mail
	if mailer == nil {
		if mailer, err = mailSender(cfg, log); err != nil {
			return nil, err
		}
	}
	s.Mail = mailer
	if s.Outbox, err = mail.NewOutbox(d, s.Queue, mailer, log.With("part", "mail"), mail.OutboxConfig{
		Secrets: cfg.Secrets(), Now: clock}); err != nil {
		return nil, err
	}

	s.Tasks = tasks.NewStore(d, clock)
	s.Media = &media.Service{DB: d, Store: mediaStore, Signer: media.NewSigner(cfg.PublicBaseURL, cfg.Secrets()),
		Log: log.With("part", "media"), URLTTL: cfg.MediaURLTTL, Retention: cfg.MediaRetention, Now: clock}
	polls := videos.NewPollCache(cfg.PollCacheTTL)
	s.Worker = worker.New(worker.Config{
		ID: cfg.WorkerID, PollMin: cfg.PollMin, PollMax: cfg.PollMax, Lease: cfg.LeaseDuration,
		RunTimeout: cfg.RunTimeout, OutputRetention: cfg.OutputRetention, Parallel: cfg.WorkerTasks,
	}, worker.Deps{Tasks: s.Tasks, Pool: pool, Blobs: blobs, Log: log.With("part", "worker"),
		OnChange: polls.Forget, Inputs: s.Media.SignedInputs, FFmpeg: findFFmpeg(cfg.FFmpegPath, log)})
	var wakeWorker func()
	if cfg.Workers {
		wakeWorker = s.Worker.Notify
	}
	prices := billing.NewPrices(d)
	s.Videos = &videos.Service{DB: d, Tasks: s.Tasks, Prices: prices, Blobs: blobs, Media: s.Media, Polls: polls, Pool: pool,
		MaxQueued: cfg.MaxQueued, QueueTimeout: cfg.QueueTimeout, Admit: pool.Admit, Notify: wakeWorker, Now: clock,
		Log: log.With("part", "videos")}
	s.CallLog = calllog.NewWriter(d, log.With("part", "calllog"))
	s.Keys = apikeys.NewAuthenticator(d, cfg.KeyCacheTTL, clock)
	notifier := &notify.Notifier{Outbox: s.Outbox}
	topupMin, topupMax, err := cfg.TopupBounds()
	if err != nil {
		return nil, err
	}
	testTopupMin, testTopupMax, err := cfg.TestTopupBounds()
	if err != nil {
		return nil, err
	}
	var stripeAPI *client.API
	if cfg.StripeSecretKey != "" {
		stripeAPI = payments.NewStripeClient(cfg.StripeSecretKey, cfg.StripeAPIBase, log.With("part", "stripe"))
	}
	s.Payments = payments.New(payments.Config{PublicBaseURL: cfg.PublicBaseURL, WebhookSecret: cfg.StripeWebhookSecret,
		MinTopup: topupMin, MaxTopup: topupMax, RechargeCap: cfg.RechargeCap, Owner: cfg.WorkerID, ReconcileEvery: cfg.ReconcileEvery,
		WebhookBudget: cfg.StripeWebhookTimeout},
		payments.Deps{DB: d, Queue: s.Queue, Stripe: stripeAPI, Notify: notifier, Log: log.With("part", "payments"), Now: clock})
	s.Auth = &auth.Service{DB: d, Notify: notifier, BaseURL: cfg.PublicBaseURL,
		Throttle: auth.NewThrottles(s.limits), Now: clock, Secrets: cfg.Secrets(), Queue: s.Queue}
	queue.Add(s.Queue, s.Auth.ResetWorker())
	trusted, err := handlers.ParseTrustedProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, err
	}
	stopping, stopRequests := context.WithCancel(context.Background())
	s.stopRequests = stopRequests
	importPolicy := mediafetch.Policy{}
	if opt.ImportPolicy != nil {
		importPolicy = *opt.ImportPolicy
	}
	// Webhook endpoints pass the import guard (docs/webhooks.md); outside production, http:// to this
	// machine too, for a receiver under development.
	hookPolicy := importPolicy
	hookPolicy.PlainHTTPLoopback = !cfg.Production()
	if s.Webhooks, err = webhooks.New(d, s.Queue, mediafetch.New(hookPolicy), notifier, log.With("part", "webhooks"), webhooks.Config{
		Secrets: cfg.Secrets(), Now: clock, ConsoleURL: cfg.PublicBaseURL, Lease: cfg.LeaseDuration}); err != nil {
		return nil, err
	}
	s.Tasks.TellEvents(s.Webhooks)
	s.App = handlers.New(handlers.Deps{
		DB: d, Log: log, Keys: s.Keys, Limiter: s.limits.Limiter("videogen:rl:", ratelimit.PerSecond(cfg.RateLimitRPS, cfg.RateLimitBurst)),
		CallLog: s.CallLog, Videos: s.Videos, Prices: prices, ModelOffer: pool.Offer, MayCancel: pool.MayCancel,
		MediaPolicy: videos.MediaPolicy{Signer: s.Media.Signer, Now: clock},
		Media:       s.Media, Importer: mediafetch.New(importPolicy), PresignTTL: cfg.S3PresignTTL, Now: clock,
		Auth: s.Auth, Secrets: cfg.Secrets(), SecureCookies: strings.HasPrefix(cfg.PublicBaseURL, "https://"),
		TrustedProxies: trusted, PublicBaseURL: cfg.PublicBaseURL, TestTopups: cfg.TestTopups, SupportEmail: cfg.SupportEmail, MailPrinted: cfg.ResendAPIKey == "", Payments: s.Payments,
		TestTopupMin: testTopupMin, TestTopupMax: testTopupMax,
		Stopping: stopping, Draining: s.draining.Load, Transfers: web.NewTransfers(cfg.MaxUploadsPerAccount, cfg.MaxUploads),
		Metrics: s.Metrics, Webhooks: s.Webhooks,
		WebhookSends: s.limits.Limiter("videogen:hooksend:", ratelimit.Rate{Events: web.WebhookSendsPerMinute, Per: time.Minute, Burst: web.WebhookSendsPerMinute}),
		Members:      &members.Service{DB: d, Notify: notifier, BaseURL: cfg.PublicBaseURL, Now: clock, Notices: s.Auth.Throttle.Notices},
	})
	// The periodic chores: River jobs of the chores queue, scheduled by the elected leader and worked by
	// any instance (docs/jobs.md, "Periodic chores"). The call log's retention is swept on the janitor's
	// schedule.
	janitor.New(janitor.Config{RetentionEvery: cfg.MediaSweepEvery, OrphanEvery: cfg.StorageSweepEvery},
		janitor.Deps{DB: d, Tasks: s.Tasks, Media: s.Media, Outputs: blobs, Log: log.With("part", "janitor"), Now: clock}).Schedule(s.Queue)
	calllog.NewSweeper(calllog.RetentionConfig{Retention: cfg.CallLogRetention, Every: cfg.MediaSweepEvery},
		calllog.RetentionDeps{DB: d, Log: log.With("part", "janitor"), Now: clock}).Schedule(s.Queue)
	ledgercheck.New(ledgercheck.Config{Owner: cfg.WorkerID, Every: cfg.LedgerCheckEvery},
		ledgercheck.Deps{DB: d, Log: log.With("part", "ledger-check"), Now: clock,
			OnResult: func(r ledgercheck.Result) { s.Metrics.LedgerChecked(r.Drift()) }}).Schedule(s.Queue)

	if cfg.PprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		ln, err := net.Listen("tcp", cfg.PprofAddr)
		if err != nil {
			return nil, fmt.Errorf("PPROF_ADDR: %w", err)
		}
		s.parts.Add("pprof", runner.HTTPServer(&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln, time.Second))
	}
	if s.Metrics != nil {
		if err := s.serveMetrics(cfg.MetricsAddr); err != nil {
			return nil, err
		}
	}
	// The background parts, in the order they start; they stop in reverse (Start, Close): the call log
	// and the worker first, so that nothing the worker may need (the simulator, the outbox) has gone
	// before it.
	seen, err := s.reloadSeq(ctx)
	if err != nil {
		return nil, err
	}
	// The queues stop after everything that may insert jobs, and before nothing they need: a job in
	// hand is finished with the mailer, the fetcher and the database still there.
	s.parts.Add("job queues", s.Queue)
	s.parts.Add("upstream watch", s.upstreamWatch(seen))
	if cfg.Workers {
		s.parts.Add("worker", runner.Func(func(ctx context.Context) error { s.Worker.Run(ctx); return nil }))
	}
	// The last to start, the first to stop: every request waits for its call-log row's commit, so the
	// writer runs as long as requests do (Shutdown ends them before the parts stop), and what it still
	// holds must not wait behind the worker's tasks in hand.
	s.parts.Add("call log", s.CallLog)
	ok = true
	return s, nil
}

// serveMetrics answers GET /metrics on addr, a listener of its own: what it tells (routes, queue depths,
// credentials) is for the operator's Prometheus, never for the public port, whose router has no such
// route. Listening here, before the server answers anything, makes a busy port fail the start.
func (s *Server) serveMetrics(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("METRICS_ADDR: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.Metrics.Handler())
	s.metricsLn = ln
	s.parts.Add("metrics", runner.HTTPServer(&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, ln, time.Second))
	s.Log.Info("serving Prometheus metrics", "addr", ln.Addr().String())
	return nil
}

// MetricsAddr is the address /metrics is served on ("" when METRICS_ADDR is unset); with port 0, the
// port chosen.
func (s *Server) MetricsAddr() string {
	if s.metricsLn == nil {
		return ""
	}
	return s.metricsLn.Addr().String()
}

// stores returns where outputs and input media live: two folders under DATA_DIR by default, or one S3
// bucket (keys outputs/… and media/…) when S3_ENDPOINT is set, so every instance sees every file.
func stores(ctx context.Context, cfg *config.Config) (outputs, inputs blob.Store, err error) {
	if cfg.S3Endpoint != "" {
		s3, err := blob.NewS3(ctx, blob.S3Config{Endpoint: cfg.S3Endpoint, Bucket: cfg.S3Bucket,
			AccessKeyID: cfg.S3AccessKeyID, SecretAccessKey: cfg.S3SecretKey, Region: cfg.S3Region})
		if err != nil {
			return nil, nil, err
		}
		return s3, s3, nil
	}
	if outputs, err = blob.NewLocal(filepath.Join(cfg.DataDir, "blobs")); err != nil {
		return nil, nil, err
	}
	// Media keys start with "media/", so the files land in DATA_DIR/media.
	if inputs, err = blob.NewLocal(cfg.DataDir); err != nil {
		return nil, nil, err
	}
	return outputs, inputs, nil
}

// mailSender is Resend when RESEND_API_KEY is set, else the log (development: the link is in the log).
func mailSender(cfg *config.Config, log *slog.Logger) (mail.Sender, error) {
	if cfg.ResendAPIKey == "" {
		return mail.NewLog(log.With("part", "mail")), nil
	}
	return mail.NewResend(cfg.ResendAPIKey, cfg.MailFrom, cfg.ResendAPIBase)
}

// simSecrets returns n simulator credentials, kept in dir so that tasks keep their credential across
// restarts (their ids are digests of the secrets).
func simSecrets(dir string, n int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("simulator folder: %w", err)
	}
	path := filepath.Join(dir, "credentials")
	var secrets []string
	if b, err := os.ReadFile(path); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				secrets = append(secrets, line)
			}
		}
	}
	if len(secrets) >= n {
		return secrets[:n], nil
	}
	for len(secrets) < n {
		buf := make([]byte, 16)
		if _, err := rand.Read(buf); err != nil {
			return nil, err
		}
		secrets = append(secrets, "simkey_"+hex.EncodeToString(buf))
	}
	if err := os.WriteFile(path, []byte(strings.Join(secrets, "\n")+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("save simulator credentials: %w", err)
	}
	return secrets, nil
}

// Start runs the background parts New built: the simulator and /metrics servers, the job queues
// (docs/jobs.md), the upstream watch and, where WORKERS is on, the worker. Serve starts them if nobody
// has; a second Start, or one after Close, does nothing.
func (s *Server) Start() {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.started || s.closed {
		return
	}
	s.started = true
	s.parts.Start()
}

// Serve starts the background parts (Start) and answers HTTP on ln until Shutdown. Connections whose
// request body is refused unread are closed gracefully, so the client gets the refusal (lingerclose).
func (s *Server) Serve(ln net.Listener) error {
	s.Start()
	l := lingerclose.NewListener(ln)
	s.listener.Store(l)
	return s.App.Listener(l)
}

// BeginDrain takes the instance out of a proxy's rotation before it stops: /readyz answers 503 and every
// answer closes its connection, while requests are still served. Shutdown begins it too.
func (s *Server) BeginDrain() { s.draining.Store(true) }

// Shutdown stops gracefully within ctx: no new requests; in-flight requests get half of the time to
// finish; then requests still waiting for their body (a slow upload) or fetching an import are answered
// 503 shutting_down with Retry-After, so their clients are told rather than cut off; then the call log
// and the e-mail in hand are written out, the worker finishes the tasks it holds, and the database
// closes. A client that keeps a connection busy past all that is cut when the process exits.
func (s *Server) Shutdown(ctx context.Context) error {
	s.BeginDrain()
	if s.App != nil {
		budget := 20 * time.Second
		if deadline, ok := ctx.Deadline(); ok {
			budget = time.Until(deadline)
		}
		// The answers of interrupted requests get a tenth of the budget (at most 2 s) after the first half.
		patience, grace := budget/2, min(budget/10, 2*time.Second)
		httpCtx, cancel := context.WithTimeout(ctx, patience+grace)
		defer cancel()
		drained := make(chan error, 1)
		go func() { drained <- s.App.ShutdownWithContext(httpCtx) }()
		var err error
		select {
		case err = <-drained:
		case <-time.After(patience):
			s.Log.Warn("requests still running at half the shutdown budget; answering those still reading a body 503", "after", patience)
			s.stopRequests()
			if l := s.listener.Load(); l != nil {
				l.InterruptReads()
			}
			err = <-drained
		}
		if err != nil {
			// Those connections are cut when the process exits; where they were stuck is worth knowing.
			var stacks bytes.Buffer
			_ = rtpprof.Lookup("goroutine").WriteTo(&stacks, 1)
			s.Log.Warn("connections still busy at the shutdown deadline; they will be cut", "err", err, "goroutines", stacks.String())
		}
	}
	return s.Close(ctx)
}

// Close stops the background parts and closes the database (Shutdown calls it after the HTTP server).
func (s *Server) Close(ctx context.Context) error {
	var errs []error
	s.closeOnce.Do(func() {
		if s.stopRequests != nil {
			s.stopRequests()
		}
		s.lifeMu.Lock()
		s.closed = true // a Start still to come starts nothing
		s.lifeMu.Unlock()
		if s.parts != nil {
			// The worker first, the simulator and /metrics (a scrape reads the database) last, all before
			// the database closes. A worker not done in time leaves its tasks to come free when their
			// leases end.
			if err := s.parts.Stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("background parts: %w", err))
			}
		}
		if s.limits != nil {
			_ = s.limits.Close()
		}
		if s.DB != nil {
			errs = append(errs, s.DB.Close())
		}
	})
	return errors.Join(errs...)
}

// Run serves on cfg.Addr until ctx ends or a SIGINT or SIGTERM arrives, then drains and shuts down. The
// port answers from the first moment: while the database is connected and migrated (or unreachable),
// /healthz says alive and /readyz 503, so a proxy sends nothing yet (startingHandler). On the signal the
// instance first drains for SHUTDOWN_DRAIN_DELAY — out of the proxy's rotation (/readyz 503, every answer
// closing its connection) while it still accepts and serves — unless a second signal cuts that short;
// then Shutdown closes the port and finishes what is in hand within SHUTDOWN_TIMEOUT.
func Run(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	ctx, again, release := stopSignals(ctx)
	defer release()
	// Listen first: a busy port fails at once, before workers start touching the database.
	lns, err := listen(cfg.Addr)
	if err != nil {
		return fmt.Errorf("cannot serve: %w", err)
	}
	warnIfExposed(cfg, addrsOf(lns), log)
	hand := newHandoff(lns...)
	starting := &http.Server{Handler: startingHandler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = starting.Serve(hand.view(false)) }()
	s, err := newWhenReachable(ctx, cfg, log)
	stopStarting, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = starting.Shutdown(stopStarting)
	cancel()
	if err != nil {
		_ = hand.view(true).Close()
		return err
	}
	// Stopped while it was starting, the instance was never in a proxy's rotation (/readyz said
	// "starting"): there is nothing to drain.
	drain := cfg.ShutdownDrain
	if ctx.Err() != nil {
		drain = 0
	}
	s.Start()
	log.Info("videogen serving", "addr", joinAddrs(addrsOf(lns)), "public_base_url", cfg.PublicBaseURL, "database", dbKind(cfg))
	served := make(chan error, 1)
	go func() { served <- s.Serve(hand.view(true)) }()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for waiting := true; waiting; {
		select {
		case err := <-served:
			_ = s.Close(context.Background())
			return err
		case <-hup:
			// The error is logged by the reload, and the running pool stays as it was. Installed here, the
			// file is then announced to the other instances, so that none meets a credential it does not
			// know on a task.
			if err := s.ReloadUpstreams(ctx, "SIGHUP"); err == nil {
				if _, err := BumpReload(ctx, s.DB); err != nil {
					log.Error("announce the reload to the other instances", "err", err)
				}
			}
		case <-ctx.Done():
			waiting = false
		}
	}
	if drain > 0 {
		// Out of rotation first: /readyz answers 503 and answers close their connections while the proxy's
		// health check notices; new connections are still accepted and every request served all the while.
		s.BeginDrain()
		log.Info("draining: still serving, with /readyz at 503, so the proxy stops sending; a second SIGINT or SIGTERM ends the drain", "for", drain)
		timer := time.NewTimer(drain)
		select {
		case <-timer.C:
		case <-again:
			timer.Stop()
			log.Info("drain cut short by a second signal")
		}
	}
	log.Info("shutting down: finishing requests and tasks in hand")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	err = s.Shutdown(sctx)
	log.Info("stopped")
	return err
}

func dbKind(cfg *config.Config) string {
	if cfg.IsPostgres() {
		return "postgres"
	}
	return "sqlite:" + cfg.DatabaseURL
}
