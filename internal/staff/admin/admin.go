// Package admin is what an admin changes about a tenant besides its balance (billing.Adjustment) and the
// price table (billing.SetPrices): disabling and re-enabling an account, and staff roles. The console's
// admin forms and the `videogen accounts` commands both call it; each change and its audit row are
// written in one transaction (docs/support.md). It knows nothing of HTTP.
package admin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/audit"
	"videogen/internal/domain/auth"
	"videogen/internal/domain/tasks"
	"videogen/internal/infra/db"
	"videogen/internal/money"
	"videogen/models"
)

// Errors the console and the command line turn into messages.
var (
	ErrNoSuchAccount   = errors.New("no such account")
	ErrNoSuchUser      = errors.New("no such user")
	ErrAlreadyDisabled = errors.New("the account is already disabled")
	ErrNotDisabled     = errors.New("the account is not disabled")
	// ErrStaffAccount: disabling an account signs its users out and keeps them out; for a staff member
	// that would be a lock-out (of the last admin, even), so their role is changed first, knowingly.
	ErrStaffAccount = errors.New("the account has staff users; change their role to member first")
	ErrBadRole      = errors.New("the role must be member, support or admin")
	// ErrLastAdmin: someone must remain who can grant roles and re-enable accounts from the console.
	ErrLastAdmin = errors.New("this is the only admin; make another user admin first")
)

// TaskErrorCode is the error code of a task failed because its account was disabled.
const TaskErrorCode = "account_disabled"

// taskErrorMessage is what the customer reads on such a task.
const taskErrorMessage = "The account was disabled before this video was sent for generation; its reservation was released in full. Contact support."

// Service changes accounts and roles.
type Service struct {
	DB    *db.DB
	Tasks *tasks.Store
	Auth  *auth.Service // ends sessions
	// Keys is this instance's key cache, emptied of the account's entries after a change (nil in the
	// command line, which has none: servers see the change within API_KEY_CACHE_TTL).
	Keys *apikeys.Authenticator
	Now  func() time.Time
}

func (s *Service) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// DisablePlan is what disabling an account does, counted now, for the confirmation page.
type DisablePlan struct {
	Account    models.Account
	Owner      string // the first user's e-mail
	Keys       int    // current keys, refused from then on
	Sessions   int    // console sign-ins ended
	Waiting    int    // tasks not yet sent upstream: failed and refunded
	Refund     money.Micros
	Running    int      // tasks already sent upstream: they finish and are charged as usual
	StaffUsers []string // staff among its users: disabling is refused until they are members
}

// PlanDisable counts what disabling the account would do.
func (s *Service) PlanDisable(ctx context.Context, accountID int64) (*DisablePlan, error) {
	return plan(ctx, s.DB.R.WithContext(ctx), accountID, s.now())
}

func plan(ctx context.Context, q *gorm.DB, accountID int64, now time.Time) (*DisablePlan, error) {
	var p DisablePlan
	if err := q.Take(&p.Account, accountID).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, fmt.Errorf("account %d: %w", accountID, ErrNoSuchAccount)
		}
		return nil, fmt.Errorf("read account %d: %w", accountID, err)
	}
	var users []models.User
	if err := q.Where("account_id = ?", accountID).Order("id").Find(&users).Error; err != nil {
		return nil, fmt.Errorf("read the users of account %d: %w", accountID, err)
	}
	ids := make([]int64, 0, len(users))
	for _, u := range users {
		ids = append(ids, u.ID)
		if u.Staff() {
			p.StaffUsers = append(p.StaffUsers, u.Email)
		}
	}
	if len(users) > 0 {
		p.Owner = users[0].Email
	}
	for _, u := range users { // the longest-standing current owner, when there is one
		if u.AccountRole == models.AccountOwner && !u.Removed() {
			p.Owner = u.Email
			break
		}
	}
	var keys, sessions int64
	var waiting struct {
		N   int64
		Sum int64
	}
	var running int64
	errs := []error{
		q.Model(&models.APIKey{}).Where("account_id = ? AND revoked_at IS NULL", accountID).Count(&keys).Error,
		q.Model(&models.Session{}).Where("user_id IN ? AND revoked_at IS NULL AND expires_at > ?", ids, now).Count(&sessions).Error,
		q.Model(&models.Task{}).Select("COUNT(*) AS n, COALESCE(SUM(amount_micros), 0) AS sum").
			Where("account_id = ? AND status = ? AND credential_id IS NULL", accountID, tasks.Queued).Scan(&waiting).Error,
		q.Model(&models.Task{}).Where("account_id = ? AND status IN ? AND credential_id IS NOT NULL", accountID, tasks.Unfinished).Count(&running).Error,
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("count what disabling account %d touches: %w", accountID, err)
	}
	p.Keys, p.Sessions, p.Waiting, p.Refund, p.Running = int(keys), int(sessions), int(waiting.N), money.Micros(waiting.Sum), int(running)
	return &p, nil
}

