// Package wallclock plants the uses of the wall clock TestOneClock exists to stop, each marked `// want`:
// time read or waited on in domain code without the injected clock.
package wallclock

import (
	"context"
	clk "time"
)

type Sweeper struct{ Now func() clk.Time }

func (s *Sweeper) Sweep(ctx context.Context) clk.Duration {
	cutoff := clk.Now().Add(-clk.Hour) // want
	_ = s.Now().Add(-clk.Hour)         // the injected clock: fine
	t := clk.NewTicker(clk.Second)     // want
	defer t.Stop()
	timer := clk.NewTimer(clk.Second) // want
	defer timer.Stop()
	select {
	case <-clk.After(clk.Second): // want
	case <-clk.Tick(clk.Second): // want
	case <-ctx.Done():
	}
	stop := clk.AfterFunc(clk.Second, func() {}) // want
	defer stop.Stop()
	_ = clk.Until(cutoff)    // want
	return clk.Since(cutoff) // want
}

var since = clk.Since // want

func Parse(s string) (clk.Duration, error) { return clk.ParseDuration(s) }
