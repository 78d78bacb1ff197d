package models

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Account roles: what a member may do in their account (internal/domain/members decides, docs/members.md).
const (
	AccountOwner     = "owner"
	AccountAdmin     = "admin"
	AccountDeveloper = "developer"
	AccountBilling   = "billing"
	AccountViewer    = "viewer"
)

// Invitation is an e-mailed invitation to join an account with a role. The link's token is stored only as
// its hash. It is pending until accepted, revoked (a newer invitation to the same address revokes it too)
// or expired.
type Invitation struct {
	ID         int64
	AccountID  int64
	Email      string
	Role       string
	TokenHash  string
	InvitedBy  int64
	CreatedAt  time.Time
	ExpiresAt  time.Time
	AcceptedAt *time.Time
	AcceptedBy *int64
	RevokedAt  *time.Time
	// InviterEmail is who sent it, filled in for the pages that show it; not a column.
	InviterEmail string `gorm:"-"`
}

// Pending reports whether the invitation can still be accepted at now.
func (i *Invitation) Pending(now time.Time) bool {
	return i.AcceptedAt == nil && i.RevokedAt == nil && now.Before(i.ExpiresAt)
}

// Members returns an account's current members (not removed), owners first, then by when they joined.
func Members(ctx context.Context, db *gorm.DB, accountID int64) ([]User, error) {
	var out []User
	err := db.WithContext(ctx).Where("account_id = ? AND removed_at IS NULL", accountID).
		Order("CASE account_role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'developer' THEN 2 WHEN 'billing' THEN 3 ELSE 4 END, id").
		Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read the members of account %d: %w", accountID, err)
	}
	return out, nil
}

// FormerMembers returns the members removed from an account (or who left it), the latest first.
func FormerMembers(ctx context.Context, db *gorm.DB, accountID int64, limit int) ([]User, error) {
	var out []User
	err := db.WithContext(ctx).Where("account_id = ? AND removed_at IS NOT NULL", accountID).Order("removed_at DESC, id DESC").
		Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read the former members of account %d: %w", accountID, err)
	}
	return out, nil
}

// PendingInvitations returns an account's invitations that can still be accepted at now, newest first,
// each with the e-mail of who sent it.
func PendingInvitations(ctx context.Context, db *gorm.DB, accountID int64, now time.Time) ([]Invitation, error) {
	var out []Invitation
	err := db.WithContext(ctx).Where("account_id = ? AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > ?", accountID, now).
		Order("created_at DESC, id DESC").Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read the invitations of account %d: %w", accountID, err)
	}
	ids := make([]int64, 0, len(out))
	for _, in := range out {
		ids = append(ids, in.InvitedBy)
	}
	emails, err := userEmails(ctx, db, ids)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].InviterEmail = emails[out[i].InvitedBy]
	}
	return out, nil
}

// userEmails maps user ids to their e-mails.
func userEmails(ctx context.Context, db *gorm.DB, ids []int64) (map[int64]string, error) {
	out := map[int64]string{}
	if len(ids) == 0 {
		return out, nil
	}
	var rows []User
	if err := db.WithContext(ctx).Select("id", "email").Where("id IN ?", uniq(ids)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("read members' e-mails: %w", err)
	}
	for _, u := range rows {
		out[u.ID] = u.Email
	}
	return out, nil
}

func uniq(ids []int64) []int64 {
	seen := map[int64]bool{}
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// KeysWithMembers fills in the e-mail of the member who created each key.
func KeysWithMembers(ctx context.Context, db *gorm.DB, keys []APIKey) error {
	var ids []int64
	for _, k := range keys {
		if k.CreatedBy != nil {
			ids = append(ids, *k.CreatedBy)
		}
	}
	emails, err := userEmails(ctx, db, ids)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if k.CreatedBy != nil {
			keys[i].CreatorEmail = emails[*k.CreatedBy]
		}
	}
	return nil
}

