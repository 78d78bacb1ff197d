package mail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/runner"
	"videogen/internal/infra/seal"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// OutboxConfig tunes the delivery of queued e-mail.
type OutboxConfig struct {
	Owner   string        // this instance's name in leases
	Lease   time.Duration // how long a claimed message is held before another instance may take it (LEASE_DURATION)
	Secrets []string      // APP_SECRET values: the first seals bodies, all open them
	// Poll is how often due messages are looked for when nothing woke the worker (default 1 s).
	Poll time.Duration
	// GiveUp is how long a message is retried before it is marked failed (default 24 h: Resend keeps an
	// idempotency key for 24 hours, so every retry within it is deduplicated).
	GiveUp time.Duration
	// Now is the clock (tests move it); nil is real time.
	Now func() time.Time
}

// Outbox keeps e-mail in the database until it is delivered. Enqueue writes a message in the caller's
// transaction — the one that records the event the mail is about — so a crash loses nothing; Run
// delivers due messages through the Sender, at most one instance per message at a time (a lease), with
// backoff between attempts and the same idempotency key on every attempt, so the provider delivers once.
//
// Answers never wait for the provider: a page takes the same time whether or not an e-mail went out,
// which would otherwise tell a visitor which addresses have accounts.
type Outbox struct {
	cfg  OutboxConfig
	db   *db.DB
	send Sender
	log  *slog.Logger
	seal *seal.Sealer
	wake chan struct{}

	lastPrune time.Time // the job's own: one round at a time
}

// NewOutbox returns an outbox delivering through send.
func NewOutbox(d *db.DB, send Sender, log *slog.Logger, cfg OutboxConfig) (*Outbox, error) {
	s, err := newSealer(cfg.Secrets)
	if err != nil {
		return nil, err
	}
	if cfg.Lease <= 0 {
		cfg.Lease = time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.GiveUp <= 0 {
		cfg.GiveUp = 24 * time.Hour
	}
	return &Outbox{cfg: cfg, db: d, send: send, log: log, seal: s, wake: make(chan struct{}, 1)}, nil
}

func (o *Outbox) now() time.Time { return o.cfg.Now().UTC().Truncate(time.Microsecond) }

// Enqueue records m inside tx; it is delivered after tx commits. Call Wake once it has.
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
	now := o.now()
	row := &models.MailOutbox{Kind: kind, Recipient: m.To, Subject: m.Subject, SealedBody: box, IdempotencyKey: key,
		CreatedAt: now, NextAttemptAt: now}
	if err := tx.Create(row).Error; err != nil {
		return fmt.Errorf("queue %s e-mail: %w", kind, err)
	}
	return nil
}

// sealedFor is the additional data a body is sealed with: it opens only on its own row, to its recipient.
func sealedFor(key, recipient string) []byte { return []byte(key + "\x00" + recipient) }

// Wake asks the delivery loop to look for due messages now. It never blocks.
func (o *Outbox) Wake() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// Job delivers due messages: at start, every Poll, and at once when woken (Wake); once an hour it also
// prunes delivered rows. Stopped, it finishes the message in hand; messages not yet sent stay queued for
// the next start (or another instance).
func (o *Outbox) Job() runner.Every {
	return runner.Every{Interval: o.cfg.Poll, AtStart: true, Wake: o.wake, Job: func(ctx context.Context) {
		if _, err := o.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			o.log.Error("deliver queued e-mail", "err", err)
		}
		if time.Since(o.lastPrune) > time.Hour {
			o.prune(ctx)
			o.lastPrune = time.Now()
		}
	}}
}

// DeliverDue sends every message that is due, one claim at a time, and returns how many went out.
func (o *Outbox) DeliverDue(ctx context.Context) (int, error) {
	sent := 0
	for {
		if ctx.Err() != nil {
			return sent, nil // stopping: what is left stays queued
		}
		m, err := o.claim(ctx)
		if err != nil || m == nil {
			return sent, err
		}
		if o.deliver(ctx, m) {
			sent++
		}
	}
}

