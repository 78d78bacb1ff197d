// Package accounts creates and finds users and the accounts (tenants) they belong to.
package accounts

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"videogen/internal/infra/db"
	"videogen/models"
)

// ErrEmailTaken is returned when a user with the e-mail exists.
var ErrEmailTaken = errors.New("a user with this e-mail already exists")

// ErrNoSuchUser is returned when no user has the e-mail.
var ErrNoSuchUser = errors.New("no user with this e-mail")

// NormalizeEmail checks an address and returns it lower-cased, the form it is stored and looked up in.
func NormalizeEmail(email string) (string, error) {
	// RFC 5321 caps an address at 254 octets; anything longer, or not text, is no address.
	if len(email) > 254 || !utf8.ValidString(email) || strings.ContainsFunc(email, unicode.IsControl) {
		return "", fmt.Errorf("%q is not an e-mail address", truncate(email))
	}
	addr, err := mail.ParseAddress(strings.TrimSpace(email))
	if err != nil || addr.Address != strings.TrimSpace(email) {
		return "", fmt.Errorf("%q is not an e-mail address", email)
	}
	return strings.ToLower(addr.Address), nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return strings.ToValidUTF8(s[:40], "") + "…"
	}
	return s
}

// NewUser describes a user to create.
type NewUser struct {
	Email    string
	Password string // empty: the user cannot sign in with a password until they reset it
	// PasswordHash, when set, is used instead of hashing Password (the sign-up form hashes early).
	PasswordHash string
	Role         string
	Verified     bool
	// TermsAcceptedAt records when the person accepted the terms (the sign-up form); nil for operators'
	// users.
	TermsAcceptedAt *time.Time
	// At is when the user is created, by the caller's clock (zero: now).
	At time.Time
	// AccountName names the new account (cleaned by CleanName); "" gives it DefaultName(Email).
	AccountName string
}

// Create makes a user and the account it owns (the user is its owner), in one transaction.
func Create(ctx context.Context, d *db.DB, n NewUser) (*models.User, error) {
	var u *models.User
	err := d.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		u, err = CreateIn(tx, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// CreateIn makes a user and the account it owns inside tx, so that what else the caller writes (a sign-up's
// verification link and its e-mail) commits with them or not at all.
func CreateIn(tx *gorm.DB, n NewUser) (*models.User, error) {
	email, err := NormalizeEmail(n.Email)
	if err != nil {
		return nil, err
	}
	role := n.Role
	if role == "" {
		role = models.RoleMember
	}
	if role != models.RoleMember && role != models.RoleSupport && role != models.RoleAdmin {
		return nil, fmt.Errorf("role must be member, support or admin, not %q", role)
	}
	hash := n.PasswordHash
	if hash == "" && n.Password != "" {
		if hash, err = HashPassword(n.Password); err != nil {
			return nil, err
		}
	}
	now := n.At.UTC().Truncate(time.Microsecond)
	if n.At.IsZero() {
		now = db.Now()
	}
	// The first user of a new account is its owner (docs/members.md); others join it by invitation.
	u := &models.User{Email: email, PasswordHash: hash, Role: role, AccountRole: models.AccountOwner, TermsAcceptedAt: n.TermsAcceptedAt,
		CreatedAt: now, UpdatedAt: now}
	if n.Verified {
		u.EmailVerifiedAt = &now
	}
	name := DefaultName(email)
	if n.AccountName != "" {
		if name, err = CleanName(n.AccountName); err != nil {
			return nil, err
		}
	}
	acct := &models.Account{Name: name, CreatedAt: now, UpdatedAt: now}
	if err := tx.Create(acct).Error; err != nil {
		return nil, fmt.Errorf("create account: %w", err)
	}
	u.AccountID = acct.ID
	if err := tx.Create(u).Error; err != nil {
		if db.IsUniqueViolation(err) {
			return nil, ErrEmailTaken
		}
		return nil, fmt.Errorf("create user: %w", err)
	}
	return u, nil
}

// ByEmail finds a user by e-mail address.
func ByEmail(ctx context.Context, d *db.DB, email string) (*models.User, error) {
	norm, err := NormalizeEmail(email)
	if err != nil {
		return nil, err
	}
	var u models.User
	err = d.R.WithContext(ctx).Where("email = ?", norm).Take(&u).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("%s: %w", norm, ErrNoSuchUser)
	}
	if err != nil {
		return nil, fmt.Errorf("find user %s: %w", norm, err)
	}
	return &u, nil
}

// ErrBadTimeZone is returned by SetTimeZone for a name that is not an IANA time zone.
var ErrBadTimeZone = errors.New("not a time zone")

// SetTimeZone stores the zone a user's console shows times in; "" means the browser's.
func SetTimeZone(ctx context.Context, d *db.DB, userID int64, zone string, now time.Time) error {
	// "Local" would be the server's zone, which means nothing to the viewer.
	if _, err := time.LoadLocation(zone); err != nil || len(zone) > 64 || zone == "Local" {
		return ErrBadTimeZone
	}
	if err := d.W.WithContext(ctx).Model(&models.User{}).Where("id = ?", userID).Updates(map[string]any{"time_zone": zone, "updated_at": now}).Error; err != nil {
		return fmt.Errorf("save the time zone of user %d: %w", userID, err)
	}
	return nil
}

// Location is the zone an account's calendar periods are counted in: the day or month of a key's spend
// limit and the monthly statement (docs/decisions.md, "The account's time zone"). An account that chose
// none, or whose stored name no longer loads, counts in UTC.
func Location(ctx context.Context, d *db.DB, accountID int64) (*time.Location, error) {
	var zone string
	if err := d.R.WithContext(ctx).Model(&models.Account{}).Where("id = ?", accountID).Pluck("time_zone", &zone).Error; err != nil {
		return nil, fmt.Errorf("read the time zone of account %d: %w", accountID, err)
	}
	return LoadZone(zone), nil
}

// LoadZone turns a stored zone name into a location; "" or a name this machine cannot load is UTC.
func LoadZone(zone string) *time.Location {
	if zone == "" || zone == "Local" {
		return time.UTC
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return time.UTC
	}
	return loc
}

// SetAccountTimeZone stores the zone an account's periods are counted in; "" means UTC.
func SetAccountTimeZone(ctx context.Context, d *db.DB, accountID int64, zone string, now time.Time) error {
	if _, err := time.LoadLocation(zone); err != nil || len(zone) > 64 || zone == "Local" {
		return ErrBadTimeZone
	}
	if err := d.W.WithContext(ctx).Model(&models.Account{}).Where("id = ?", accountID).Updates(map[string]any{"time_zone": zone, "updated_at": now}).Error; err != nil {
		return fmt.Errorf("save the time zone of account %d: %w", accountID, err)
	}
	return nil
}
