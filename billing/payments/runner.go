package payments

import (
	"context"
	"time"

	"videogen/internal/infra/runner"
)

// Job is the payments background job, on every instance: events waiting to be retried, receipts,
// low-balance warnings, auto-recharges, and — on one instance a day — reconciliation; at start, every
// JobEvery, and at once when woken (Wake). Each piece of work is claimed with a conditional update, so
// instances never do it twice.
func (s *Service) Job() runner.Every {
	return runner.Every{Interval: s.cfg.JobEvery, AtStart: true, Wake: s.wake, Job: s.RunOnce}
}

// RunOnce does whatever work is due now.
func (s *Service) RunOnce(ctx context.Context) {
	s.processDue(ctx)
	s.warnLowBalances(ctx)
	if s.Enabled() {
		s.startRecharges(ctx)
		s.chargeRecharges(ctx)
	}
	s.sendReceipts(ctx)
	s.notify.Wake()
	if s.Enabled() && s.cfg.ReconcileEvery > 0 && s.claimReconcile(ctx) {
		since := s.now().Add(-72 * time.Hour)
		report, err := s.Reconcile(ctx, since, false)
		switch {
		case err != nil:
			s.log.Error("daily Stripe reconciliation failed", "err", err)
		case len(report.Differences) > 0:
			for _, d := range report.Differences {
				s.log.Error("Stripe reconciliation difference", "kind", d.Kind, "stripe_id", d.StripeID, "topup", d.TopupID,
					"account", d.AccountID, "stripe_amount", d.StripeAmount.USD(), "credited", d.Credited.USD(), "note", d.Note)
			}
		default:
			s.log.Info("daily Stripe reconciliation: no differences", "sessions", report.Sessions, "payment_intents", report.PaymentIntents)
		}
	}
}

// claimReconcile reports whether this instance runs the reconciliation that is due now.
func (s *Service) claimReconcile(ctx context.Context) bool {
	claimed, err := s.db.ClaimRun(ctx, "stripe_reconcile", s.cfg.Owner, s.cfg.ReconcileEvery, s.now().UTC())
	if err != nil {
		s.log.Warn("claim the reconciliation", "err", err)
	}
	return claimed
}
