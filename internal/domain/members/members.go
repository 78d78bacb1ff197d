package members

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/auth"
	"videogen/internal/infra/db"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/ratelimit"
	"videogen/models"
)

// InvitationTTL is how long an invitation's link works.
const InvitationTTL = 7 * 24 * time.Hour

// MaxPending is how many invitations an account may have waiting at once: enough for a team, too few to
// make the service a mailer for strangers' addresses.
const MaxPending = 50

// MaxSentPerDay is how many invitations an account may send in any 24 hours, withdrawn and replaced ones
// included: the pending cap alone bounds what waits, not what is mailed (invite 50, withdraw 50, again).
// A team onboarding a whole department sends it in two days.
const MaxSentPerDay = 100

// SendWindow is the window MaxSentPerDay counts in.
const SendWindow = 24 * time.Hour

// Errors the console turns into pages.
var (
	// ErrLastOwner: the change would leave the account without an owner.
	ErrLastOwner = errors.New("an account keeps at least one owner: make another member an owner first")
	// ErrNoMember: no current member of the account has this id.
	ErrNoMember = errors.New("no such member of this account")
	// ErrNoInvitation: no pending invitation of the account has this id.
	ErrNoInvitation = errors.New("no such pending invitation of this account")
	// ErrBadInvitation: the link is unknown, or its invitation was accepted, withdrawn, replaced or expired.
	ErrBadInvitation = errors.New("this invitation link does not work")
)

// Refused is an action the member's role does not allow (403): Message says why and who can.
type Refused struct {
	Action  Action
	Message string
}

func (e *Refused) Error() string { return e.Message }

// Invalid is a form that cannot be done as filled in (422): Field names the field at fault ("" for the
// form), Message says what to do.
type Invalid struct {
	Field   string
	Message string
}

func (e *Invalid) Error() string { return e.Message }

// TooManySent refuses an invitation past MaxSentPerDay: Next is when the oldest invitation of the window
// leaves it, so one more may go out. The page says it in the member's time zone.
type TooManySent struct {
	Sent int64
	Next time.Time
}

func (e *TooManySent) Error() string {
	return fmt.Sprintf("this account sent %d invitations in the last 24 hours; the next may go out at %s", e.Sent, e.Next.UTC().Format(time.RFC3339))
}

// Notifier queues the invitation e-mail inside the transaction that issues its link.
type Notifier interface {
	Invitation(tx *gorm.DB, to, inviter, account, role, roleSummary, link string, expires time.Time) error
}

// Service changes an account's members.
type Service struct {
	DB      *db.DB
	Notify  Notifier
	BaseURL string // PUBLIC_BASE_URL: invitation links start with it
	Now     func() time.Time
	// Notices is the budget of e-mails to one address that anyone can cause (auth.Throttles.Notices; nil:
	// none), so inviting an address again and again cannot flood its inbox — and never the address's
	// account-recovery budget, which a stranger's invitations must not spend.
	Notices ratelimit.Limiter
}

func (s *Service) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

func hashToken(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}

// tx runs fn in a write transaction holding the account's member lock: on PostgreSQL the account's row,
// locked first; on SQLite the single writer (BEGIN IMMEDIATE) holds every write transaction apart anyway.
// Every change of an account's members takes it, so counting the owners and changing one can never
// interleave with another change (two owners demoting each other at once leave one owner, not none).
func (s *Service) tx(ctx context.Context, accountID int64, fn func(tx *gorm.DB) error) error {
	return s.txAfter(ctx, accountID, nil, fn)
}

// txAfter is tx with before run first, before the account's row is locked: the place for locks that
// rank before the account's in the lock order (API keys' rows: a create with a spend-limited key locks
// the key, then the account — docs/api-keys.md).
func (s *Service) txAfter(ctx context.Context, accountID int64, before, fn func(tx *gorm.DB) error) error {
	return s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if before != nil {
			if err := before(tx); err != nil {
				return err
			}
		}
		if s.DB.Postgres {
			if err := tx.Exec("SELECT id FROM accounts WHERE id = ? FOR UPDATE", accountID).Error; err != nil {
				return fmt.Errorf("lock the members of account %d: %w", accountID, err)
			}
		}
		return fn(tx)
	})
}

