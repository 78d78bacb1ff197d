package payments

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// brokenEvents is an event store that fails the way the real one must not.
type brokenEvents struct {
	record  func() (*Received, error)
	process func() (string, error)
}

func (b brokenEvents) Record(context.Context, []byte, string) (*Received, error) { return b.record() }
func (b brokenEvents) Process(context.Context, string) (string, error)           { return b.process() }

// TestReceiveRecoversPanics: a delivery's work runs on its own goroutine, outside any caller's recover,
// where a panic would end the whole process. A panic while recording or processing is logged and
// returned as ErrPanicked (the webhook answers 500 and Stripe sends the event again); a processing
// failure leaves the event pending; work past the budget is left to the event's job.
func TestReceiveRecoversPanics(t *testing.T) {
	recorded := func() (*Received, error) {
		return &Received{EventID: "evt_1", Type: "charge.refunded", Outcome: "pending"}, nil
	}
	for _, tc := range []struct {
		name    string
		events  brokenEvents
		err     error
		outcome string
	}{
		{"record panics", brokenEvents{record: func() (*Received, error) { panic("record broke") }}, ErrPanicked, ""},
		{"record fails", brokenEvents{record: func() (*Received, error) { return nil, errors.New("database gone") }}, ErrNotRecorded, ""},
		{"record refuses the signature", brokenEvents{record: func() (*Received, error) { return nil, ErrBadSignature }}, ErrBadSignature, ""},
		{"process panics", brokenEvents{record: recorded, process: func() (string, error) { panic("process broke") }}, ErrPanicked, ""},
		{"process recovered its panic", brokenEvents{record: recorded, process: func() (string, error) {
			return "", fmt.Errorf("%w: effect broke", ErrPanicked)
		}}, ErrPanicked, ""},
		{"process failed", brokenEvents{record: recorded, process: func() (string, error) { return "", errors.New("database gone") }}, nil, "pending"},
		{"process outlives the budget", brokenEvents{record: recorded, process: func() (string, error) {
			time.Sleep(time.Second) // a database that does not give up on time
			return "credited", nil
		}}, nil, "pending"},
		{"processed", brokenEvents{record: recorded, process: func() (string, error) { return "credited", nil }}, nil, "credited"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := &Service{log: slog.New(slog.NewTextHandler(&logs, nil))}
			for i := 0; i < 2; i++ { // the second delivery shows the process still going
				got, err := receive(context.Background(), s, tc.events, []byte(`{"id":"evt_1"}`), "t=1,v1=x", 200*time.Millisecond)
				if tc.err != nil && !errors.Is(err, tc.err) || tc.err == nil && err != nil {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
				if tc.outcome != "" && (got == nil || got.Outcome != tc.outcome) {
					t.Fatalf("outcome %+v, want %s", got, tc.outcome)
				}
			}
			if errors.Is(tc.err, ErrPanicked) && !strings.Contains(logs.String(), "panic") {
				t.Errorf("the panic is not logged:\n%s", logs.String())
			}
		})
	}
}
