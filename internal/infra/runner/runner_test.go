package runner

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestGroupStopsInReverseOrder: parts start in order and stop in reverse, each only after every part
// added after it has returned; a part that will not stop is reported when the time is up, and the parts
// before it still stop.
func TestGroupStopsInReverseOrder(t *testing.T) {
	var mu sync.Mutex
	var events []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, s)
	}
	started := make(chan string, 3)
	part := func(name string) Runner {
		return Func(func(ctx context.Context) error {
			started <- name
			<-ctx.Done()
			note("stopping " + name)
			time.Sleep(10 * time.Millisecond) // winding down takes a moment: the next must wait for it
			note("stopped " + name)
			return nil
		})
	}
	g := NewGroup(slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.Add("a", part("a"))
	g.Add("b", part("b"))
	g.Add("c", part("c"))
	g.Start()
	for range 3 {
		<-started
	}
	if err := g.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"stopping c", "stopped c", "stopping b", "stopped b", "stopping a", "stopped a"}
	if len(events) != len(want) {
		t.Fatalf("events %v, want %v", events, want)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Fatalf("events %v, want %v", events, want)
		}
	}

	// A part that does not stop: Stop says so once ctx ends, and still stops the ones before it.
	stuck, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	g = NewGroup(slog.New(slog.NewTextHandler(io.Discard, nil)))
	aStopped := make(chan struct{})
	g.Add("a", Func(func(ctx context.Context) error { <-ctx.Done(); close(aStopped); return nil }))
	g.Add("stuck", Func(func(ctx context.Context) error { close(stuck); <-release; return nil }))
	g.Start()
	<-stuck
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Stop(ctx); err == nil || !strings.Contains(err.Error(), "stuck did not stop in time") {
		t.Fatalf("Stop with a stuck part: %v", err)
	}
	select {
	case <-aStopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the part before the stuck one was not stopped")
	}
}

// TestEvery: the job runs at start when asked, at once on a wake, and not after the context ends.
func TestEvery(t *testing.T) {
	runs := make(chan struct{}, 10)
	wake := make(chan struct{}, 1)
	e := Every{Interval: time.Hour, AtStart: true, Wake: wake, Job: func(context.Context) { runs <- struct{}{} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	<-runs // at start, without waiting an hour
	wake <- struct{}{}
	<-runs // woken
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(runs) != 0 {
		t.Fatal("the job ran after the context ended")
	}
	if err := (Every{Job: func(context.Context) {}}).Run(context.Background()); err == nil {
		t.Fatal("an Every without an interval ran")
	}
}

// TestHTTPServer: the server answers until its context ends, and is shut down then.
func TestHTTPServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- HTTPServer(srv, ln, time.Second).Run(ctx) }()
	res, err := http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String()); err == nil {
		t.Fatal("the server still answers after its context ended")
	}
}
