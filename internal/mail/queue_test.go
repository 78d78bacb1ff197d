package mail

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

type slowFlaky struct {
	mu    sync.Mutex
	calls int
	got   []Message
}

func (s *slowFlaky) Send(ctx context.Context, m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls == 1 {
		return errors.New("provider hiccup")
	}
	s.got = append(s.got, m)
	return nil
}

// TestQueueAnswersAtOnceRetriesAndDrains: Send returns at once, a failed send is retried, Close delivers
// everything queued.
func TestQueueAnswersAtOnceRetriesAndDrains(t *testing.T) {
	next := &slowFlaky{}
	q := NewQueue(next, slog.New(slog.NewTextHandler(io.Discard, nil)))
	start := time.Now()
	for i := 0; i < 3; i++ {
		if err := q.Send(context.Background(), Message{To: "a@example.com", Subject: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	if time.Since(start) > 50*time.Millisecond {
		t.Fatal("Send waited for the provider")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Close(ctx); err != nil {
		t.Fatal(err)
	}
	next.mu.Lock()
	defer next.mu.Unlock()
	if len(next.got) != 3 || next.calls != 4 {
		t.Fatalf("delivered %d in %d calls, want 3 in 4 (one retry)", len(next.got), next.calls)
	}
	_ = q.Send(context.Background(), Message{To: "late@example.com"}) // after Close: logged, no panic
}
