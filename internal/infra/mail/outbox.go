package mail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/queue"
	"videogen/internal/infra/seal"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// OutboxConfig tunes the delivery of queued e-mail.
type OutboxConfig struct {
	Secrets []string // APP_SECRET values: the first seals bodies, all open them
	// GiveUp is how long a message is retried before it is marked failed (default 24 h: Resend keeps an
	// idempotency key for 24 hours, so every retry within it is deduplicated).
	GiveUp time.Duration
	// Now is the clock (tests move it). Required.
	Now func() time.Time
}

// Outbox keeps e-mail in the database until it is delivered, and the record of it after. Enqueue writes
// a message (its row in mail_outbox) and its River job in the caller's transaction — the one that records
// the event the mail is about — so a crash loses nothing and a rollback sends nothing. The job (SendArgs,
// queue.Mail) sends it through the Sender with the row's idempotency key on every attempt, so the provider
// delivers once, and records it sent; a job run again after that finds it sent (docs/jobs.md, "E-mail").
//
// Answers never wait for the provider: a page takes the same time whether or not an e-mail went out,
// which would otherwise tell a visitor which addresses have accounts.
type Outbox struct {
	cfg  OutboxConfig
	db   *db.DB
	q    *queue.Queue
	send Sender
	log  *slog.Logger
	seal *seal.Sealer
}

// NewOutbox returns an outbox delivering through send on q's mail queue: it adds the delivery worker and
// the hourly prune of old records (queue.Chores) to q, so call it before q starts.
func NewOutbox(d *db.DB, q *queue.Queue, send Sender, log *slog.Logger, cfg OutboxConfig) (*Outbox, error) {
	if cfg.Now == nil {
		return nil, errors.New("mail outbox: no clock (OutboxConfig.Now)")
	}
	s, err := newSealer(cfg.Secrets)
	if err != nil {
		return nil, err
	}
	if cfg.GiveUp <= 0 {
		cfg.GiveUp = 24 * time.Hour
	}
	o := &Outbox{cfg: cfg, db: d, q: q, send: send, log: log, seal: s}
	queue.Add(q, &sendWorker{o: o})
	queue.Add(q, &pruneWorker{o: o})
	q.Every(time.Hour, func() river.JobArgs { return PruneArgs{} })
	return o, nil
}

func (o *Outbox) now() time.Time { return o.cfg.Now().UTC().Truncate(time.Microsecond) }

// SendArgs is the job of one e-mail: the id of its mail_outbox row, which holds the rest. Migration 00032
// writes these args by hand for the rows its predecessor left pending: keep the JSON as it is.
type SendArgs struct {
	ID int64 `json:"id"`
}

// Kind names the job in river_job.
func (SendArgs) Kind() string { return "mail_send" }

// sendMaxAttempts bounds the attempts far beyond the day of retries (about 30 on retryAfter's schedule):
// the give-up is by age (OutboxConfig.GiveUp), not by count.
const sendMaxAttempts = 100

// InsertOpts puts every e-mail on the mail queue (migration 00032 repeats these values).
func (SendArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Mail, MaxAttempts: sendMaxAttempts}
}

// Enqueue records m inside tx, with the job that delivers it once tx commits.
func (o *Outbox) Enqueue(tx *gorm.DB, m Message) error {
	if m.To == "" {
		return fmt.Errorf("queue e-mail %q: no recipient", m.Subject)
	}
	kind := m.Tags["kind"]
	if kind == "" {
		kind = "mail"
	}
	// One key per message, random so that two deployments sharing a Resend account never collide.
	key := kind + "/" + ids.NewToken(24)
	box, err := sealBody(o.seal, sealed{Text: m.Text, HTML: m.HTML, Tags: m.Tags}, sealedFor(key, m.To))
	if err != nil {
		return err
	}
	row := &models.MailOutbox{Kind: kind, Recipient: m.To, Subject: m.Subject, SealedBody: box, IdempotencyKey: key, CreatedAt: o.now()}
	if err := tx.Create(row).Error; err != nil {
		return fmt.Errorf("queue %s e-mail: %w", kind, err)
	}
	if _, err := o.q.InsertTx(tx, SendArgs{ID: row.ID}, nil); err != nil {
		return fmt.Errorf("queue %s e-mail %d: %w", kind, row.ID, err)
	}
	return nil
}

// sealedFor is the additional data a body is sealed with: it opens only on its own row, to its recipient.
func sealedFor(key, recipient string) []byte { return []byte(key + "\x00" + recipient) }

// attemptTimeout bounds one call to the provider (any Sender); the job's own timeout (Timeout) leaves
// room to record the outcome.
const attemptTimeout = 20 * time.Second

// sendWorker delivers one e-mail per job.
type sendWorker struct {
	river.WorkerDefaults[SendArgs]
	o *Outbox
}

// Timeout is the send's bound plus the time to record it.
func (w *sendWorker) Timeout(*river.Job[SendArgs]) time.Duration {
	return attemptTimeout + 10*time.Second
}

