package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/infra/runner"
	"videogen/models"
)

// A password-reset form must not tell a stranger which addresses have accounts, by its answer or by how
// long the answer takes. Looking the address up and, for a registered one, issuing a link and queueing
// its e-mail took twice as long as answering for an unknown address — enough to tell them apart from
// outside. So the form does the same work for every address: it queues the request (one INSERT), and a
// background job does the rest (docs/decisions.md, "Password resets answer alike"). The job is not woken
// by the request: it runs on its own schedule, with jitter, so the extra work a registered address causes
// (a write, on SQLite the single writer's lock) does not follow the request it could be timed against.

// resetRequestMaxAge is how long a queued request is still worth an e-mail; one older than that (the
// service was down, or the request keeps failing) is dropped: the person asked long ago and will ask again.
const resetRequestMaxAge = ResetTTL

// RequestReset answers the reset form: it queues a request for the address, registered or not, for the
// job that e-mails a link to registered ones (HandleResetRequests). Throttled per client. The request
// keeps who asked — the client's network, and the user a valid device cookie of its browser names (read
// from the cookie alone, the same work for every address) — so the job can tell the account's own
// clients from strangers when it spends the address's recovery budget.
func (s *Service) RequestReset(ctx context.Context, email string, c Client) error {
	if err := allow(ctx, s.Throttle.FormsPerIP, c.IP); err != nil {
		return err
	}
	norm, err := accounts.NormalizeEmail(email)
	if err != nil {
		return nil // not an address at all: nothing to send, and the answer is the same
	}
	req := models.ResetRequest{Email: norm, RequestedAt: s.now(), ClientIP: c.IP}
	if d, ok := s.deviceOf(c.Device); ok {
		req.DeviceUserID, req.DeviceEpoch = &d.userID, d.epoch
	}
	if err := s.DB.W.WithContext(ctx).Create(&req).Error; err != nil {
		return fmt.Errorf("queue a password reset request: %w", err)
	}
	return nil
}

// ResetJob handles queued reset requests about every poll (between half and one and a half times it, at
// random), logging failures to log.
func (s *Service) ResetJob(poll time.Duration, log *slog.Logger) runner.Every {
	return runner.Every{Interval: poll, AtStart: true, Jitter: true, Job: func(ctx context.Context) {
		if _, err := s.HandleResetRequests(ctx); err != nil && ctx.Err() == nil {
			log.Error("handle password reset requests", "err", err)
		}
	}}
}

// HandleResetRequests handles the queued reset requests and returns how many e-mails it queued: for a
// registered address (within its e-mail throttle) a new link, whose e-mail commits with the request's
// deletion; for any other, only the deletion. A request that fails stays for the next round, and the
// others go on; one older than resetRequestMaxAge is dropped unhandled.
func (s *Service) HandleResetRequests(ctx context.Context) (queued int, err error) {
	defer func() {
		if queued > 0 {
			s.Notify.Wake() // the e-mails committed: the outbox sends them now
		}
	}()
	var failed []error
	after := int64(0)
	for {
		var batch []models.ResetRequest
		if err := s.DB.R.WithContext(ctx).Where("id > ?", after).Order("id").Limit(100).Find(&batch).Error; err != nil {
			return queued, errors.Join(append(failed, fmt.Errorf("read password reset requests: %w", err))...)
		}
		for _, r := range batch {
			after = r.ID
			sent, err := s.handleReset(ctx, r)
			if err != nil {
				failed = append(failed, err)
				continue
			}
			if sent {
				queued++
			}
		}
		if len(batch) < 100 || ctx.Err() != nil {
			return queued, errors.Join(failed...)
		}
	}
}

// handleReset handles one request in one transaction; the deletion that starts it is the claim, so of
// two instances only one handles a request. Reading the queue first, the job takes no write lock while
// the queue is empty.
func (s *Service) handleReset(ctx context.Context, r models.ResetRequest) (sent bool, err error) {
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Where("id = ?", r.ID).Delete(&models.ResetRequest{})
		if res.Error != nil {
			return fmt.Errorf("claim password reset request %d: %w", r.ID, res.Error)
		}
		if res.RowsAffected == 0 || s.now().Sub(r.RequestedAt) > resetRequestMaxAge {
			return nil // another instance's, or stale: deleted, and nothing else (so a failing one ends too)
		}
		var users []models.User
		// A member removed from their account gets no link: it would set a password that opens nothing.
		if err := tx.Where("email = ? AND removed_at IS NULL", r.Email).Limit(1).Find(&users).Error; err != nil {
			return fmt.Errorf("find the user of password reset request %d: %w", r.ID, err)
		}
		if len(users) == 0 {
			return nil
		}
		u := users[0]
		known, err := s.knownForReset(tx, &u, r)
		if err != nil {
			return err
		}
		if known {
			if allow(ctx, s.Throttle.Recovery, u.Email) != nil {
				return nil
			}
		} else if allow(ctx, s.Throttle.Recovery, "stranger "+networkOf(r.ClientIP)+" "+u.Email) != nil ||
			allow(ctx, s.Throttle.RecoveryStrangers, u.Email) != nil {
			return nil
		}
		raw, err := s.newResetToken(tx, u.ID, ResetTTL)
		if err != nil {
			return err
		}
		sent = true
		return s.Notify.ResetPassword(tx, u.Email, s.BaseURL+"/password/reset?token="+raw)
	})
	if err != nil {
		return false, fmt.Errorf("password reset request %d: %w", r.ID, err)
	}
	return sent, nil
}

// networkOf names the network a client address belongs to, as far as one client can easily change
// address within it: its /24 (IPv4) or /64 (IPv6). A string that is not an address names itself.
func networkOf(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	bits := 64
	if a = a.Unmap(); a.Is4() {
		bits = 24
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return ip
	}
	return p.String()
}

// knownForReset reports whether a reset request came from a client u's account knows: a browser holding
// u's device cookie under their current password, or a network one of u's sessions started from lately
// (as knownForSignIn). Such a request spends the address's own recovery budget, which no stranger's
// request reaches.
func (s *Service) knownForReset(tx *gorm.DB, u *models.User, r models.ResetRequest) (bool, error) {
	if r.DeviceUserID != nil && *r.DeviceUserID == u.ID && r.DeviceEpoch != "" && r.DeviceEpoch == s.passwordEpoch(u.PasswordHash) {
		return true, nil
	}
	if r.ClientIP == "" {
		return false, nil
	}
	var ids []int64
	if err := tx.Model(&models.Session{}).Where("user_id = ? AND ip = ? AND created_at > ?", u.ID, r.ClientIP, s.now().Add(-knownNetworkWindow)).
		Limit(1).Pluck("id", &ids).Error; err != nil {
		return false, fmt.Errorf("look for sessions of user %d from %s: %w", u.ID, r.ClientIP, err)
	}
	return len(ids) > 0, nil
}
