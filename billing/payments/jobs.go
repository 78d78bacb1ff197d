package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"videogen/internal/infra/queue"
	"videogen/models"
)

// The payments' queued work, on River's payments queue (docs/jobs.md, "Payments"). Each kind says its
// attempts in its args' InsertOpts and its waits in its worker's NextRetry, and nowhere else.

// Tries of each kind before River gives it up.
const (
	// eventTries keeps an event that keeps failing (Stripe or the database down) trying for about four
	// days at the hourly end of backoff; one that waits for its payment is snoozed, which spends none,
	// and is given up by deferEvent after deferWindow.
	eventTries = 100
	// receiptTries: after ten minutes a receipt goes without Stripe's link, so only the database can
	// make it fail this often.
	receiptTries = 25
	// rechargeTries: an auto-recharge Stripe could not be asked to charge this often fails, and
	// auto-recharge switches off with an e-mail.
	rechargeTries = 8
)

// eventArgs is the processing of one recorded Stripe event: the retry path of the webhook's own try.
type eventArgs struct {
	EventID string `json:"event_id"`
}

func (eventArgs) Kind() string { return "stripe_event" }
func (eventArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Payments, MaxAttempts: eventTries}
}

type eventWorker struct {
	river.WorkerDefaults[eventArgs]
	s *Service
}

// Work processes the event. One that waits for its payment is snoozed with backoff (the credit of that
// payment also applies it at once, processWaiting); one that fails is retried (NextRetry).
func (w *eventWorker) Work(ctx context.Context, job *river.Job[eventArgs]) error {
	out, err := w.s.Process(ctx, job.Args.EventID)
	switch {
	case err != nil && job.Attempt >= job.MaxAttempts:
		w.s.log.Error("Stripe event given up: it failed every try; it stays pending", "event", job.Args.EventID, "tries", job.Attempt, "err", err)
		return err
	case err != nil:
		return err
	case out == outcomeDeferred:
		return river.JobSnooze(backoff(tries(job.JobRow)))
	}
	return nil
}

func (w *eventWorker) NextRetry(job *river.Job[eventArgs]) time.Time {
	return w.s.now().Add(backoff(tries(job.JobRow)))
}

// tries is how often a job was worked before this time: its failed attempts and its snoozes (a snooze
// gives its attempt back, and River counts it in the job's metadata).
func tries(job *rivertype.JobRow) int {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(job.Metadata, &meta) // no metadata: no snoozes
	return job.Attempt - 1 + meta.Snoozes
}

// backoff is 5 s doubling to at most an hour.
func backoff(tries int) time.Duration {
	d := 5 * time.Second
	for i := 0; i < tries && d < time.Hour; i++ {
		d *= 2
	}
	return min(d, time.Hour)
}

// receiptArgs is the receipt of one credited top-up, inserted by the transaction that credits it.
type receiptArgs struct {
	TopupID string `json:"topup_id"`
}

func (receiptArgs) Kind() string { return "topup_receipt" }
func (receiptArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Payments, MaxAttempts: receiptTries}
}

type receiptWorker struct {
	river.WorkerDefaults[receiptArgs]
	s *Service
}

func (w *receiptWorker) Work(ctx context.Context, job *river.Job[receiptArgs]) error {
	return w.s.sendReceipt(ctx, job.Args.TopupID)
}

// NextRetry waits half the events' backoff: the receipt follows its payment closely.
func (w *receiptWorker) NextRetry(job *river.Job[receiptArgs]) time.Time {
	return w.s.now().Add(backoff(tries(job.JobRow)) / 2)
}

// rechargeArgs is the charge of one auto-recharge, inserted by the transaction that starts it.
type rechargeArgs struct {
	TopupID string `json:"topup_id"`
}

func (rechargeArgs) Kind() string { return "recharge_charge" }
func (rechargeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Payments, MaxAttempts: rechargeTries}
}

type rechargeWorker struct {
	river.WorkerDefaults[rechargeArgs]
	s *Service
}

