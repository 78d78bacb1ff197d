// Package metrics exports the platform's figures for Prometheus (docs/support.md): every HTTP request by
// route and status, counted by the handlers' middleware; the figures of the staff overview — the task
// queue, the upstream credentials' load and health, the ledger self-check's last result, tasks overdue,
// the job queues, the last Stripe reconciliation — read from the database when Prometheus
// scrapes, through the same functions as the overview (internal/staff/ops); the limits the alert rules
// compare them with (deploy/prometheus/alerts.yml); and the drift and faults this instance met. It is
// served on METRICS_ADDR, a listener of its own, never on the public port.
//
// Every series an alert rule reads is exported from the start, so that a rule can fire on an
// installation where nothing has happened yet: a ledger check or a reconciliation that never ran reads
// as run at time 0 (docs/decisions.md, "Alert series from the start"). The exceptions are by design: the
// requests' series appear with the first request, videogen_ratelimit_shared only where REDIS_URL is set,
// the reconciliation's only where Stripe is configured.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/status"
	"videogen/internal/infra/db"
	"videogen/internal/staff/ops"
)

// ScrapeTimeout bounds the database reads of one scrape: a slow database gives a scrape with
// videogen_metrics_database_up 0, not a scrape that never ends.
const ScrapeTimeout = 5 * time.Second

// Metrics holds the collectors; a nil *Metrics records nothing (METRICS_ADDR unset).
type Metrics struct {
	reg        *prometheus.Registry
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	queries    *prometheus.CounterVec
	driftFound prometheus.Counter
	// The faults of the dependencies this instance met: storage calls that failed, requests refused
	// because the database was unreachable, and whether rate limits are shared (Redis) or per instance.
	storageErrors *prometheus.CounterVec
	dbUnavailable prometheus.Counter
	// limitsShared has no labels and no series until RateLimitShared is first called: an instance
	// without Redis never calls it, so it has nothing to alert on.
	limitsShared    *prometheus.GaugeVec
	limitsFallbacks prometheus.Counter
}

// Settings are what /metrics exports of the configuration. The limits are those the alert rules compare
// the database figures with, exported beside them so that a rule reads them rather than repeating the
// configuration, and stays right when an operator changes it.
type Settings struct {
	RunTimeout   time.Duration // RUN_TIMEOUT
	QueueTimeout time.Duration // QUEUE_TIMEOUT
	// Stripe is whether card payments are configured (STRIPE_SECRET_KEY): only then are the Stripe
	// reconciliation's series exported. Without Stripe there is nothing to reconcile, and a record left
	// from when there was could never be cleared by a run.
	Stripe bool
}

// StorageOps are the operations of videogen_storage_errors_total: each has its series from the start,
// at 0, so that increase() sees the first failure rather than only the ones after it.
var StorageOps = []string{"put", "get", "delete", "list", "presign"}

