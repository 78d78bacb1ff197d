// Package audit records what staff do and what they look at, in an append-only table
// (docs/support.md): every row is inserted once and never changed.
package audit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"videogen/internal/infra/storetext"
	"videogen/models"
)

// Actions. A look is recorded as well as a change: who opened which tenant's data is what an auditor asks.
const (
	ViewAccount = "account.view"
	ViewTask    = "task.view"
	ViewCall    = "call.view"
	ViewLedger  = "ledger.view"
	ViewCalls   = "calls.view"
	ViewTasks   = "tasks.view"
	// ViewWebhooks is a look at an account's webhook endpoints or one endpoint's deliveries.
	ViewWebhooks = "webhooks.view"
	Export       = "calls.export"
	Search       = "search"

	Credit        = "balance.credit"
	Debit         = "balance.debit"
	Disable       = "account.disable"
	Enable        = "account.enable"
	SetPrice      = "price.set"
	GrantRole     = "role.set"
	EnrolTOTP     = "2fa.enrol"
	SecondFactor  = "2fa.pass"
	RecoveryUsed  = "2fa.recovery_code"
	RecoveryReset = "2fa.recovery_codes_new"
	ResetTOTP     = "2fa.reset"
)

// Target types.
const (
	TargetAccount = "account"
	TargetTask    = "task"
	TargetCall    = "call"
	TargetUser    = "user"
	TargetPrice   = "price"
	TargetWebhook = "webhook"
)

// MaxReasonLen is the longest reason of a staff action, in characters.
const MaxReasonLen = 500

// ReasonError says why a staff action's reason cannot be kept, so the staff member can correct it.
type ReasonError struct{ Msg string }

func (e *ReasonError) Error() string { return e.Msg }

// CheckReason returns the reason of a staff action as stored (trimmed), or a *ReasonError: every change
// staff make says why, in a line of plain text, kept in the audit log (and, for money, in the ledger).
func CheckReason(reason string) (string, error) {
	reason = strings.TrimSpace(reason)
	switch {
	case reason == "":
		return "", &ReasonError{Msg: "Give a reason: it is kept in the ledger and the audit log."}
	case !utf8.ValidString(reason) || strings.ContainsFunc(reason, func(r rune) bool { return unicode.IsControl(r) && r != '\t' }):
		return "", &ReasonError{Msg: "The reason must be plain text on one line."}
	case utf8.RuneCountInString(reason) > MaxReasonLen:
		return "", &ReasonError{Msg: fmt.Sprintf("The reason is longer than %d characters.", MaxReasonLen)}
	}
	return reason, nil
}

// Actor is who acts: a signed-in staff member, or the command line.
type Actor struct {
	UserID *int64
	Name   string // the staff member's e-mail, or "cli"
	IP     string
}

// CLI is the actor of `videogen` commands run by an operator.
var CLI = Actor{Name: "cli"}

// StaffActor is a signed-in staff member acting from an address.
func StaffActor(u *models.User, ip string) Actor {
	id := u.ID
	return Actor{UserID: &id, Name: u.Email, IP: ip}
}

// Entry is what was done, to what.
type Entry struct {
	Action     string
	TargetType string
	TargetID   string
	AccountID  int64 // 0: no tenant concerned
	Reason     string
	Detail     string
}

// Record inserts one row with tx (pass the transaction of the change it records, so both or neither
// happen; or a plain handle for a look).
func Record(ctx context.Context, tx *gorm.DB, now time.Time, who Actor, e Entry) error {
	row := models.AuditEntry{At: now.UTC(), ActorUserID: who.UserID, Actor: who.Name, Action: e.Action,
		TargetType: e.TargetType, TargetID: clip(e.TargetID, 200), Reason: clip(e.Reason, 1000), IP: who.IP, Detail: clip(e.Detail, 2000)}
	if e.AccountID != 0 {
		id := e.AccountID
		row.AccountID = &id
	}
	if err := tx.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("audit %s of %s %s: %w", e.Action, e.TargetType, e.TargetID, err)
	}
	return nil
}

func clip(s string, n int) string {
	out, _ := storetext.Clip(s, n)
	return out
}

// Filter narrows the log an admin reads.
type Filter struct {
	Actor     string // e-mail (or "cli"), exact
	Action    string // exact, or a prefix ending in "." ("balance.")
	AccountID int64
	From, To  *time.Time
}

// Page returns the filtered log newest first, older than beforeID when it is set, and whether more follow.
func Page(ctx context.Context, db *gorm.DB, f Filter, beforeID int64, limit int) ([]models.AuditEntry, bool, error) {
	q := db.WithContext(ctx).Model(&models.AuditEntry{})
	if f.Actor != "" {
		q = q.Where("actor = ?", f.Actor)
	}
	if strings.HasSuffix(f.Action, ".") {
		esc := storetext.EscapeLike(f.Action)
		q = q.Where(`action LIKE ? ESCAPE '\'`, esc+"%")
	} else if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if f.AccountID != 0 {
		q = q.Where("account_id = ?", f.AccountID)
	}
	if f.From != nil {
		q = q.Where("at >= ?", *f.From)
	}
	if f.To != nil {
		q = q.Where("at < ?", *f.To)
	}
	if beforeID > 0 {
		q = q.Where("id < ?", beforeID)
	}
	var out []models.AuditEntry
	if err := q.Order("id DESC").Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, false, fmt.Errorf("read audit log: %w", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// AccountRef is the id of an account as a target.
func AccountRef(id int64) string { return strconv.FormatInt(id, 10) }
