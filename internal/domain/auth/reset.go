package auth

import (
	"context"
	"database/sql"
	"fmt"
	"net/netip"
	"time"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/infra/queue"
	"videogen/models"
)

// A password-reset form must not tell a stranger which addresses have accounts, by its answer or by how
// long the answer takes. Looking the address up and, for a registered one, issuing a link and queueing
// its e-mail took twice as long as answering for an unknown address — enough to tell them apart from
// outside. So the form does the same work for every address: it queues the request (one River job, one
// INSERT), and the job does the rest (docs/decisions.md, "Password resets answer alike"; docs/jobs.md,
// "Password resets"). The job is not worked in the request: the mail queue finds it at its next poll
// (JOBS_POLL_INTERVAL), which does not follow the request, so the extra work a registered address causes
// (a write, on SQLite the single writer's lock) does not follow the request it could be timed against.

// resetRequestMaxAge is how long a queued request is still worth an e-mail; one older than that (the
// service was down, or the request keeps failing) is dropped: the person asked long ago and will ask again.
const resetRequestMaxAge = ResetTTL

// ResetArgs is a password-reset request waiting to be handled: the address as typed, normalised, and who
// asked — the client's address and, when its browser held a valid device cookie, the user that cookie
// names and the password epoch it was given under (never the cookie). Migration 00032 writes these args
// by hand for the requests its predecessor's table held: keep the JSON as it is.
type ResetArgs struct {
	Email        string    `json:"email"`
	RequestedAt  time.Time `json:"requested_at"`
	ClientIP     string    `json:"client_ip"`
	DeviceUserID *int64    `json:"device_user_id"`
	DeviceEpoch  string    `json:"device_epoch"`
}

// Kind names the job in river_job.
func (ResetArgs) Kind() string { return "password_reset" }

// resetMaxAttempts outlasts resetRequestMaxAge on NextRetry's schedule (the waits after 29 failed
// attempts add up to 72 minutes), so a failing request ends by its age, dropped, not by a count.
const resetMaxAttempts = 30

// InsertOpts puts the requests on the mail queue, beside the e-mails they cause.
func (ResetArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Mail, MaxAttempts: resetMaxAttempts}
}

// RequestReset answers the reset form: it queues a request for the address, registered or not, for the
// job that e-mails a link to registered ones (ResetWorker). Throttled per client. The request keeps who
// asked — the client's network, and the user a valid device cookie of its browser names (read from the
// cookie alone, the same work for every address) — so the job can tell the account's own clients from
// strangers when it spends the address's recovery budget.
func (s *Service) RequestReset(ctx context.Context, email string, c Client) error {
	if err := allow(ctx, s.Throttle.FormsPerIP, c.IP); err != nil {
		return err
	}
	norm, err := accounts.NormalizeEmail(email)
	if err != nil {
		return nil // not an address at all: nothing to send, and the answer is the same
	}
	req := ResetArgs{Email: norm, RequestedAt: s.now(), ClientIP: c.IP}
	if d, ok := s.deviceOf(c.Device); ok {
		req.DeviceUserID, req.DeviceEpoch = &d.userID, d.epoch
	}
	if err := s.Queue.Insert(ctx, req, nil); err != nil {
		return fmt.Errorf("queue a password reset request: %w", err)
	}
	return nil
}

// ResetWorker is the worker of the reset requests, for queue.Add.
func (s *Service) ResetWorker() river.Worker[ResetArgs] { return &resetWorker{s: s} }

type resetWorker struct {
	river.WorkerDefaults[ResetArgs]
	s *Service
}

// NextRetry is the requests' schedule: 10 s after the first failed attempt, 20 s after the second, and so
// on, by the service's clock, until the request is too old to answer.
func (w *resetWorker) NextRetry(job *river.Job[ResetArgs]) time.Time {
	return w.s.now().Add(time.Duration(job.Attempt) * 10 * time.Second)
}

// Work handles one request in one transaction: for a registered address (within its e-mail throttle) a
// new link, whose e-mail (its record and its job) commits with the request's end; for any other, only the
// end. The end is the job's completion and deletion: a request for an address nobody registered is kept
// no longer than it waits (River would keep a completed job's args, the address, for a week). A request
// that fails is retried (NextRetry); one older than resetRequestMaxAge is dropped unhandled.
func (w *resetWorker) Work(ctx context.Context, job *river.Job[ResetArgs]) error {
	s := w.s
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if s.now().Sub(job.Args.RequestedAt) <= resetRequestMaxAge {
			if err := s.handleReset(ctx, tx, job.Args); err != nil {
				return err
			}
		}
		if err := queue.CompleteTx(tx, job); err != nil {
			return err
		}
		stx, ok := tx.Statement.ConnPool.(*sql.Tx)
		if !ok {
			return fmt.Errorf("forget password reset request %d: not in a transaction", job.ID)
		}
		if _, err := s.Queue.Client().JobDeleteTx(ctx, stx, job.ID); err != nil {
			return fmt.Errorf("forget password reset request %d: %w", job.ID, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("password reset request %d: %w", job.ID, err)
	}
	return nil
}

// handleReset issues a link for r's address, if registered and within its throttles, and queues its
// e-mail in tx.
func (s *Service) handleReset(ctx context.Context, tx *gorm.DB, r ResetArgs) error {
	var users []models.User
	// A member removed from their account gets no link: it would set a password that opens nothing.
	if err := tx.Where("email = ? AND removed_at IS NULL", r.Email).Limit(1).Find(&users).Error; err != nil {
		return fmt.Errorf("find the user: %w", err)
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
	return s.Notify.ResetPassword(tx, u.Email, s.BaseURL+"/password/reset?token="+raw)
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
func (s *Service) knownForReset(tx *gorm.DB, u *models.User, r ResetArgs) (bool, error) {
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