// New returns the metrics of an instance whose database is d; now is its clock.
func New(d *db.DB, log *slog.Logger, now func() time.Time, settings Settings) *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_http_requests_total",
			Help: "HTTP requests answered, by method, route pattern (never the raw path) and status sent.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "videogen_http_request_duration_seconds",
			Help: "Time from a request's arrival to its handler's answer, by method, route pattern and status.",
			// Prometheus' defaults, and longer ones for uploads and imports.
			Buckets: slices.Concat(prometheus.DefBuckets, []float64{30, 120}),
		}, []string{"method", "route", "status"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_http_database_queries_total",
			Help: "Database statements run by HTTP requests (BEGIN and COMMIT aside; not the call log's rows, written apart), by method and route pattern: over videogen_http_requests_total, the statements per request.",
		}, []string{"method", "route"}),
		driftFound: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "videogen_ledger_drift_found_total",
			Help: "Ledger self-checks run by this instance that found drift (each is logged as an error).",
		}),
		storageErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_storage_errors_total",
			Help: "Calls to the file storage (local folder or S3) that failed, by operation (put, get, delete, list, presign).",
		}, []string{"op"}),
		dbUnavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "videogen_database_unavailable_total",
			Help: "Requests answered 503 service_unavailable because the database could not be reached.",
		}),
		limitsShared: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "videogen_ratelimit_shared",
			Help: "1 while rate limits are shared through Redis, 0 while Redis is configured (REDIS_URL) but unreachable and this instance limits on its own; absent without REDIS_URL.",
		}, nil),
		limitsFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "videogen_ratelimit_fallbacks_total",
			Help: "Times this instance lost Redis and fell back to limiting on its own.",
		}),
	}
	for _, op := range StorageOps {
		m.storageErrors.WithLabelValues(op)
	}
	runTimeout := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "videogen_run_timeout_seconds",
		Help: "RUN_TIMEOUT: a task running upstream longer than this fails and is refunded.",
	})
	runTimeout.Set(settings.RunTimeout.Seconds())
	queueTimeout := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "videogen_queue_timeout_seconds",
		Help: "QUEUE_TIMEOUT: a task waiting this long for an upstream slot fails and is refunded.",
	})
	queueTimeout.Set(settings.QueueTimeout.Seconds())
	m.reg.MustRegister(m.storageErrors, m.dbUnavailable, m.limitsShared, m.limitsFallbacks, runTimeout, queueTimeout)
	m.reg.MustRegister(m.requests, m.latency, m.queries, m.driftFound,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&platform{db: d, log: log, now: now, stripe: settings.Stripe})
	return m
}

// Handler answers GET /metrics in Prometheus' text or protobuf format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Timeout: ScrapeTimeout + 5*time.Second})
}

// ObserveRequest counts one answered request and the database statements it ran. route is the pattern
// it matched ("/v1/videos/:id"), so the series are as many as the routes, whatever paths clients send.
func (m *Metrics) ObserveRequest(method, route string, status int, elapsed time.Duration, queries int64) {
	if m == nil {
		return
	}
	labels := []string{method, route, statusText(status)}
	m.requests.WithLabelValues(labels...).Inc()
	m.latency.WithLabelValues(labels...).Observe(elapsed.Seconds())
	// Every route has its series, at 0 when it ran none: a rate of 0 is the figure a cached route shows.
	m.queries.WithLabelValues(method, route).Add(float64(queries))
}

// LedgerChecked hears of a self-check this instance ran.
func (m *Metrics) LedgerChecked(drift bool) {
	if m == nil || !drift {
		return
	}
	m.driftFound.Inc()
}

// StorageFailed counts one failed storage call of the operation op.
func (m *Metrics) StorageFailed(op string) {
	if m == nil {
		return
	}
	m.storageErrors.WithLabelValues(op).Inc()
}

// DatabaseUnavailable counts one request refused because the database could not be reached.
func (m *Metrics) DatabaseUnavailable() {
	if m == nil {
		return
	}
	m.dbUnavailable.Inc()
}

// RateLimitShared hears whether rate limits are shared through Redis now; each change to false counts
// as a fallback. Call it only when REDIS_URL is set: videogen_ratelimit_shared appears with the first
// call, so an instance meant to limit on its own (one instance, no Redis) exports no 0 to alert on.
func (m *Metrics) RateLimitShared(shared bool) {
	if m == nil {
		return
	}
	if shared {
		m.limitsShared.WithLabelValues().Set(1)
		return
	}
	m.limitsShared.WithLabelValues().Set(0)
	m.limitsFallbacks.Inc()
}

// statuses are the label values of the statuses HTTP defines, made once rather than on every request.
var statuses = func() (s [600]string) {
	for i := range s {
		s[i] = strconv.Itoa(i)
	}
	return s
}()

func statusText(status int) string {
	if status >= 0 && status < len(statuses) {
		return statuses[status]
	}
	return "other"
}

// platform is the collector of the figures read from the database at each scrape.
type platform struct {
	db     *db.DB
	log    *slog.Logger
	now    func() time.Time
	stripe bool // Settings.Stripe
}

