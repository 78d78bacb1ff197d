// Package runner runs the service's long-lived parts — the worker, the job queues, the upstream watch,
// small HTTP servers — as one group: started in order, stopped in reverse order, each
// given the time it needs to finish what it holds. It also has the periodic loop of the parts that run
// on every instance (the periodic chores are River's, docs/jobs.md).
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"time"
)

// Runner is a long-lived part. Run works until ctx ends, then finishes what it holds and returns; an
// error it returns is logged by the group and ends only that part.
type Runner interface {
	Run(ctx context.Context) error
}

// Func is a Runner made of a function.
type Func func(ctx context.Context) error

// Run implements Runner.
func (f Func) Run(ctx context.Context) error { return f(ctx) }

// Group starts its parts in the order they were added and stops them in reverse: a part stops only once
// every part added after it — every part that may use it — has stopped.
type Group struct {
	log     *slog.Logger
	parts   []*part
	started bool
}

type part struct {
	name   string
	r      Runner
	cancel context.CancelFunc
	done   chan struct{}
}

// NewGroup returns an empty group that logs its parts' failures to log.
func NewGroup(log *slog.Logger) *Group { return &Group{log: log} }

// Add appends a part; it starts with the group.
func (g *Group) Add(name string, r Runner) {
	if g.started {
		panic("runner: Add after Start") // a part added late would start in no order at all
	}
	g.parts = append(g.parts, &part{name: name, r: r})
}

// Start runs every part, each on its own goroutine with its own context, in order.
func (g *Group) Start() {
	g.started = true
	for _, p := range g.parts {
		ctx, cancel := context.WithCancel(context.Background())
		p.cancel, p.done = cancel, make(chan struct{})
		go func() {
			defer close(p.done)
			if err := p.r.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				g.log.Error("background part stopped", "part", p.name, "err", err)
			}
		}()
	}
}

// Stop ends the parts in reverse order, waiting for each to return before ending the one before it,
// until ctx ends; past that it still ends the rest, without waiting. It reports the parts not seen to
// stop in time (they are left to the process's exit).
func (g *Group) Stop(ctx context.Context) error {
	var late []error
	for i := len(g.parts) - 1; i >= 0; i-- {
		p := g.parts[i]
		if p.cancel == nil {
			continue // never started
		}
		p.cancel()
		select {
		case <-p.done:
		case <-ctx.Done():
			late = append(late, fmt.Errorf("%s did not stop in time", p.name))
		}
	}
	return errors.Join(late...)
}

// Every runs Job every Interval until ctx ends: first at once when AtStart, and at once whenever Wake
// fires. With Jitter the wait is between half and one and a half Interval, at random, so that instances
// started together drift apart and a job's timing does not follow the request that queued its work. Job
// is given ctx: a job of many steps checks it between them, and a step that must not be cut off (a
// message half sent) detaches its own context with a bound.
type Every struct {
	Interval time.Duration
	AtStart  bool
	Jitter   bool
	Wake     <-chan struct{}
	Job      func(ctx context.Context)
}

// Run implements Runner.
func (e Every) Run(ctx context.Context) error {
	if e.Interval <= 0 {
		return fmt.Errorf("runner.Every needs a positive interval, not %s", e.Interval)
	}
	if e.AtStart {
		e.Job(ctx)
	}
	for {
		wait := e.Interval
		if e.Jitter {
			wait = e.Interval/2 + rand.N(e.Interval)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-e.Wake: // a nil channel never fires
			t.Stop()
		case <-t.C:
		}
		if ctx.Err() != nil {
			return nil
		}
		e.Job(ctx)
	}
}

// HTTPServer serves srv on ln until ctx ends, then shuts it down, giving requests in flight at most
// grace to finish.
func HTTPServer(srv *http.Server, ln net.Listener, grace time.Duration) Runner {
	return Func(func(ctx context.Context) error {
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		select {
		case err := <-served:
			return err
		case <-ctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		<-served
		return nil
	})
}