// DisableResult is what disabling did.
type DisableResult struct {
	Keys, Sessions, Running int
	Failed                  []models.Task // the waiting tasks failed and refunded
	Refund                  money.Micros
}

// Disable refuses the account's keys (401 account_disabled), ends its users' console sessions, keeps
// them from signing in, and fails its tasks not yet sent upstream, releasing their reservations — all
// with the audit row, in one transaction. Tasks already sent upstream are paid for there: they run to
// their end and settle as usual. This instance's key cache forgets the account at once; other instances
// see the change within API_KEY_CACHE_TTL, and a create they accept meanwhile runs like any other task.
func (s *Service) Disable(ctx context.Context, by audit.Actor, accountID int64, reason string) (*DisableResult, error) {
	reason, err := audit.CheckReason(reason)
	if err != nil {
		return nil, err
	}
	now := s.now()
	var out DisableResult
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		p, err := plan(ctx, tx, accountID, now)
		if err != nil {
			return err
		}
		switch {
		case p.Account.Disabled():
			return ErrAlreadyDisabled
		case len(p.StaffUsers) > 0:
			return fmt.Errorf("%w (%s)", ErrStaffAccount, strings.Join(p.StaffUsers, ", "))
		}
		// The tasks first, then the account: the lock order of the task store (task, account, credential).
		failed, err := s.Tasks.FailWaiting(tx, accountID, TaskErrorCode, taskErrorMessage)
		if err != nil {
			return err
		}
		res := tx.Model(&models.Account{}).Where("id = ? AND disabled_at IS NULL", accountID).
			Updates(map[string]any{"disabled_at": now, "disabled_reason": reason, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("disable account %d: %w", accountID, res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrAlreadyDisabled // disabled meanwhile by someone else: their change stands, ours rolls back
		}
		var userIDs []int64
		if err := tx.Model(&models.User{}).Where("account_id = ?", accountID).Pluck("id", &userIDs).Error; err != nil {
			return fmt.Errorf("read the users of account %d: %w", accountID, err)
		}
		for _, id := range userIDs {
			if err := s.Auth.EndAllSessions(ctx, tx, id); err != nil {
				return err
			}
		}
		out = DisableResult{Keys: p.Keys, Sessions: p.Sessions, Running: p.Running, Failed: failed}
		for _, t := range failed {
			out.Refund += money.Micros(t.AmountMicros)
		}
		return audit.Record(ctx, tx, now, by, audit.Entry{Action: audit.Disable, TargetType: audit.TargetAccount, TargetID: audit.AccountRef(accountID),
			AccountID: accountID, Reason: reason,
			Detail: fmt.Sprintf("%d keys refused, %d sessions ended, %d waiting tasks failed and %s released, %d tasks already sent upstream left to finish",
				out.Keys, out.Sessions, len(failed), out.Refund.USD(), out.Running)})
	})
	if err != nil {
		return nil, err
	}
	if s.Keys != nil {
		s.Keys.ForgetAccount(accountID)
	}
	return &out, nil
}

// Enable lets the account's keys and users in again (its sessions stay ended; its users sign in anew).
func (s *Service) Enable(ctx context.Context, by audit.Actor, accountID int64, reason string) error {
	reason, err := audit.CheckReason(reason)
	if err != nil {
		return err
	}
	now := s.now()
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var a models.Account
		if err := tx.Take(&a, accountID).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return fmt.Errorf("account %d: %w", accountID, ErrNoSuchAccount)
			}
			return fmt.Errorf("read account %d: %w", accountID, err)
		}
		if !a.Disabled() {
			return ErrNotDisabled
		}
		res := tx.Model(&models.Account{}).Where("id = ? AND disabled_at IS NOT NULL", accountID).
			Updates(map[string]any{"disabled_at": nil, "disabled_reason": "", "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("enable account %d: %w", accountID, res.Error)
		}
		if res.RowsAffected == 0 {
			return ErrNotDisabled
		}
		return audit.Record(ctx, tx, now, by, audit.Entry{Action: audit.Enable, TargetType: audit.TargetAccount, TargetID: audit.AccountRef(accountID),
			AccountID: accountID, Reason: reason,
			Detail: fmt.Sprintf("disabled since %s for: %s", a.DisabledAt.UTC().Format(time.RFC3339), a.DisabledReason)})
	})
	if err != nil {
		return err
	}
	if s.Keys != nil {
		s.Keys.ForgetAccount(accountID)
	}
	return nil
}