// claim leases the next due message, or returns nil when none is due. A cheap read comes first, so an
// idle outbox never takes SQLite's single writer.
func (o *Outbox) claim(ctx context.Context) (*models.MailOutbox, error) {
	now := o.now()
	due := "sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until < ?)"
	var any []int64
	if err := o.db.R.WithContext(ctx).Model(&models.MailOutbox{}).Where(due, now, now).Limit(1).Pluck("id", &any).Error; err != nil {
		return nil, fmt.Errorf("look for due e-mail: %w", err)
	}
	if len(any) == 0 {
		return nil, nil
	}
	lock := ""
	if o.db.Postgres {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var rows []models.MailOutbox
	err := o.db.W.WithContext(ctx).Raw("UPDATE mail_outbox SET lease_owner = ?, lease_until = ?, attempts = attempts + 1 WHERE id IN (SELECT id FROM mail_outbox WHERE "+
		due+" ORDER BY next_attempt_at, id LIMIT 1"+lock+") RETURNING *", o.cfg.Owner, now.Add(o.cfg.Lease), now, now).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("claim e-mail: %w", err)
	}
	if len(rows) == 0 {
		return nil, nil
	}
	return &rows[0], nil
}

// deliver sends one claimed message and records the outcome; it reports whether the message went out.
func (o *Outbox) deliver(ctx context.Context, row *models.MailOutbox) bool {
	log := o.log.With("mail", row.ID, "kind", row.Kind)
	body, err := openBody(o.seal, row.SealedBody, sealedFor(row.IdempotencyKey, row.Recipient))
	if err != nil {
		o.giveUp(ctx, row, err)
		return false
	}
	// Well inside the lease, so no other instance takes the message while this attempt may still land;
	// and not cut off by a stop: the message in hand is finished (its idempotency key would make a
	// second send harmless, but a person would wait for it).
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(20*time.Second, o.cfg.Lease/2))
	err = o.send.Send(sctx, Message{To: row.Recipient, Subject: row.Subject, Text: body.Text, HTML: body.HTML,
		IdempotencyKey: row.IdempotencyKey, Tags: body.Tags})
	cancel()
	now := o.now()
	if err == nil {
		res := o.db.W.WithContext(context.WithoutCancel(ctx)).Model(&models.MailOutbox{}).Where("id = ? AND lease_owner = ?", row.ID, o.cfg.Owner).
			Updates(map[string]any{"sent_at": now, "sealed_body": nil, "lease_owner": nil, "lease_until": nil, "last_error": ""})
		if res.Error != nil {
			// The next attempt sends it again with the same key; the provider drops the repeat.
			log.Error("record e-mail as sent", "err", res.Error)
		}
		log.Debug("e-mail sent", "attempt", row.Attempts)
		return true
	}
	if now.Sub(row.CreatedAt) >= o.cfg.GiveUp {
		o.giveUp(ctx, row, err)
		return false
	}
	wait := retryAfter(row.Attempts)
	log.Warn("e-mail not sent; will retry", "attempt", row.Attempts, "retry_in", wait, "err", err)
	msg, _ := storetext.Clip(err.Error(), 500)
	if err := o.db.W.WithContext(context.WithoutCancel(ctx)).Model(&models.MailOutbox{}).Where("id = ? AND lease_owner = ?", row.ID, o.cfg.Owner).
		Updates(map[string]any{"next_attempt_at": now.Add(wait), "lease_owner": nil, "lease_until": nil, "last_error": msg}).Error; err != nil {
		log.Error("record e-mail retry", "err", err)
	}
	return false
}

// giveUp marks a message failed for good and blanks its body.
func (o *Outbox) giveUp(ctx context.Context, row *models.MailOutbox, cause error) {
	o.log.Error("e-mail given up", "mail", row.ID, "kind", row.Kind, "attempts", row.Attempts, "err", cause)
	msg, _ := storetext.Clip(cause.Error(), 500)
	if err := o.db.W.WithContext(context.WithoutCancel(ctx)).Model(&models.MailOutbox{}).Where("id = ?", row.ID).
		Updates(map[string]any{"failed_at": o.now(), "sealed_body": nil, "lease_owner": nil, "lease_until": nil, "last_error": msg}).Error; err != nil {
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

func (o *Outbox) prune(ctx context.Context) {
	cutoff := o.now().Add(-keepDelivered)
	err := o.db.W.WithContext(ctx).Where("(sent_at IS NOT NULL OR failed_at IS NOT NULL) AND created_at < ?", cutoff).
		Delete(&models.MailOutbox{}).Error
	if err != nil && !errors.Is(err, context.Canceled) {
		o.log.Warn("prune the mail outbox", "err", err)
	}
}