// actor re-reads the member acting, inside the transaction: the role their page was rendered with may
// have changed since (an owner demoted a moment ago acts as what they are now), and a removed member
// acts no more.
func actor(tx *gorm.DB, by *models.User, a Action) (*models.User, error) {
	var u models.User
	if err := tx.Where("id = ? AND removed_at IS NULL", by.ID).Limit(1).Find(&u).Error; err != nil {
		return nil, fmt.Errorf("read member %d: %w", by.ID, err)
	}
	if u.ID == 0 {
		return nil, &Refused{Action: a, Message: "You are no longer a member of this account."}
	}
	if !Can(u.AccountRole, a) {
		return nil, &Refused{Action: a, Message: Refusal(u.AccountRole, a, nil)}
	}
	return &u, nil
}

// member reads a current member of the account.
func member(tx *gorm.DB, accountID, userID int64) (*models.User, error) {
	var u models.User
	if err := tx.Where("id = ? AND account_id = ? AND removed_at IS NULL", userID, accountID).Limit(1).Find(&u).Error; err != nil {
		return nil, fmt.Errorf("read member %d: %w", userID, err)
	}
	if u.ID == 0 {
		return nil, ErrNoMember
	}
	return &u, nil
}

// owners counts the account's current owners.
func owners(tx *gorm.DB, accountID int64) (int64, error) {
	var n int64
	err := tx.Model(&models.User{}).Where("account_id = ? AND account_role = ? AND removed_at IS NULL", accountID, models.AccountOwner).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("count the owners of account %d: %w", accountID, err)
	}
	return n, nil
}

// sentToday refuses (*TooManySent) when the account sent MaxSentPerDay invitations in the SendWindow
// before now. Every invitation ever created counts — withdrawn, replaced, expired or accepted — since each
// was an e-mail to someone. Called under the account's member lock, so two invitations never both take
// the last place.
func sentToday(tx *gorm.DB, accountID int64, now time.Time) error {
	var times []time.Time
	if err := tx.Model(&models.Invitation{}).Where("account_id = ? AND created_at > ?", accountID, now.Add(-SendWindow)).
		Order("created_at DESC").Limit(MaxSentPerDay).Pluck("created_at", &times).Error; err != nil {
		return fmt.Errorf("count the invitations sent today by account %d: %w", accountID, err)
	}
	if len(times) < MaxSentPerDay {
		return nil
	}
	// The oldest of the newest MaxSentPerDay leaves the window first: then one more fits.
	return &TooManySent{Sent: int64(len(times)), Next: times[len(times)-1].Add(SendWindow)}
}

