// Package metrics exports the platform's figures for Prometheus (docs/support.md): every HTTP request by
// route and status, counted by the handlers' middleware; the figures of the staff overview — the task
// queue, the upstream credentials' load, the ledger self-check's last result — read from the database
// when Prometheus scrapes, through the same functions as the overview (internal/staff/ops); and the drift this
// instance's self-checks found. It is served on METRICS_ADDR, a listener of its own, never on the public
// port.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"videogen/internal/domain/tasks"
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
	driftFound prometheus.Counter
	// The faults of the dependencies this instance met: storage calls that failed, requests refused
	// because the database was unreachable, and whether rate limits are shared (Redis) or per instance.
	storageErrors   *prometheus.CounterVec
	dbUnavailable   prometheus.Counter
	limitsShared    prometheus.Gauge
	limitsFallbacks prometheus.Counter
	limitsOnce      sync.Once // the two above are registered at the first report: only with REDIS_URL set
}

// New returns the metrics of an instance whose database is d; now is its clock.
func New(d *db.DB, log *slog.Logger, now func() time.Time) *Metrics {
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
		driftFound: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "videogen_ledger_drift_found_total",
			Help: "Ledger self-checks run by this instance that found drift (each is logged as an error).",
		}),
		storageErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "videogen_storage_errors_total",
			Help: "Calls to the file storage (local folder or S3) that failed, by operation (put, get, stat, delete, list).",
		}, []string{"op"}),
		dbUnavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "videogen_database_unavailable_total",
			Help: "Requests answered 503 service_unavailable because the database could not be reached.",
		}),
		limitsShared: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "videogen_ratelimit_shared",
			Help: "1 while rate limits are shared through Redis, 0 while this instance limits on its own (Redis unset or unreachable).",
		}),
		limitsFallbacks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "videogen_ratelimit_fallbacks_total",
			Help: "Times this instance lost Redis and fell back to limiting on its own.",
		}),
	}
	m.reg.MustRegister(m.storageErrors, m.dbUnavailable)
	m.reg.MustRegister(m.requests, m.latency, m.driftFound,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&platform{db: d, log: log, now: now})
	return m
}

// Handler answers GET /metrics in Prometheus' text or protobuf format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Timeout: ScrapeTimeout + 5*time.Second})
}

// ObserveRequest counts one answered request. route is the pattern it matched ("/v1/videos/:id"), so
// the series are as many as the routes, whatever paths clients send.
func (m *Metrics) ObserveRequest(method, route string, status int, elapsed time.Duration) {
	if m == nil {
		return
	}
	labels := []string{method, route, statusText(status)}
	m.requests.WithLabelValues(labels...).Inc()
	m.latency.WithLabelValues(labels...).Observe(elapsed.Seconds())
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
// as a fallback.
func (m *Metrics) RateLimitShared(shared bool) {
	if m == nil {
		return
	}
	// Exported only where Redis is configured, so that an instance meant to limit on its own (SQLite,
	// one replica, no REDIS_URL) does not read as one that lost Redis.
	m.limitsOnce.Do(func() { m.reg.MustRegister(m.limitsShared, m.limitsFallbacks) })
	if shared {
		m.limitsShared.Set(1)
		return
	}
	m.limitsShared.Set(0)
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
	db  *db.DB
	log *slog.Logger
	now func() time.Time
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
		"Accounts whose ledger drifted, as the newest ledger self-check found (any instance, or videogen ledger check).", nil, nil)
	checkProblemsDesc = prometheus.NewDesc("videogen_ledger_check_problems",
		"Problems the newest ledger self-check found.", nil, nil)
	checkTimeDesc = prometheus.NewDesc("videogen_ledger_check_timestamp_seconds",
		"When the newest ledger self-check ran (Unix time): alert when it is too old.", nil, nil)
	upDesc = prometheus.NewDesc("videogen_metrics_database_up",
		"1 when this scrape read every database figure, 0 when the database failed or was too slow.", nil, nil)
)

func (p *platform) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{tasksDesc, waitingDesc, queueAgeDesc, inFlightDesc, capacityDesc, enabledDesc,
		driftAccountsDesc, checkProblemsDesc, checkTimeDesc, upDesc} {
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
	// No series before the first check: "never checked" must not read as "no drift".
	if last, err := ops.LastLedgerCheck(ctx, p.db); err != nil {
		failed("the last ledger check", err)
	} else if last != nil {
		accounts := 0
		if last.Accounts != "" {
			accounts = strings.Count(last.Accounts, ",") + 1
		}
		gauge(driftAccountsDesc, float64(accounts))
		gauge(checkProblemsDesc, float64(last.Problems))
		gauge(checkTimeDesc, float64(last.At.UnixMilli())/1000)
	}
	gauge(upDesc, up)
}
