package mail

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Queue sends messages in the background, so a request never waits for the mail provider: the answer
// takes the same time whether or not an e-mail went out (which would otherwise tell who has an account),
// and a slow or failing provider does not fail the page. A send is retried a few times. Close sends
// what is queued; a crash loses it, and the user asks for another link.
type Queue struct {
	next Sender
	log  *slog.Logger
	ch   chan Message

	mu     sync.RWMutex
	closed bool
	done   chan struct{}
}

// NewQueue starts a queue in front of next.
func NewQueue(next Sender, log *slog.Logger) *Queue {
	q := &Queue{next: next, log: log, ch: make(chan Message, 1000), done: make(chan struct{})}
	go q.loop()
	return q
}

// Send queues m. When the queue is full (a flood), it says so instead of blocking the request.
func (q *Queue) Send(_ context.Context, m Message) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.log.Warn("mail queue closed; e-mail not sent", "to", m.To, "subject", m.Subject)
		return nil
	}
	select {
	case q.ch <- m:
	default:
		q.log.Error("mail queue full; e-mail dropped", "to", m.To, "subject", m.Subject)
	}
	return nil
}

func (q *Queue) loop() {
	defer close(q.done)
	for m := range q.ch {
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			err = q.next.Send(ctx, m)
			cancel()
			if err == nil {
				break
			}
			time.Sleep(time.Duration(attempt+1) * time.Second)
		}
		if err != nil {
			q.log.Error("e-mail not sent", "to", m.To, "subject", m.Subject, "err", err)
		}
	}
}

// Close sends every queued message, then stops.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.ch)
	}
	q.mu.Unlock()
	select {
	case <-q.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