// Invite invites an address to the member's account with a role and e-mails the link (valid
// InvitationTTL). An earlier pending invitation to the same address is replaced: only the newest link
// works. Refused: a role that may not manage members (*Refused), a role the member may not grant (an
// admin inviting an owner or billing: *Refused, see Grantable),
// an address that is a member already, too many pending or too many e-mails to the address (*Invalid),
// MaxSentPerDay reached (*TooManySent). An
// address that signs in to another account is invited as any other (its page says it cannot join).
func (s *Service) Invite(ctx context.Context, by *models.User, email, role string) (*models.Invitation, error) {
	if !ValidRole(role) {
		return nil, &Invalid{Field: "role", Message: "Choose a role from the list."}
	}
	norm, err := accounts.NormalizeEmail(email)
	if err != nil {
		return nil, &Invalid{Field: "email", Message: "Enter an e-mail address such as colleague@example.com."}
	}
	if !by.Verified() {
		return nil, &Invalid{Message: "Confirm your own e-mail address before you invite anyone: the link is on your dashboard."}
	}
	var inv *models.Invitation
	err = s.tx(ctx, by.AccountID, func(tx *gorm.DB) error {
		me, err := actor(tx, by, ManageMembers)
		if err != nil {
			return err
		}
		if !MayGrant(me.AccountRole, role) {
			return &Refused{Action: ManageMembers, Message: "Only an owner can invite an owner or a billing member (billing adds funds and changes the billing settings). " +
				"Invite them as an admin, developer or viewer, or ask an owner."}
		}
		var existing models.User
		if err := tx.Where("email = ?", norm).Limit(1).Find(&existing).Error; err != nil {
			return fmt.Errorf("look up %s: %w", norm, err)
		}
		// Whether the address signs in to another account is not told here: any signed-up user could then
		// probe which addresses have logins. The invitation goes out as to any address (counted by the
		// throttle and the pending cap below); its page, which only the address's owner reads, says why
		// it cannot be accepted. Members of this very account are no secret to who may manage them.
		if existing.ID != 0 && existing.AccountID == me.AccountID && !existing.Removed() {
			return &Invalid{Field: "email", Message: norm + " is already a member of this account. Change their role in the list below."}
		}
		now := s.now()
		var pending int64
		if err := tx.Model(&models.Invitation{}).Where("account_id = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ? AND email <> ?",
			me.AccountID, now, norm).Count(&pending).Error; err != nil {
			return fmt.Errorf("count pending invitations: %w", err)
		}
		if pending >= MaxPending {
			return &Invalid{Message: fmt.Sprintf("This account has %d invitations waiting, the most it may have. Withdraw some first.", pending)}
		}
		if err := sentToday(tx, me.AccountID, now); err != nil {
			return err
		}
		// Counted only for an invitation that is about to go out, so refused attempts spend no one's budget.
		// A limiter outage lets it through: the pending cap still bounds an account.
		if s.Notices != nil {
			if ok, wait, err := s.Notices.Allow(ctx, norm); err == nil && !ok {
				return &Invalid{Field: "email", Message: fmt.Sprintf("We e-mailed %s several times in the last minutes. Wait %s, then send the invitation again.",
					norm, (&auth.ThrottledError{RetryAfter: wait}).Wait())}
			}
		}
		if err := tx.Model(&models.Invitation{}).Where("account_id = ? AND email = ? AND accepted_at IS NULL AND revoked_at IS NULL", me.AccountID, norm).
			Update("revoked_at", now).Error; err != nil {
			return fmt.Errorf("replace earlier invitations to %s: %w", norm, err)
		}
		raw := ids.NewToken(43)
		inv = &models.Invitation{AccountID: me.AccountID, Email: norm, Role: role, TokenHash: hashToken(raw), InvitedBy: me.ID,
			CreatedAt: now, ExpiresAt: now.Add(InvitationTTL)}
		if err := tx.Create(inv).Error; err != nil {
			return fmt.Errorf("create invitation: %w", err)
		}
		var acct models.Account
		if err := tx.Select("id", "name").Take(&acct, me.AccountID).Error; err != nil {
			return fmt.Errorf("read account %d: %w", me.AccountID, err)
		}
		return s.Notify.Invitation(tx, norm, me.Email, acct.Name, role, Describe(role), s.BaseURL+"/invite?token="+raw, inv.ExpiresAt)
	})
	if err != nil {
		return nil, err
	}
	inv.InviterEmail = by.Email
	return inv, nil
}

// Invitation is an invitation as its link's page shows it.
type Invitation struct {
	models.Invitation
	AccountName  string
	InviterEmail string
	// Elsewhere is set when the address already signs in to another account (as a current member): the
	// invitation cannot be accepted with it (one login belongs to one account). An address removed from
	// another account is not Elsewhere: accepting moves it here.
	Elsewhere bool
	// Member is set when the address is already a current member of the account.
	Member bool
	// Lapsed is set when whoever sent it may no longer give its role in the account (removed, left,
	// demoted): the link does not work, and accepting it withdraws it.
	Lapsed bool
}