// NextRetry is the e-mail's schedule: 5 s after the first failed attempt, then three times longer each
// time, up to an hour (retryAfter), by the service's clock.
func (w *sendWorker) NextRetry(job *river.Job[SendArgs]) time.Time {
	return w.o.now().Add(retryAfter(job.Attempt))
}

// Work sends the e-mail and records it sent; River then completes the job with others in one write (its
// batch completer). A crash after the record leaves at most a job that finds the message sent and does
// nothing; one before it leaves the message unsent: the next attempt (River rescues the job of an
// instance that died) sends it again with the same idempotency key, which the provider drops as a repeat. A failed attempt is retried on NextRetry's schedule until the message is a day old
// (GiveUp), then the message is marked failed and its job cancelled.
func (w *sendWorker) Work(ctx context.Context, job *river.Job[SendArgs]) error {
	o := w.o
	var rows []models.MailOutbox
	if err := o.db.R.WithContext(ctx).Where("id = ?", job.Args.ID).Limit(1).Find(&rows).Error; err != nil {
		return fmt.Errorf("read e-mail %d: %w", job.Args.ID, err)
	}
	if len(rows) == 0 || rows[0].SentAt != nil || rows[0].FailedAt != nil {
		return nil // pruned, or recorded already: nothing left to send
	}
	row := &rows[0]
	log := o.log.With("mail", row.ID, "kind", row.Kind, "attempt", job.Attempt)
	body, err := openBody(o.seal, row.SealedBody, sealedFor(row.IdempotencyKey, row.Recipient))
	if err != nil {
		o.giveUp(ctx, row, job.Attempt, err)
		return river.JobCancel(err)
	}
	sctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	err = o.send.Send(sctx, Message{To: row.Recipient, Subject: row.Subject, Text: body.Text, HTML: body.HTML,
		IdempotencyKey: row.IdempotencyKey, Tags: body.Tags})
	cancel()
	// The outcome is recorded even if the job's time ran out meanwhile: the send may have landed.
	rctx := context.WithoutCancel(ctx)
	if err == nil {
		err := o.db.W.WithContext(rctx).Model(&models.MailOutbox{}).Where("id = ?", row.ID).
			Updates(map[string]any{"sent_at": o.now(), "sealed_body": nil, "last_error": ""}).Error
		if err != nil {
			// The next attempt sends it again with the same key; the provider drops the repeat.
			log.Error("record e-mail as sent", "err", err)
			return err
		}
		log.Debug("e-mail sent")
		return nil
	}
	if o.now().Sub(row.CreatedAt) >= o.cfg.GiveUp {
		o.giveUp(ctx, row, job.Attempt, err)
		return river.JobCancel(err)
	}
	log.Warn("e-mail not sent; will retry", "retry_in", retryAfter(job.Attempt), "err", err)
	msg, _ := storetext.Clip(err.Error(), 500)
	if err := o.db.W.WithContext(rctx).Model(&models.MailOutbox{}).Where("id = ?", row.ID).Update("last_error", msg).Error; err != nil {
		log.Error("record e-mail retry", "err", err)
	}
	return err
}

// giveUp marks a message failed for good and blanks its body.
func (o *Outbox) giveUp(ctx context.Context, row *models.MailOutbox, attempts int, cause error) {
	o.log.Error("e-mail given up", "mail", row.ID, "kind", row.Kind, "attempts", attempts, "err", cause)
	msg, _ := storetext.Clip(cause.Error(), 500)
	if err := o.db.W.WithContext(context.WithoutCancel(ctx)).Model(&models.MailOutbox{}).Where("id = ?", row.ID).
		Updates(map[string]any{"failed_at": o.now(), "sealed_body": nil, "last_error": msg}).Error; err != nil {
		o.log.Error("record e-mail as failed", "mail", row.ID, "err", err)
	}
}

// retryAfter is the wait after the n-th failed attempt: 5 s, 15 s, 45 s, … up to an hour.
func retryAfter(n int) time.Duration {
	d := 5 * time.Second
	for i := 1; i < n && d < time.Hour; i++ {
		d *= 3
	}
	return min(d, time.Hour)
}

// keepDelivered is how long rows of sent or failed messages (recipient, subject, times, no body) are kept
// for support.
const keepDelivered = 30 * 24 * time.Hour

// PruneArgs is the hourly job that deletes the records of e-mails done with for longer than keepDelivered.
type PruneArgs struct{}

// Kind names the job in river_job.
func (PruneArgs) Kind() string { return "mail_prune" }

// InsertOpts puts the prune among the chores.
func (PruneArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: queue.Chores} }

type pruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	o *Outbox
}

func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error {
	cutoff := w.o.now().Add(-keepDelivered)
	if err := w.o.db.W.WithContext(ctx).Where("(sent_at IS NOT NULL OR failed_at IS NOT NULL) AND created_at < ?", cutoff).
		Delete(&models.MailOutbox{}).Error; err != nil {
		return fmt.Errorf("prune the mail outbox: %w", err)
	}
	return nil
}
