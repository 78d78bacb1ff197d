package mail

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func send(t *testing.T, s Sender, to, subject string) {
	t.Helper()
	if err := s.Send(context.Background(), Message{To: to, Subject: subject, Text: subject}); err != nil {
		t.Fatalf("Send: %v", err)
	}
}

func TestRecorderMessagesAndLast(t *testing.T) {
	r := NewRecorder()
	if _, ok := r.Last("ada@example.com"); ok {
		t.Fatal("Last on an empty recorder found a message")
	}
	send(t, r, "ada@example.com", "first")
	send(t, r, "bob@example.com", "second")
	send(t, r, "ada@example.com", "third")

	msgs := r.Messages()
	var subjects []string
	for _, m := range msgs {
		subjects = append(subjects, m.Subject)
	}
	if len(subjects) != 3 || subjects[0] != "first" || subjects[1] != "second" || subjects[2] != "third" {
		t.Fatalf("Messages subjects = %v, want [first second third]", subjects)
	}
	if m, ok := r.Last("ada@example.com"); !ok || m.Subject != "third" {
		t.Errorf("Last(ada) = %+v, %v; want third", m, ok)
	}
	if m, ok := r.Last("bob@example.com"); !ok || m.Subject != "second" {
		t.Errorf("Last(bob) = %+v, %v; want second", m, ok)
	}
	if _, ok := r.Last("eve@example.com"); ok {
		t.Error("Last(eve) found a message never sent to her")
	}
}

func TestRecorderIsolatesRecords(t *testing.T) {
	r := NewRecorder()
	tags := map[string]string{"kind": "verify"}
	if err := r.Send(context.Background(), Message{To: "ada@example.com", Tags: tags}); err != nil {
		t.Fatalf("Send: %v", err)
	}
	tags["kind"] = "changed by sender"
	r.Messages()[0].Tags["kind"] = "changed by reader"
	if m, _ := r.Last("ada@example.com"); m.Tags["kind"] != "verify" {
		t.Errorf("recorded tag = %q, want verify", m.Tags["kind"])
	}
}

func TestRecorderWaitForReturnsAlreadyArrived(t *testing.T) {
	r := NewRecorder()
	send(t, r, "ada@example.com", "hello")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	m, err := r.WaitFor(ctx, "ada@example.com")
	if err != nil || m.Subject != "hello" {
		t.Fatalf("WaitFor = %+v, %v; want hello", m, err)
	}
}

func TestRecorderWaitForUnblocksOnArrival(t *testing.T) {
	r := NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	type result struct {
		m   Message
		err error
	}
	got := make(chan result, 1)
	go func() {
		m, err := r.WaitFor(ctx, "ada@example.com")
		got <- result{m, err}
	}()

	// Mail to someone else must not wake the waiter with the wrong message.
	send(t, r, "bob@example.com", "not for ada")
	select {
	case res := <-got:
		t.Fatalf("WaitFor returned %+v, %v before ada had mail", res.m, res.err)
	case <-time.After(50 * time.Millisecond):
	}

	send(t, r, "ada@example.com", "for ada")
	select {
	case res := <-got:
		if res.err != nil || res.m.Subject != "for ada" {
			t.Fatalf("WaitFor = %+v, %v; want for ada", res.m, res.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WaitFor did not return after ada's mail arrived")
	}
}

func TestRecorderWaitForTimesOut(t *testing.T) {
	r := NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := r.WaitFor(ctx, "ada@example.com"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFor = %v, want context.DeadlineExceeded", err)
	}
}

func TestRecorderConcurrentUse(t *testing.T) {
	r := NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if i%2 == 0 {
				send(t, r, "ada@example.com", "x")
				return
			}
			if _, err := r.WaitFor(ctx, "ada@example.com"); err != nil {
				t.Errorf("WaitFor: %v", err)
			}
			r.Messages()
		})
	}
	wg.Wait()
	if n := len(r.Messages()); n != 10 {
		t.Errorf("recorded %d messages, want 10", n)
	}
}

func TestRecorderSendHonoursCancelledContext(t *testing.T) {
	r := NewRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Send(ctx, Message{To: "ada@example.com"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send = %v, want context.Canceled", err)
	}
	if n := len(r.Messages()); n != 0 {
		t.Errorf("recorded %d messages after a cancelled send, want 0", n)
	}
}
