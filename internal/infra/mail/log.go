package mail

import (
	"context"
	"log/slog"
)

// Log prints each message instead of sending it, so a developer without a Resend key can still follow
// the links in verification and reset e-mails. Production refuses it (see config), because the text
// carries one-time tokens that must not reach a shared log.
type Log struct {
	log *slog.Logger
}

// NewLog returns a sender printing to log.
func NewLog(log *slog.Logger) *Log {
	return &Log{log: log}
}

// Send prints m as one info record, so the link stays next to its recipient and subject.
func (l *Log) Send(ctx context.Context, m Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.log.InfoContext(ctx, "e-mail not sent, printed (RESEND_API_KEY unset)",
		slog.String("to", m.To),
		slog.String("subject", m.Subject),
		slog.String("text", m.Text),
	)
	return nil
}