// Peek reads the invitation of a link without spending it: ErrBadInvitation when the link does not work
// (a lapsed one — its sender may no longer give its role — is returned with Lapsed set).
func (s *Service) Peek(ctx context.Context, raw string) (*Invitation, error) {
	if raw == "" || len(raw) > 100 {
		return nil, ErrBadInvitation
	}
	var inv models.Invitation
	err := s.DB.R.WithContext(ctx).Where("token_hash = ?", hashToken(raw)).Limit(1).Find(&inv).Error
	if err != nil {
		return nil, fmt.Errorf("read invitation: %w", err)
	}
	if inv.ID == 0 || !inv.Pending(s.now()) {
		return nil, ErrBadInvitation
	}
	out := &Invitation{Invitation: inv}
	var acct models.Account
	if err := s.DB.R.WithContext(ctx).Take(&acct, inv.AccountID).Error; err != nil {
		return nil, fmt.Errorf("read account %d: %w", inv.AccountID, err)
	}
	if acct.Disabled() {
		return nil, ErrBadInvitation
	}
	out.AccountName = acct.Name
	var inviter, existing models.User
	if err := s.DB.R.WithContext(ctx).Select("id", "email", "account_id", "account_role", "removed_at").Where("id = ?", inv.InvitedBy).
		Limit(1).Find(&inviter).Error; err != nil {
		return nil, fmt.Errorf("read the inviter: %w", err)
	}
	out.Lapsed = !mayStillGrant(&inviter, &inv)
	out.InviterEmail = inviter.Email
	if err := s.DB.R.WithContext(ctx).Where("email = ?", inv.Email).Limit(1).Find(&existing).Error; err != nil {
		return nil, fmt.Errorf("look up %s: %w", inv.Email, err)
	}
	out.Elsewhere = existing.ID != 0 && existing.AccountID != inv.AccountID && !existing.Removed()
	out.Member = existing.ID != 0 && existing.AccountID == inv.AccountID && !existing.Removed()
	return out, nil
}

// Acceptance is the invitation page's form.
type Acceptance struct {
	Token       string
	Password    string
	AcceptTerms bool
}

// Accept spends an invitation: the invited person becomes a member with the invitation's role, with the
// password they chose and their address verified (the link reached it). A member removed earlier comes
// back (their row, and the history that names it, is theirs again); one removed from another account
// moves here with their row. Refused: a dead link
// (ErrBadInvitation), an address that signs in to another account or is already a member (*Invalid), a
// weak password or the terms not accepted (field errors, nothing spent).
func (s *Service) Accept(ctx context.Context, in Acceptance) (*models.User, auth.FieldErrors, error) {
	inv, err := s.Peek(ctx, in.Token)
	if err != nil {
		return nil, nil, err
	}
	if inv.Lapsed {
		return nil, nil, s.withdrawLapsed(ctx, inv)
	}
	if inv.Elsewhere || inv.Member {
		return nil, nil, s.conflict(inv)
	}
	errs := auth.FieldErrors{}
	if msg := auth.CheckPassword(in.Password, inv.Email); msg != "" {
		errs["password"] = msg
	}
	if !in.AcceptTerms {
		errs["terms"] = "Accept the terms of service and the privacy notice to join."
	}
	if len(errs) > 0 {
		return nil, errs, nil
	}
	hash, err := accounts.HashPassword(in.Password)
	if err != nil {
		return nil, nil, err
	}
	var u models.User
	lapsed := false
	err = s.tx(ctx, inv.AccountID, func(tx *gorm.DB) error {
		now := s.now()
		// The invitation carries its sender's authority, checked now, under the account's member lock
		// that removing or demoting them takes too: a sender removed, demoted or moved since the page was
		// read (or before withdrawals on removal existed) grants nothing. The invitation is withdrawn.
		var inviter models.User
		if err := tx.Select("id", "account_id", "account_role", "removed_at").Where("id = ?", inv.InvitedBy).Limit(1).Find(&inviter).Error; err != nil {
			return fmt.Errorf("read the inviter: %w", err)
		}
		if !mayStillGrant(&inviter, &inv.Invitation) {
			lapsed = true
			return tx.Model(&models.Invitation{}).Where("id = ? AND accepted_at IS NULL AND revoked_at IS NULL", inv.ID).Update("revoked_at", now).Error
		}
		var spent []models.Invitation
		if err := tx.Raw(`UPDATE invitations SET accepted_at = ? WHERE token_hash = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ?
			RETURNING id, account_id, email, role`, now, hashToken(in.Token), now).Scan(&spent).Error; err != nil {
			return fmt.Errorf("spend invitation: %w", err)
		}
		if len(spent) == 0 {
			return ErrBadInvitation // accepted, withdrawn or expired since the page was read
		}
		got := spent[0]
		if err := tx.Where("email = ?", got.Email).Limit(1).Find(&u).Error; err != nil {
			return fmt.Errorf("look up %s: %w", got.Email, err)
		}
		switch {
		case u.ID == 0:
			u = models.User{AccountID: got.AccountID, Email: got.Email, PasswordHash: hash, Role: models.RoleMember, AccountRole: got.Role,
				EmailVerifiedAt: &now, TermsAcceptedAt: &now, CreatedAt: now, UpdatedAt: now}
			if err := tx.Create(&u).Error; err != nil {
				if db.IsUniqueViolation(err) {
					return &Invalid{Message: got.Email + " signed up a moment ago: one login belongs to one account, so it cannot join this one."}
				}
				return fmt.Errorf("create member %s: %w", got.Email, err)
			}
		case !u.Removed():
			inv.Elsewhere, inv.Member = u.AccountID != got.AccountID, u.AccountID == got.AccountID
			return s.conflict(inv)
		default:
			// A former member: of this account, back; or removed from another account, moved here. Their
			// sessions and e-mailed links ended with the removal; the history that names their id (the
			// other account's ledger actors, its keys' created_by, top-ups) keeps naming them by e-mail.
			updates := map[string]any{"account_id": got.AccountID, "removed_at": nil, "account_role": got.Role, "password_hash": hash,
				"terms_accepted_at": now, "updated_at": now}
			if u.EmailVerifiedAt == nil {
				updates["email_verified_at"] = now
			}
			if err := tx.Model(&models.User{}).Where("id = ?", u.ID).Updates(updates).Error; err != nil {
				return fmt.Errorf("bring back member %s: %w", got.Email, err)
			}
			id := u.ID
			u = models.User{}
			if err := tx.Take(&u, id).Error; err != nil {
				return fmt.Errorf("read member %s: %w", got.Email, err)
			}
		}
		return tx.Model(&models.Invitation{}).Where("id = ?", got.ID).Update("accepted_by", u.ID).Error
	})
	if err != nil {
		return nil, nil, err
	}
	if lapsed {
		return nil, nil, ErrBadInvitation
	}
	return &u, nil, nil
}

