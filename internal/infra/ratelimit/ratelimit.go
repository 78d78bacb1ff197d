// Package ratelimit limits how fast each API key may call: a token bucket per key, kept in process or,
// when several instances serve one customer base, in Redis (GCRA, the same bucket seen by all).
package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

	"videogen/internal/infra/lrucache"
)

// Limiter decides whether a key may make one more request now.
type Limiter interface {
	// Allow takes one token for key; when none is left it returns false and how long until one is.
	Allow(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
}

// Rate is a token bucket: Events tokens refill every Per, at most Burst stored.
type Rate struct {
	Events int
	Per    time.Duration
	Burst  int
}

// PerSecond is a rate of rps requests a second (fractions allowed) with a burst.
func PerSecond(rps float64, burst int) Rate {
	// Express the rate as whole events per period (Redis' GCRA counts whole events).
	per, events := time.Second, rps
	for events != float64(int(events)) && per < time.Hour {
		per *= 10
		events *= 10
	}
	return Rate{Events: max(int(events), 1), Per: per, Burst: burst}
}

// Local keeps one token bucket per key in this process.
type Local struct {
	rps     rate.Limit
	burst   int
	now     func() time.Time
	mu      sync.Mutex // makes get-or-create of a bucket atomic
	buckets *lru.Cache[string, *rate.Limiter]
}

// NewLocal returns an in-process limiter on real time.
func NewLocal(r Rate) *Local { return NewLocalClock(r, time.Now) }

// NewLocalClock returns an in-process limiter whose buckets refill by the clock now: the service's
// clock, which a test holds still when it must count tokens exactly.
func NewLocalClock(r Rate, now func() time.Time) *Local {
	// A bucket full again is the same as a new one, so Allow forgets full ones as it goes
	// (lrucache.DropStale); 200,000 keys in use at once bound the memory.
	buckets, _ := lru.New[string, *rate.Limiter](200_000)
	return &Local{rps: rate.Limit(float64(r.Events) / r.Per.Seconds()), burst: r.Burst, now: now, buckets: buckets}
}

// Allow implements Limiter.
func (l *Local) Allow(_ context.Context, key string) (bool, time.Duration, error) {
	now := l.now()
	l.mu.Lock()
	b, ok := l.buckets.Get(key)
	if !ok {
		b = rate.NewLimiter(l.rps, l.burst)
		l.buckets.Add(key, b)
	}
	lrucache.DropStale(l.buckets, func(old *rate.Limiter) bool { return old != b && old.TokensAt(now) >= float64(l.burst) })
	l.mu.Unlock()
	r := b.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d, nil
	}
	return true, 0, nil
}

// Redis keeps the buckets in Redis, shared by every instance.
type Redis struct {
	limiter *redis_rate.Limiter
	limit   redis_rate.Limit
	prefix  string
}

// Store is where limits live: in this process, or in Redis when several instances must share them. One
// Store holds one Redis connection pool for every limiter made from it, and one view of whether Redis
// answers: all its limiters fall back together, and the change is logged once.
type Store struct {
	client  *redis.Client
	limiter *redis_rate.Limiter
	now     func() time.Time // the in-process buckets' clock (Redis keeps its own)
	redis   *redisState      // nil without Redis
}

// Options are what a Store tells of Redis' outages.
type Options struct {
	Log *slog.Logger // hears when limits stop and start being shared
	// OnShared hears, once at the start and at each change, whether limits are shared through Redis now
	// (the metric videogen_ratelimit_shared); nil: nobody listens.
	OnShared func(shared bool)
}

// retryRedis is how long limiters stay per instance after Redis failed before one request asks Redis
// again: during an outage requests do not each wait for a connection attempt.
const retryRedis = 2 * time.Second

