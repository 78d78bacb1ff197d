package tasks

import "sync"

// group writes the transitions of one kind that arrive while earlier ones are being written as the next
// batch, in one transaction: a database's group commit, run by the callers themselves. A caller that
// finds a writer's place free writes a batch of everything pending (up to max); callers arriving
// meanwhile wait, and when a batch is written one of them writes the next, with everything that arrived
// in between. Each caller returns once its own transition is written (committed, or failed), as it would
// alone: a transition is never reported before its commit. It has no goroutine of its own.
//
// Under load this turns one commit per task — with its write-ahead-log flush, and the credential's row
// locked until it — into one per batch (docs/performance.md, "The worker, measured apart from the
// bytes"); alone, a caller writes a batch of one at once, without waiting.
type group[T any] struct {
	max     int              // items in one batch
	writers int              // batches written at once
	write   func(batch []*T) // writes the batch and records each item's outcome in it

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a batch is written
	pending []*groupItem[T]
	busy    int // batches being written now
}

type groupItem[T any] struct {
	v    *T
	done bool // written
}

func newGroup[T any](max, writers int, write func(batch []*T)) *group[T] {
	g := &group[T]{max: max, writers: writers, write: write}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// do writes v, alone or in a batch, and returns once it is written.
func (g *group[T]) do(v *T) {
	it := &groupItem[T]{v: v}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pending = append(g.pending, it)
	for !it.done {
		if g.busy >= g.writers || len(g.pending) == 0 {
			g.cond.Wait()
			continue
		}
		n := min(len(g.pending), g.max)
		batch := make([]*groupItem[T], n)
		copy(batch, g.pending)
		g.pending = append(g.pending[:0], g.pending[n:]...)
		g.busy++
		g.mu.Unlock()

		vs := make([]*T, n)
		for i, b := range batch {
			vs[i] = b.v
		}
		g.write(vs)

		g.mu.Lock()
		g.busy--
		for _, b := range batch {
			b.done = true
		}
		g.cond.Broadcast()
	}
}
