package ratelimit

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestPerSecond(t *testing.T) {
	for _, tc := range []struct {
		rps    float64
		events int
		per    time.Duration
	}{
		{10, 10, time.Second},
		{0.5, 5, 10 * time.Second},
		{0.25, 25, 100 * time.Second},
		{1000000, 1000000, time.Second},
	} {
		if r := PerSecond(tc.rps, 7); r.Events != tc.events || r.Per != tc.per || r.Burst != 7 {
			t.Errorf("PerSecond(%v) = %+v, want %d per %v", tc.rps, r, tc.events, tc.per)
		}
	}
}

// TestLocalBucket: the burst passes, the next request waits about one refill, other keys are untouched.
func TestLocalBucket(t *testing.T) {
	l := NewLocal(Rate{Events: 5, Per: 15 * time.Minute, Burst: 5})
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		if ok, _, _ := l.Allow(ctx, "a@example.com"); !ok {
			t.Fatalf("attempt %d refused within the burst", i+1)
		}
	}
	ok, wait, _ := l.Allow(ctx, "a@example.com")
	if ok || wait < 2*time.Minute || wait > 3*time.Minute+time.Second {
		t.Fatalf("6th attempt: ok=%v wait %v, want refused for ~3 min", ok, wait)
	}
	if ok, _, _ := l.Allow(ctx, "b@example.com"); !ok {
		t.Fatal("another key was limited")
	}
}

// TestLocalBucketFollowsItsClock: a bucket refills by the clock it was given, not the wall's: held
// still, nothing comes back however long the test takes; moved on by one refill, one token does.
func TestLocalBucketFollowsItsClock(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := NewLocalClock(Rate{Events: 1, Per: time.Minute, Burst: 1}, func() time.Time { return now })
	ctx := context.Background()
	if ok, _, _ := l.Allow(ctx, "k"); !ok {
		t.Fatal("the first token was refused")
	}
	time.Sleep(20 * time.Millisecond) // real time passes; the bucket's clock does not
	if ok, wait, _ := l.Allow(ctx, "k"); ok || wait != time.Minute {
		t.Fatalf("with the clock held: ok=%v wait %v, want refused for exactly a minute", ok, wait)
	}
	now = now.Add(time.Minute)
	if ok, _, _ := l.Allow(ctx, "k"); !ok {
		t.Fatal("a minute later by its clock, no token came back")
	}
}

type broken struct{}

func (broken) Allow(context.Context, string) (bool, time.Duration, error) {
	return false, 0, errors.New("redis: connection refused")
}

// TestFallbackKeepsLimiting: while the shared limiter fails, the per-instance one still limits.
func TestFallbackKeepsLimiting(t *testing.T) {
	f := WithFallback(broken{}, NewLocal(Rate{Events: 1, Per: time.Hour, Burst: 2}), slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if ok, _, err := f.Allow(ctx, "k"); !ok || err != nil {
			t.Fatalf("attempt %d: %v %v", i+1, ok, err)
		}
	}
	if ok, wait, err := f.Allow(ctx, "k"); ok || err != nil || wait <= 0 {
		t.Fatalf("3rd attempt with Redis down: ok=%v wait=%v err=%v, want refused", ok, wait, err)
	}
}

// TestRedisLimiterFallsBackWhenRedisStops runs a real Redis, stops it, and shows limits still hold per
// instance, quickly, with one warning and one report of the change; when Redis returns on the same port,
// limits are shared again and that is reported too.
func TestRedisLimiterFallsBackWhenRedisStops(t *testing.T) {
	port := freePort(t)
	startRedis := func() *exec.Cmd {
		srv := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := srv.Start(); err != nil {
			t.Fatalf("redis-server (installed with the machine's Redis): %v", err)
		}
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
		defer c.Close()
		for i := 0; c.Ping(context.Background()).Err() != nil; i++ {
			if i > 100 {
				t.Fatal("redis-server did not answer")
			}
			time.Sleep(50 * time.Millisecond)
		}
		return srv
	}
	srv := startRedis()
	defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
	var logged bytes.Buffer
	var mu sync.Mutex
	var reports []bool
	store, err := Connect("redis://127.0.0.1:"+port+"/0", time.Now, Options{
		Log:      slog.New(slog.NewTextHandler(&syncWriter{w: &logged, mu: &mu}, nil)),
		OnShared: func(shared bool) { mu.Lock(); reports = append(reports, shared); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	l := store.Limiter("test:", Rate{Events: 1, Per: time.Hour, Burst: 2})
	other := store.Limiter("other:", Rate{Events: 1, Per: time.Hour, Burst: 100})
	ctx := context.Background()
	if ok, _, _ := l.Allow(ctx, "k"); !ok || !store.Shared() {
		t.Fatalf("first attempt refused, or not shared (%v)", store.Shared())
	}
	_ = srv.Process.Kill()
	_ = srv.Wait()
	start := time.Now()
	for i := 0; i < 2; i++ {
		l.Allow(ctx, "k")
		other.Allow(ctx, "k")
	}
	if ok, _, err := l.Allow(ctx, "k"); ok || err != nil {
		t.Fatalf("with Redis gone the limit vanished: ok=%v err=%v", ok, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("attempts took %v with Redis gone", d)
	}
	if store.Shared() {
		t.Fatal("Shared() is true with Redis gone")
	}
	srv = startRedis()
	deadline := time.Now().Add(10 * time.Second)
	for !store.Shared() {
		if time.Now().After(deadline) {
			t.Fatal("limits were not shared again within 10 s of Redis' return")
		}
		other.Allow(ctx, "k")
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []bool{true, false, true}; !slices.Equal(reports, want) {
		t.Fatalf("reports of sharing = %v, want %v (one per change, both limiters together)", reports, want)
	}
	if n := strings.Count(logged.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for one outage, want 1:\n%s", n, logged.String())
	}
	if !strings.Contains(logged.String(), "shared rate limits restored") {
		t.Fatalf("the return of Redis was not logged:\n%s", logged.String())
	}
}

type syncWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestLocalForgetsFullBuckets: the in-process buckets hold the keys used within a refill period, not
// every key ever seen: a bucket full again is the same as a new one, and each Allow forgets the least
// recently used ones that are — so a scan from many addresses leaves no memory behind once it stops,
// while a key still in debt keeps its bucket however many others come after it.
func TestLocalForgetsFullBuckets(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewLocalClock(Rate{Events: 10, Per: time.Minute, Burst: 5}, func() time.Time { return now })
	ctx := context.Background()
	allowed := func(key string) bool { ok, _, _ := l.Allow(ctx, key); return ok }
	for range 5 {
		allowed("busy")
	}
	if allowed("busy") {
		t.Fatal("the sixth request of a burst of five was allowed")
	}
	for i := range 1000 {
		if !allowed("scanner-" + strconv.Itoa(i)) {
			t.Fatalf("first request of key %d refused", i)
		}
	}
	if n := l.buckets.Len(); n != 1001 {
		t.Fatalf("%d buckets within the refill period, want 1001", n)
	}
	if allowed("busy") {
		t.Fatal("a key in debt was forgiven: its bucket was forgotten behind a thousand others")
	}
	now = now.Add(time.Minute) // every bucket is full again
	for i := range 600 {
		allowed("later-" + strconv.Itoa(i))
	}
	if n := l.buckets.Len(); n != 600 {
		t.Fatalf("%d buckets once the earlier keys were full again, want the 600 new ones", n)
	}
}