// Connect returns the store of redisURL, or an in-process store when redisURL is empty. now is the clock
// of in-process buckets. A Redis that does not answer at the start is not an error — limits are per
// instance until it does — but a malformed URL is.
func Connect(redisURL string, now func() time.Time, o Options) (*Store, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if redisURL == "" {
		return &Store{now: now}, nil
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	// A limiter answers on every request: better a quick failure (and the in-process fallback) than a
	// request held up by retries to an unreachable Redis.
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout, opt.MaxRetries = time.Second, 300*time.Millisecond, 300*time.Millisecond, 1
	client := redis.NewClient(opt)
	st := &redisState{log: o.Log, onShared: o.OnShared}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err != nil {
		st.failed(fmt.Errorf("connect to redis: %w", err))
	} else {
		st.report(true)
	}
	return &Store{client: client, limiter: redis_rate.NewLimiter(client), now: now, redis: st}, nil
}

// Limiter returns a limiter of rate r whose keys start with prefix. In Redis it falls back to an
// in-process bucket while Redis is unreachable.
func (s *Store) Limiter(prefix string, r Rate) Limiter {
	if s.client == nil {
		return NewLocalClock(r, s.now)
	}
	shared := &Redis{limiter: s.limiter, limit: redis_rate.Limit{Rate: r.Events, Burst: r.Burst, Period: r.Per}, prefix: prefix}
	return &Fallback{primary: shared, secondary: NewLocalClock(r, s.now), state: s.redis}
}

// Shared reports whether limits are shared through Redis now (false without Redis).
func (s *Store) Shared() bool { return s.redis != nil && !s.redis.down.Load() }

// Close releases the Redis connections.
func (s *Store) Close() error {
	if s.client == nil {
		return nil
	}
	return s.client.Close()
}

// redisState is whether Redis answers, shared by a Store's limiters.
type redisState struct {
	log      *slog.Logger
	onShared func(bool)
	mu       sync.Mutex // orders the reports of changes
	down     atomic.Bool
	retryAt  atomic.Int64 // Unix nanoseconds: until then, limiters do not ask Redis
}

func (st *redisState) report(shared bool) {
	if st.onShared != nil {
		st.onShared(shared)
	}
}

// failed notes that Redis did not answer; the first failure after it answered is logged and reported.
func (st *redisState) failed(err error) {
	st.retryAt.Store(time.Now().Add(retryRedis).UnixNano())
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.down.Swap(true) {
		return
	}
	st.log.Warn("shared rate limits unavailable: Redis does not answer; each instance limits on its own until it does", "err", err)
	st.report(false)
}

// answered notes that Redis answered; the first answer after an outage is logged and reported.
func (st *redisState) answered() {
	if !st.down.Load() {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.down.Swap(false) {
		return
	}
	st.log.Info("shared rate limits restored: Redis answers again")
	st.report(true)
}

// skip reports whether Redis failed too recently to be asked again.
func (st *redisState) skip() bool {
	return st.down.Load() && time.Now().UnixNano() < st.retryAt.Load()
}

// Fallback asks its primary limiter (Redis) and, while that fails, the secondary (this process): limits
// keep holding per instance instead of vanishing.
type Fallback struct {
	primary, secondary Limiter
	state              *redisState
}

// WithFallback returns a limiter that uses secondary while primary fails; log hears of the outage.
func WithFallback(primary, secondary Limiter, log *slog.Logger) *Fallback {
	return &Fallback{primary: primary, secondary: secondary, state: &redisState{log: log}}
}

// Allow implements Limiter.
func (f *Fallback) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	if f.state.skip() {
		return f.secondary.Allow(ctx, key)
	}
	ok, wait, err := f.primary.Allow(ctx, key)
	if err == nil {
		f.state.answered()
		return ok, wait, nil
	}
	if ctx.Err() != nil {
		// The request itself ended (its client went away): no news of Redis.
		return false, 0, ctx.Err()
	}
	f.state.failed(err)
	return f.secondary.Allow(ctx, key)
}

// Allow implements Limiter.
func (r *Redis) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	res, err := r.limiter.Allow(ctx, r.prefix+key, r.limit)
	if err != nil {
		return false, 0, fmt.Errorf("rate limit in redis: %w", err)
	}
	if res.Allowed == 0 {
		return false, res.RetryAfter, nil
	}
	return true, 0, nil
}
