package accounts

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"videogen/internal/infra/db"
	"videogen/models"
)

// MaxAccountName is the longest name an account may have, in characters.
const MaxAccountName = 80

// ErrBadAccountName: a name that is empty, too long, or not printable text.
var ErrBadAccountName = errors.New("account name refused")

// DefaultName is the name an account gets when its owner gives none at sign-up: the domain of their
// e-mail address ("acme.com" for alice@acme.com), which names the organisation more often than not.
func DefaultName(email string) string {
	if _, domain, ok := strings.Cut(email, "@"); ok && domain != "" {
		return domain
	}
	return email
}

// CleanName trims a name as typed and checks it: 1 to MaxAccountName printable characters on one line.
func CleanName(name string) (string, error) {
	name = strings.Join(strings.Fields(name), " ")
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		return "", fmt.Errorf("%w: give the account a name", ErrBadAccountName)
	case n > MaxAccountName:
		return "", fmt.Errorf("%w: at most %d characters (this has %d)", ErrBadAccountName, MaxAccountName, n)
	case !printable(name, false):
		return "", fmt.Errorf("%w: use letters, digits and punctuation only", ErrBadAccountName)
	}
	return name, nil
}

// Rename sets an account's name (the console's header, invitations, statements and staff pages show it).
func Rename(ctx context.Context, d *db.DB, accountID int64, name string, now time.Time) (string, error) {
	name, err := CleanName(name)
	if err != nil {
		return "", err
	}
	err = d.W.WithContext(ctx).Model(&models.Account{}).Where("id = ?", accountID).
		Updates(map[string]any{"name": name, "updated_at": now}).Error
	if err != nil {
		return "", fmt.Errorf("rename account %d: %w", accountID, err)
	}
	return name, nil
}

// NameProblem words a refused name for a form ("Give the account a name."): CleanName's reason as a
// sentence.
func NameProblem(err error) string {
	_, why, ok := strings.Cut(err.Error(), ": ")
	if !ok || why == "" {
		return "Give the account a name of at most 80 characters."
	}
	return strings.ToUpper(why[:1]) + why[1:] + "."
}

// RequireSecondFactor sets whether every member of the account must sign in with two steps.
func RequireSecondFactor(ctx context.Context, d *db.DB, accountID int64, on bool, now time.Time) error {
	err := d.W.WithContext(ctx).Model(&models.Account{}).Where("id = ?", accountID).
		Updates(map[string]any{"require_second_factor": on, "updated_at": now}).Error
	if err != nil {
		return fmt.Errorf("set the two-step requirement of account %d: %w", accountID, err)
	}
	return nil
}
