// Package mail sends the service's e-mails: through Resend when configured, printed to the log otherwise.
package mail

import "context"

// Message is one e-mail.
type Message struct {
	To      string
	Subject string
	Text    string // plain-text body (always set)
	HTML    string // HTML body (may be empty)
	// IdempotencyKey makes a retried send deliver once (Resend's Idempotency-Key header); e.g. "verify/<token-id>".
	IdempotencyKey string
	// Tags are optional name/value pairs for the provider (e.g. {"kind": "verify"}).
	Tags map[string]string
}

// Sender delivers messages. Implementations: Resend (production), Log (development), Recorder (tests).
type Sender interface {
	Send(ctx context.Context, m Message) error
}

var (
	_ Sender = (*Resend)(nil)
	_ Sender = (*Log)(nil)
	_ Sender = (*Recorder)(nil)
)
