package auth

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"videogen/internal/accounts"
	"videogen/models"
)

// A password-reset form must not tell a stranger which addresses have accounts, by its answer or by how
// long the answer takes. Looking the address up and, for a registered one, issuing a link and queueing
// its e-mail took twice as long as answering for an unknown address — enough to tell them apart from
// outside. So the form does the same work for every address: it queues the request (one INSERT), and a
// background job does the rest (docs/decisions.md, "Password resets answer alike").

// resetRequestMaxAge is how long a queued request is still worth an e-mail; one older than that (the
// service was down) is dropped: the person asked long ago and will ask again.
const resetRequestMaxAge = ResetTTL

// RequestReset answers the reset form: it queues a request for the address, registered or not, and
// wakes the job that e-mails a link to registered ones (HandleResetRequests). Throttled per client.
func (s *Service) RequestReset(ctx context.Context, email, ip string) error {
	if err := allow(ctx, s.Throttle.FormsPerIP, ip); err != nil {
		return err
	}
	norm, err := accounts.NormalizeEmail(email)
	if err != nil {
		return nil // not an address at all: nothing to send, and the answer is the same
	}
	if err := s.DB.W.WithContext(ctx).Create(&models.ResetRequest{Email: norm, RequestedAt: s.now()}).Error; err != nil {
		return fmt.Errorf("queue a password reset request: %w", err)
	}
	select {
	case s.resetSignal() <- struct{}{}:
	default:
	}
	return nil
}

// resetSignal is the wake-up of RunResetRequests on this instance.
func (s *Service) resetSignal() chan struct{} {
	s.resetOnce.Do(func() { s.resetWake = make(chan struct{}, 1) })
	return s.resetWake
}

// RunResetRequests handles queued reset requests until ctx ends: at once for one queued on this
// instance, and every poll for those queued elsewhere or left by a crash.
func (s *Service) RunResetRequests(ctx context.Context, poll time.Duration, log *slog.Logger) {
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if _, err := s.HandleResetRequests(ctx); err != nil && ctx.Err() == nil {
			log.Error("handle password reset requests", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.resetSignal():
		case <-t.C:
		}
	}
}

// HandleResetRequests handles the queued reset requests and returns how many e-mails it queued: for a
// registered address (within its e-mail throttle) a new link, whose e-mail commits with the request's
// deletion; for any other, only the deletion.
func (s *Service) HandleResetRequests(ctx context.Context) (queued int, err error) {
	defer func() {
		if queued > 0 {
			s.Notify.Wake() // the e-mails committed: the outbox sends them now
		}
	}()
	for {
		var batch []models.ResetRequest
		if err := s.DB.R.WithContext(ctx).Order("id").Limit(100).Find(&batch).Error; err != nil {
			return queued, fmt.Errorf("read password reset requests: %w", err)
		}
		for _, r := range batch {
			sent, err := s.handleReset(ctx, r)
			if err != nil {
				return queued, err
			}
			if sent {
				queued++
			}
		}
		if len(batch) < 100 {
			return queued, nil
		}
	}
}

// handleReset handles one request in one transaction; the deletion that starts it is the claim, so of
// two instances only one handles a request.
func (s *Service) handleReset(ctx context.Context, r models.ResetRequest) (sent bool, err error) {
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Where("id = ?", r.ID).Delete(&models.ResetRequest{})
		if res.Error != nil {
			return fmt.Errorf("claim password reset request %d: %w", r.ID, res.Error)
		}
		if res.RowsAffected == 0 || s.now().Sub(r.RequestedAt) > resetRequestMaxAge {
			return nil
		}
		var users []models.User
		if err := tx.Where("email = ?", r.Email).Limit(1).Find(&users).Error; err != nil {
			return fmt.Errorf("find the user of a password reset request: %w", err)
		}
		if len(users) == 0 || allow(ctx, s.Throttle.Mail, users[0].Email) != nil {
			return nil
		}
		u := users[0]
		raw, err := s.newResetToken(tx, u.ID, ResetTTL)
		if err != nil {
			return err
		}
		sent = true
		return s.Notify.ResetPassword(tx, u.Email, s.BaseURL+"/password/reset?token="+raw)
	})
	if err != nil {
		return false, err
	}
	return sent, nil
}