var (
	tasksDesc = prometheus.NewDesc("videogen_tasks",
		"Unfinished tasks now, by status (queued counts those waiting for a slot and those submitted upstream).", []string{"status"}, nil)
	waitingDesc = prometheus.NewDesc("videogen_tasks_waiting_for_slot",
		"Queued tasks waiting for an upstream credential slot (the backlog).", nil, nil)
	queueAgeDesc = prometheus.NewDesc("videogen_queue_oldest_age_seconds",
		"Age of the oldest queued task, in seconds (0 when none is queued).", nil, nil)
	inFlightDesc = prometheus.NewDesc("videogen_credential_in_flight",
		"Tasks holding a slot of the upstream credential now.", []string{"credential", "label"}, nil)
	capacityDesc = prometheus.NewDesc("videogen_credential_capacity",
		"Slots of the upstream credential (its max concurrency).", []string{"credential", "label"}, nil)
	enabledDesc = prometheus.NewDesc("videogen_credential_enabled",
		"1 when the upstream credential takes tasks, 0 when it is disabled.", []string{"credential", "label"}, nil)
	driftAccountsDesc = prometheus.NewDesc("videogen_ledger_drift_accounts",
		"Accounts whose ledger drifted, as the newest ledger self-check found (any instance, or videogen ledger check); 0 before the first check.", nil, nil)
	checkProblemsDesc = prometheus.NewDesc("videogen_ledger_check_problems",
		"Problems the newest ledger self-check found; 0 before the first check, which found nothing but checked nothing either (the timestamp, 0, says so).", nil, nil)
	checkTimeDesc = prometheus.NewDesc("videogen_ledger_check_timestamp_seconds",
		"When the newest ledger self-check ran (Unix time); 0 when none ever ran: alert when it is too old.", nil, nil)
	overdueDesc = prometheus.NewDesc("videogen_tasks_overdue",
		"Tasks in flight (queued at the provider or in progress) past their run deadline (RUN_TIMEOUT after submission), which the worker's sweep should have ended.", nil, nil)
	breakerOpenDesc = prometheus.NewDesc("videogen_upstream_breaker_open",
		"1 when a live instance reports the upstream credential's circuit breaker open (it takes no new task), else 0.", []string{"credential", "label"}, nil)
	refusedDesc = prometheus.NewDesc("videogen_credential_refused",
		"1 when the provider refused the credential's key (reason key) or its account is out of credit (reason credit): it takes no new task until a reload.", []string{"credential", "label", "reason"}, nil)
	jobsDesc = prometheus.NewDesc("videogen_jobs",
		"Jobs of the queue (mail, webhooks, payments, chores) by state: available (due, waiting for a worker), running, retryable (failed, waiting for their retry), scheduled (due later), discarded (given up, kept 30 days).", []string{"queue", "state"}, nil)
	jobsWaitingDesc = prometheus.NewDesc("videogen_jobs_waiting_seconds",
		"How long the queue's longest-due available job has waited for a worker, in seconds (0 when none waits): minutes mean no instance works the queue.", []string{"queue"}, nil)
	reconcileDiffDesc = prometheus.NewDesc("videogen_stripe_reconcile_differences",
		"Differences between Stripe and the credited top-ups the newest completed reconciliation left (any instance, or videogen stripe reconcile); 0 before the first; no series without Stripe (STRIPE_SECRET_KEY).", nil, nil)
	reconcileTimeDesc = prometheus.NewDesc("videogen_stripe_reconcile_timestamp_seconds",
		"When the newest completed Stripe reconciliation ran (Unix time); 0 when none ever ran; no series without Stripe.", nil, nil)
	upDesc = prometheus.NewDesc("videogen_metrics_database_up",
		"1 when this scrape read every database figure, 0 when the database failed or was too slow.", nil, nil)
)

func (p *platform) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tasksDesc, waitingDesc, queueAgeDesc, inFlightDesc, capacityDesc, enabledDesc,
		driftAccountsDesc, checkProblemsDesc, checkTimeDesc, overdueDesc, breakerOpenDesc, refusedDesc, jobsDesc,
		jobsWaitingDesc, reconcileDiffDesc, reconcileTimeDesc, upDesc} {
		ch <- d
	}
}