// withdrawLapsed withdraws an invitation whose sender may no longer give its role, found when it was
// about to be accepted, and answers ErrBadInvitation.
func (s *Service) withdrawLapsed(ctx context.Context, inv *Invitation) error {
	err := s.tx(ctx, inv.AccountID, func(tx *gorm.DB) error {
		return tx.Model(&models.Invitation{}).Where("id = ? AND accepted_at IS NULL AND revoked_at IS NULL", inv.ID).Update("revoked_at", s.now()).Error
	})
	if err != nil {
		return fmt.Errorf("withdraw lapsed invitation %d: %w", inv.ID, err)
	}
	return ErrBadInvitation
}

// mayStillGrant reports whether the member who sent an invitation may still give its role in its
// account: a current member there whose role grants it.
func mayStillGrant(inviter *models.User, inv *models.Invitation) bool {
	return inviter.ID != 0 && inviter.AccountID == inv.AccountID && !inviter.Removed() && MayGrant(inviter.AccountRole, inv.Role)
}

// withdrawSentBy withdraws, in tx, the pending invitations u sent that role — u's role from now on, ""
// when u is no longer a member — may not give: an invitation carries its sender's authority and ends
// with it. It returns how many it withdrew.
func (s *Service) withdrawSentBy(tx *gorm.DB, u *models.User, role string) (int64, error) {
	q := tx.Model(&models.Invitation{}).Where("account_id = ? AND invited_by = ? AND accepted_at IS NULL AND revoked_at IS NULL", u.AccountID, u.ID)
	if keep := Grantable(role); len(keep) > 0 {
		q = q.Where("role NOT IN ?", keep)
	}
	res := q.Update("revoked_at", s.now())
	if res.Error != nil {
		return 0, fmt.Errorf("withdraw the invitations member %d sent: %w", u.ID, res.Error)
	}
	return res.RowsAffected, nil
}

// conflict is why an invitation cannot be accepted with its address.
func (s *Service) conflict(inv *Invitation) error {
	if inv.Member {
		return &Invalid{Message: inv.Email + " is already a member of this account: sign in instead."}
	}
	return &Invalid{Message: inv.Email + " already signs in to another videogen account, and one login belongs to one account. " +
		"Ask " + inv.InviterEmail + " to invite another address of yours."}
}