// CallsWithMembers fills in, for each call of an account, the e-mail of the member who created its key.
func CallsWithMembers(ctx context.Context, db *gorm.DB, accountID int64, calls []CallLog) error {
	var prefixes []string
	for _, c := range calls {
		if c.KeyPrefix != "" {
			prefixes = append(prefixes, c.KeyPrefix)
		}
	}
	if len(prefixes) == 0 {
		return nil
	}
	var rows []struct {
		Prefix string
		Email  string
	}
	err := db.WithContext(ctx).Table("api_keys").Select("api_keys.prefix, users.email").
		Joins("JOIN users ON users.id = api_keys.created_by").
		Where("api_keys.account_id = ? AND api_keys.prefix IN ?", accountID, prefixes).Scan(&rows).Error
	if err != nil {
		return fmt.Errorf("read the members of account %d's keys: %w", accountID, err)
	}
	byPrefix := map[string]string{}
	for _, r := range rows {
		byPrefix[r.Prefix] = r.Email
	}
	for i, c := range calls {
		calls[i].Member = byPrefix[c.KeyPrefix]
	}
	return nil
}

// LedgerWithMembers fills in, for each ledger entry of an account, the member behind it: for funds added
// in the console the member who added them (actor "user:<id>"), for a card top-up the member who started
// the payment, for a video's reserve, charge or refund the member who created the key that made it.
// Entries no member made (Stripe refunds, auto-recharge, support's adjustments) stay blank.
func LedgerWithMembers(ctx context.Context, db *gorm.DB, accountID int64, entries []LedgerEntry) error {
	var userIDs []int64
	var taskIDs, external []string
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e.Actor, "user:"):
			if id, err := strconv.ParseInt(strings.TrimPrefix(e.Actor, "user:"), 10, 64); err == nil {
				userIDs = append(userIDs, id)
			}
		case e.TaskID != nil:
			taskIDs = append(taskIDs, *e.TaskID)
		case e.Kind == KindTopup && e.ExternalID != nil:
			external = append(external, *e.ExternalID)
		}
	}
	emails, err := userEmails(ctx, db, userIDs)
	if err != nil {
		return err
	}
	byTask := map[string]string{}
	if len(taskIDs) > 0 {
		var rows []struct {
			ID        string
			AccountID int64
			Email     string
		}
		// By the tasks' ids alone, the account checked here: with account_id = ? in the query too, the
		// statement's generic plan (PostgreSQL's, after a few runs) read the account's tasks by its index and
		// filtered the ids — fine for an account of a hundred tasks, a third of a second for one of 75,000.
		err := db.WithContext(ctx).Table("tasks").Select("tasks.id, tasks.account_id, users.email").
			Joins("JOIN api_keys ON api_keys.id = tasks.api_key_id").Joins("JOIN users ON users.id = api_keys.created_by").
			Where("tasks.id IN ?", taskIDs).Scan(&rows).Error
		if err != nil {
			return fmt.Errorf("read the members behind account %d's tasks: %w", accountID, err)
		}
		for _, r := range rows {
			if r.AccountID == accountID {
				byTask[r.ID] = r.Email
			}
		}
	}
	byPayment := map[string]string{}
	if len(external) > 0 {
		var rows []struct {
			StripeSessionID       *string
			StripePaymentIntentID *string
			Email                 string
		}
		err := db.WithContext(ctx).Table("topups").Select("topups.stripe_session_id, topups.stripe_payment_intent_id, users.email").
			Joins("JOIN users ON users.id = topups.user_id").
			Where("topups.account_id = ? AND (topups.stripe_session_id IN ? OR topups.stripe_payment_intent_id IN ?)", accountID, external, external).
			Scan(&rows).Error
		if err != nil {
			return fmt.Errorf("read the members behind account %d's top-ups: %w", accountID, err)
		}
		for _, r := range rows {
			for _, id := range []*string{r.StripeSessionID, r.StripePaymentIntentID} {
				if id != nil {
					byPayment[*id] = r.Email
				}
			}
		}
	}
	for i, e := range entries {
		switch {
		case strings.HasPrefix(e.Actor, "user:"):
			id, _ := strconv.ParseInt(strings.TrimPrefix(e.Actor, "user:"), 10, 64)
			entries[i].Member = emails[id]
		case e.TaskID != nil:
			entries[i].Member = byTask[*e.TaskID]
		case e.Kind == KindTopup && e.ExternalID != nil:
			entries[i].Member = byPayment[*e.ExternalID]
		}
	}
	return nil
}