// Collect reads the figures. A read that fails leaves its series out of this scrape (a made-up zero
// would look like an empty queue) and sets videogen_metrics_database_up to 0.
func (p *platform) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	up := 1.0
	failed := func(what string, err error) {
		up = 0
		p.log.Warn("metrics: read "+what, "err", err)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if q, err := ops.ReadQueue(ctx, p.db); err != nil {
		failed("the task queue", err)
	} else {
		gauge(tasksDesc, float64(q.Queued()), tasks.Queued)
		gauge(tasksDesc, float64(q.InProgress), tasks.InProgress)
		gauge(waitingDesc, float64(q.Waiting))
		gauge(queueAgeDesc, q.OldestAge(p.now()).Seconds())
	}
	if creds, err := ops.Credentials(ctx, p.db); err != nil {
		failed("the upstream credentials", err)
	} else {
		for _, c := range creds {
			gauge(inFlightDesc, float64(c.InFlight), c.ID, c.Label)
			gauge(capacityDesc, float64(c.MaxConcurrency), c.ID, c.Label)
			enabled := 0.0
			if c.Enabled {
				enabled = 1
			}
			gauge(enabledDesc, enabled, c.ID, c.Label)
		}
	}
	// Before the first check the series read 0: nothing found, at time 0 — so "never checked" reads as
	// a check decades old, which VideogenLedgerCheckStale fires on, not as a missing series no rule sees.
	if last, err := ops.LastLedgerCheck(ctx, p.db); err != nil {
		failed("the last ledger check", err)
	} else {
		var accounts, problems, at float64
		if last != nil {
			if last.Accounts != "" {
				accounts = float64(strings.Count(last.Accounts, ",") + 1)
			}
			problems, at = float64(last.Problems), float64(last.At.UnixMilli())/1000
		}
		gauge(driftAccountsDesc, accounts)
		gauge(checkProblemsDesc, problems)
		gauge(checkTimeDesc, at)
	}
	now := p.now()
	if n, err := ops.OverdueTasks(ctx, p.db, now); err != nil {
		failed("the overdue tasks", err)
	} else {
		gauge(overdueDesc, float64(n))
	}
	if ups, err := ops.Upstreams(ctx, p.db, now); err != nil {
		failed("the upstream health", err)
	} else {
		for _, u := range ups {
			gauge(breakerOpenDesc, flag(u.Breaker == status.BreakerOpen), u.ID, u.Name)
			// Both reasons always, 1 for the one that applies: a mark that changes kind is a change of
			// value, not a series that vanishes.
			gauge(refusedDesc, flag(u.State == status.StateRefused), u.ID, u.Name, upstream.MarkKey)
			gauge(refusedDesc, flag(u.State == status.StateNoCredit), u.ID, u.Name, upstream.MarkCredit)
		}
	}
	if qs, err := ops.JobQueuesNow(ctx, p.db); err != nil {
		failed("the job queues", err)
	} else {
		// Every queue and state, zeros included: a rule on a series that appears only once a job failed
		// could not fire where none ever did.
		for _, q := range qs {
			for _, st := range ops.JobStates {
				gauge(jobsDesc, float64(q.States[st]), q.Name, st)
			}
			gauge(jobsWaitingDesc, q.Waiting(now).Seconds(), q.Name)
		}
	}
	// As for the ledger check, a reconciliation that never ran reads 0 at time 0. Without Stripe there is
	// nothing to reconcile, and no series.
	if p.stripe {
		if run, err := ops.LastReconcile(ctx, p.db); err != nil {
			failed("the last Stripe reconciliation", err)
		} else {
			var diffs, at float64
			if run != nil {
				diffs, at = float64(run.Differences), float64(run.At.UnixMilli())/1000
			}
			gauge(reconcileDiffDesc, diffs)
			gauge(reconcileTimeDesc, at)
		}
	}
	gauge(upDesc, up)
}

// flag is a condition as a gauge's value.
func flag(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