// Work charges the saved card, once per top-up whatever the retries (the PaymentIntent's idempotency
// key). On the last try a failure to reach Stripe fails the top-up and switches auto-recharge off.
func (w *rechargeWorker) Work(ctx context.Context, job *river.Job[rechargeArgs]) error {
	var t models.Topup
	if err := w.s.db.R.WithContext(ctx).Where("id = ?", job.Args.TopupID).Take(&t).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return river.JobCancel(fmt.Errorf("no top-up %s", job.Args.TopupID))
		}
		return fmt.Errorf("read auto-recharge %s: %w", job.Args.TopupID, err)
	}
	if t.State != models.TopupPending || t.StripePaymentIntentID != nil {
		return nil // charged, or ended by a webhook meanwhile
	}
	err := w.s.chargeRecharge(ctx, &t)
	if err != nil && job.Attempt >= job.MaxAttempts {
		w.s.log.Error("auto-recharge failed: Stripe could not be reached", "topup", t.ID, "tries", job.Attempt, "err", err)
		return w.s.tx(ctx, func(tx *gorm.DB) error { return w.s.failRecharge(tx, &t, "Stripe could not be reached") })
	}
	return err
}

func (w *rechargeWorker) NextRetry(job *river.Job[rechargeArgs]) time.Time {
	return w.s.now().Add(backoff(tries(job.JobRow)))
}

// alertsArgs is the periodic look at the balance crossings that charges left due. The crossing is
// marked in the transaction of the charge (billing's ledger, topups.BalancesFell), which knows nothing of
// the queues; this job turns it into its e-mail or its auto-recharge.
type alertsArgs struct{}

func (alertsArgs) Kind() string { return "balance_alerts" }
func (alertsArgs) InsertOpts() river.InsertOpts {
	// The next period looks again: a failed one is not retried.
	return river.InsertOpts{Queue: queue.Payments, MaxAttempts: 1}
}

type alertsWorker struct {
	river.WorkerDefaults[alertsArgs]
	s *Service
}

func (w *alertsWorker) Work(ctx context.Context, _ *river.Job[alertsArgs]) error {
	w.s.CheckBalances(ctx)
	return nil
}

// reconcileArgs is the periodic reconciliation of the last 72 hours, on one instance (River's leader).
type reconcileArgs struct{}

func (reconcileArgs) Kind() string { return "stripe_reconcile" }
func (reconcileArgs) InsertOpts() river.InsertOpts {
	// A failed run is logged, and the next period's run covers the same 72 hours.
	return river.InsertOpts{Queue: queue.Payments, MaxAttempts: 1}
}

type reconcileWorker struct {
	river.WorkerDefaults[reconcileArgs]
	s *Service
}

// Work reconciles and logs each difference as an error; it never applies anything by itself.
func (w *reconcileWorker) Work(ctx context.Context, _ *river.Job[reconcileArgs]) error {
	s := w.s
	report, err := s.Reconcile(ctx, s.now().Add(-72*time.Hour), false)
	switch {
	case err != nil:
		s.log.Error("daily Stripe reconciliation failed", "err", err)
		return err
	case len(report.Differences) > 0:
		for _, d := range report.Differences {
			s.log.Error("Stripe reconciliation difference", "kind", d.Kind, "stripe_id", d.StripeID, "topup", d.TopupID,
				"account", d.AccountID, "stripe_amount", d.StripeAmount.USD(), "credited", d.Credited.USD(), "note", d.Note)
		}
	default:
		s.log.Info("daily Stripe reconciliation: no differences", "sessions", report.Sessions, "payment_intents", report.PaymentIntents)
	}
	return nil
}

// addJobs registers the payments' kinds on the queue, and their periodic jobs.
func (s *Service) addJobs() {
	queue.Add(s.queue, &eventWorker{s: s})
	queue.Add(s.queue, &receiptWorker{s: s})
	queue.Add(s.queue, &rechargeWorker{s: s})
	queue.Add(s.queue, &alertsWorker{s: s})
	queue.Add(s.queue, &reconcileWorker{s: s})
	s.queue.Every(s.cfg.AlertsEvery, func() river.JobArgs { return alertsArgs{} })
	if s.Enabled() && s.cfg.ReconcileEvery > 0 {
		s.queue.Every(s.cfg.ReconcileEvery, func() river.JobArgs { return reconcileArgs{} })
	}
}