// RoleChange is what SetRole did.
type RoleChange struct {
	User     models.User // as it is now
	Old, New string
}

// Changed reports whether the role is different from before.
func (r RoleChange) Changed() bool { return r.Old != r.New }

// SetRole gives a user a role (member, support or admin) with its audit row. It refuses to take the
// admin role from the last admin, themselves included. Roles are read from the database on every
// request, so the change holds from the user's next page on; sessions are kept (a demoted staff member
// simply finds the staff pages gone), but none of them counts as past the second factor any more: staff
// reach under the new role starts with a fresh code. Setting the role a user already has changes and
// records nothing.
func (s *Service) SetRole(ctx context.Context, by audit.Actor, userID int64, role, reason string) (*RoleChange, error) {
	switch role {
	case models.RoleMember, models.RoleSupport, models.RoleAdmin:
	default:
		return nil, fmt.Errorf("%w, not %q", ErrBadRole, role)
	}
	reason = strings.TrimSpace(reason)
	if reason != "" {
		var err error
		if reason, err = audit.CheckReason(reason); err != nil {
			return nil, err
		}
	}
	now := s.now()
	var out RoleChange
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		// The admins are locked first (in id order, the same for everyone): two admins demoting each other
		// at once are serialised here, and the second sees that only one admin is left.
		var admins []int64
		q := tx.Model(&models.User{}).Where("role = ?", models.RoleAdmin).Order("id")
		if s.DB.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Pluck("id", &admins).Error; err != nil {
			return fmt.Errorf("read the admins: %w", err)
		}
		u := &out.User
		q = tx
		if s.DB.Postgres {
			q = q.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		if err := q.Take(u, userID).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return fmt.Errorf("user %d: %w", userID, ErrNoSuchUser)
			}
			return fmt.Errorf("read user %d: %w", userID, err)
		}
		out.Old, out.New = u.Role, role
		if u.Role == role {
			return nil
		}
		if u.Role == models.RoleAdmin && len(admins) <= 1 {
			return ErrLastAdmin
		}
		if err := tx.Model(&models.User{}).Where("id = ?", userID).Updates(map[string]any{"role": role, "updated_at": now}).Error; err != nil {
			return fmt.Errorf("set the role of user %d: %w", userID, err)
		}
		u.Role = role
		if err := auth.ForgetSecondFactor(tx, userID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, now, by, audit.Entry{Action: audit.GrantRole, TargetType: audit.TargetUser, TargetID: fmt.Sprint(userID),
			AccountID: u.AccountID, Reason: reason, Detail: fmt.Sprintf("%s: %s → %s", u.Email, out.Old, role)})
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ResetSecondFactor clears a staff member's authenticator and recovery codes (they lost both) and ends
// their sessions; their next staff page asks them to enrol again. Audited with its reason.
func (s *Service) ResetSecondFactor(ctx context.Context, by audit.Actor, userID int64, reason string) error {
	reason, err := audit.CheckReason(reason)
	if err != nil {
		return err
	}
	now := s.now()
	return s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var u models.User
		if err := tx.Take(&u, userID).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return fmt.Errorf("user %d: %w", userID, ErrNoSuchUser)
			}
			return fmt.Errorf("read user %d: %w", userID, err)
		}
		if err := s.Auth.ResetSecondFactor(ctx, tx, userID); err != nil {
			return err
		}
		return audit.Record(ctx, tx, now, by, audit.Entry{Action: audit.ResetTOTP, TargetType: audit.TargetUser,
			TargetID: strconv.FormatInt(userID, 10), AccountID: u.AccountID, Reason: reason, Detail: u.Email})
	})
}
