package mail

import (
	"context"
	"maps"
	"sync"
)

// Recorder keeps every message in memory, for tests that read the link a user would click.
type Recorder struct {
	mu   sync.Mutex
	msgs []Message
	// arrived is closed and replaced on every Send, waking all WaitFor calls at once.
	arrived chan struct{}
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{arrived: make(chan struct{})}
}

// Send records m. Like Resend, it delivers nothing when ctx is already done.
func (r *Recorder) Send(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, detach(m))
	close(r.arrived)
	r.arrived = make(chan struct{})
	return nil
}

// Messages returns every recorded message, oldest first.
func (r *Recorder) Messages() []Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Message, len(r.msgs))
	for i, m := range r.msgs {
		out[i] = detach(m)
	}
	return out
}

// Last returns the newest message to the address to (matched exactly).
func (r *Recorder) Last(to string) (Message, bool) {
	m, ok, _ := r.last(to)
	return m, ok
}

// WaitFor returns the newest message to to, waiting until one arrives if none has yet (mail is often
// sent from a background job). It returns ctx's error when ctx ends first.
func (r *Recorder) WaitFor(ctx context.Context, to string) (Message, error) {
	for {
		m, ok, arrived := r.last(to)
		if ok {
			return m, nil
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return Message{}, ctx.Err()
		}
	}
}

// last also returns the channel to wait on, taken under the same lock so no Send slips in between.
func (r *Recorder) last(to string) (Message, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.msgs) - 1; i >= 0; i-- {
		if r.msgs[i].To == to {
			return detach(r.msgs[i]), true, r.arrived
		}
	}
	return Message{}, false, r.arrived
}

// detach copies the tags map, the one part of a Message shared by reference, so neither the sender nor a
// test reading the records can change what another goroutine sees.
func detach(m Message) Message {
	m.Tags = maps.Clone(m.Tags)
	return m
}