// ChangeRole gives a member another role; the pending invitations they sent with a role the new one may
// not give are withdrawn (a demoted admin's admin invitations, all of a developer's). Refused: a role that may not manage members, an admin
// changing an owner's or billing member's role, giving a role not Grantable by admins (owner, billing) or
// changing their own role (*Refused), the last owner demoted (ErrLastOwner).
func (s *Service) ChangeRole(ctx context.Context, by *models.User, userID int64, role string) error {
	if !ValidRole(role) {
		return &Invalid{Field: "role", Message: "Choose a role from the list."}
	}
	return s.tx(ctx, by.AccountID, func(tx *gorm.DB) error {
		me, err := actor(tx, by, ManageMembers)
		if err != nil {
			return err
		}
		target, err := member(tx, me.AccountID, userID)
		if err != nil {
			return err
		}
		if me.AccountRole != models.AccountOwner && (target.AccountRole == models.AccountOwner || role == models.AccountOwner) {
			return &Refused{Action: ManageMembers, Message: "Only an owner can change an owner's role or make someone an owner."}
		}
		// An admin moves members only among the roles it may grant: a billing member's role (money powers
		// the admin has not) is the owners' to change, as is making one.
		if !MayGrant(me.AccountRole, role) || !MayGrant(me.AccountRole, target.AccountRole) {
			return &Refused{Action: ManageMembers, Message: "Only an owner can make someone a billing member or change a billing member's role (billing adds funds and changes the billing settings)."}
		}
		if me.AccountRole != models.AccountOwner && target.ID == me.ID {
			return &Refused{Action: ManageMembers, Message: "An admin cannot change their own role. Ask an owner."}
		}
		if target.AccountRole == role {
			return nil
		}
		if target.AccountRole == models.AccountOwner {
			n, err := owners(tx, me.AccountID)
			if err != nil {
				return err
			}
			if n <= 1 {
				return ErrLastOwner
			}
		}
		if err := tx.Model(&models.User{}).Where("id = ?", target.ID).Updates(map[string]any{"account_role": role, "updated_at": s.now()}).Error; err != nil {
			return fmt.Errorf("change the role of member %d: %w", target.ID, err)
		}
		_, err = s.withdrawSentBy(tx, target, role)
		return err
	})
}

// Removal is what removing a member did.
type Removal struct {
	Member      models.User
	RevokedKeys int64 // the member's keys revoked with them (when asked)
}

// Remove takes a member out of the account: they are signed out everywhere at once and sign in no more;
// their unused e-mailed links die, and so do the invitations they sent. The row stays, so the ledger, keys and call log still name them. Their
// API keys belong to the account and keep working, unless revokeKeys asks to revoke the ones they
// created too. Refused: a role that may not manage members, an admin removing an owner (*Refused),
// removing oneself (*Invalid: leave instead), the last owner (ErrLastOwner).
func (s *Service) Remove(ctx context.Context, by *models.User, userID int64, revokeKeys bool) (*Removal, error) {
	out := &Removal{}
	// Lock order: API keys' rows before the account's. A create through a spend-limited key locks the
	// key's row (apikeys.GuardCreate) and then the account's (its backlog and reserve); revoking the
	// member's keys after locking the account would take the two the other way round and deadlock on
	// PostgreSQL. So the keys to revoke are locked first, in id order. (SQLite's single writer needs none.)
	var lockKeys func(tx *gorm.DB) error
	var locked []int64
	if revokeKeys && s.DB.Postgres {
		lockKeys = func(tx *gorm.DB) error {
			ids := []int64{}
			defer func() { locked = ids }()
			if err := tx.Raw("SELECT id FROM api_keys WHERE account_id = ? AND created_by = ? AND revoked_at IS NULL ORDER BY id FOR UPDATE",
				by.AccountID, userID).Scan(&ids).Error; err != nil {
				return fmt.Errorf("lock the keys of member %d: %w", userID, err)
			}
			return nil
		}
	}
	err := s.txAfter(ctx, by.AccountID, lockKeys, func(tx *gorm.DB) error {
		me, err := actor(tx, by, ManageMembers)
		if err != nil {
			return err
		}
		target, err := member(tx, me.AccountID, userID)
		if err != nil {
			return err
		}
		if target.ID == me.ID {
			return &Invalid{Message: "To take yourself out of the account, use “Leave this account”."}
		}
		if me.AccountRole != models.AccountOwner && target.AccountRole == models.AccountOwner {
			return &Refused{Action: ManageMembers, Message: "Only an owner can remove an owner."}
		}
		if target.AccountRole == models.AccountOwner {
			if n, err := owners(tx, me.AccountID); err != nil {
				return err
			} else if n <= 1 {
				return ErrLastOwner
			}
		}
		if err := s.removeIn(tx, target); err != nil {
			return err
		}
		if revokeKeys {
			q := tx.Model(&models.APIKey{}).Where("account_id = ? AND created_by = ? AND revoked_at IS NULL", me.AccountID, target.ID)
			if locked != nil { // PostgreSQL: only the keys locked above (one made since is left, never waited for)
				q = q.Where("id IN ?", append(locked, 0))
			}
			// Revoked by whoever removed the member: the keys page says so.
			res := q.Updates(map[string]any{"revoked_at": s.now(), "revoked_by": me.Email})
			if res.Error != nil {
				return fmt.Errorf("revoke the keys of member %d: %w", target.ID, res.Error)
			}
			out.RevokedKeys = res.RowsAffected
		}
		out.Member = *target
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Leave takes the member out of their own account, as Remove does (their keys stay). Refused for the
// last owner (ErrLastOwner): they make another member an owner first.
func (s *Service) Leave(ctx context.Context, by *models.User) error {
	return s.tx(ctx, by.AccountID, func(tx *gorm.DB) error {
		me, err := member(tx, by.AccountID, by.ID)
		if err != nil {
			return err
		}
		if me.AccountRole == models.AccountOwner {
			if n, err := owners(tx, me.AccountID); err != nil {
				return err
			} else if n <= 1 {
				return ErrLastOwner
			}
		}
		return s.removeIn(tx, me)
	})
}

// removeIn marks a member removed, ends their sessions, spends their unused e-mailed links and withdraws
// the invitations they sent, in tx.
func (s *Service) removeIn(tx *gorm.DB, u *models.User) error {
	now := s.now()
	if err := tx.Model(&models.User{}).Where("id = ?", u.ID).Updates(map[string]any{"removed_at": now, "updated_at": now}).Error; err != nil {
		return fmt.Errorf("remove member %d: %w", u.ID, err)
	}
	if err := tx.Model(&models.Session{}).Where("user_id = ? AND revoked_at IS NULL", u.ID).Update("revoked_at", now).Error; err != nil {
		return fmt.Errorf("end the sessions of member %d: %w", u.ID, err)
	}
	if err := tx.Model(&models.EmailToken{}).Where("user_id = ? AND used_at IS NULL", u.ID).Update("used_at", now).Error; err != nil {
		return fmt.Errorf("spend the links of member %d: %w", u.ID, err)
	}
	_, err := s.withdrawSentBy(tx, u, "")
	return err
}

// Withdraw revokes a pending invitation of the member's account: its link stops working.
func (s *Service) Withdraw(ctx context.Context, by *models.User, invitationID int64) (*models.Invitation, error) {
	var inv models.Invitation
	err := s.tx(ctx, by.AccountID, func(tx *gorm.DB) error {
		me, err := actor(tx, by, ManageMembers)
		if err != nil {
			return err
		}
		now := s.now()
		if err := tx.Where("id = ? AND account_id = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ?", invitationID, me.AccountID, now).
			Limit(1).Find(&inv).Error; err != nil {
			return fmt.Errorf("read invitation %d: %w", invitationID, err)
		}
		if inv.ID == 0 {
			return ErrNoInvitation
		}
		return tx.Model(&models.Invitation{}).Where("id = ?", inv.ID).Update("revoked_at", now).Error
	})
	if err != nil {
		return nil, err
	}
	return &inv, nil
}

// Contacts names, for a refusal, up to three current members of the account who may do the action:
// owners first, then by when they joined.
func Contacts(ctx context.Context, d *db.DB, accountID int64, a Action) ([]string, error) {
	ms, err := models.Members(ctx, d.R, accountID)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if Can(m.AccountRole, a) && len(out) < 3 {
			out = append(out, m.Email)
		}
	}
	return out, nil
}
