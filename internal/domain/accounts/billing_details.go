package accounts

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"videogen/internal/infra/db"
	"videogen/models"
)

// Bounds of the billing details: room for any real company name, a postal address of a few lines and a
// tax id of any country (the longest, with its country prefix, are under 20 characters), not for a
// document pasted into a form.
const (
	MaxBillingName         = 200
	MaxBillingAddress      = 500
	MaxBillingAddressLines = 8
	MaxBillingTaxID        = 40
)

// BillingDetails are what an account prints on its monthly statements, and the zone its calendar periods
// are counted in (docs/usage.md).
type BillingDetails struct {
	Name     string
	Address  string // several lines, "\n" between them
	TaxID    string
	TimeZone string // IANA name; "" is UTC
}

// BillingDetailsOf reads an account's billing details.
func BillingDetailsOf(a *models.Account) BillingDetails {
	return BillingDetails{Name: a.BillingName, Address: a.BillingAddress, TaxID: a.BillingTaxID, TimeZone: a.TimeZone}
}

// FieldErrors are a form's problems, each under its field's name, said so a person can correct them.
type FieldErrors map[string]string

func (e FieldErrors) Error() string {
	parts := make([]string, 0, len(e))
	for field, msg := range e {
		parts = append(parts, field+": "+msg)
	}
	return strings.Join(parts, "; ")
}

// Clean trims the details as typed (each address line, blank lines dropped, Windows line ends) and checks
// them; the errors are keyed by the form's field names: billing_name, billing_address, tax_id, time_zone.
func (b BillingDetails) Clean() (BillingDetails, FieldErrors) {
	errs := FieldErrors{}
	b.Name = strings.TrimSpace(b.Name)
	b.TaxID = strings.TrimSpace(b.TaxID)
	b.TimeZone = strings.TrimSpace(b.TimeZone)
	var lines []string
	for _, line := range strings.Split(strings.ReplaceAll(b.Address, "\r\n", "\n"), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			lines = append(lines, line)
		}
	}
	b.Address = strings.Join(lines, "\n")

	switch {
	case !printable(b.Name, false):
		errs["billing_name"] = "Use letters, digits and punctuation only."
	case utf8.RuneCountInString(b.Name) > MaxBillingName:
		errs["billing_name"] = fmt.Sprintf("At most %d characters (this has %d).", MaxBillingName, utf8.RuneCountInString(b.Name))
	}
	switch {
	case !printable(b.Address, true):
		errs["billing_address"] = "Use letters, digits and punctuation only, one line of the address per line."
	case utf8.RuneCountInString(b.Address) > MaxBillingAddress:
		errs["billing_address"] = fmt.Sprintf("At most %d characters (this has %d).", MaxBillingAddress, utf8.RuneCountInString(b.Address))
	case len(lines) > MaxBillingAddressLines:
		errs["billing_address"] = fmt.Sprintf("At most %d lines (this has %d).", MaxBillingAddressLines, len(lines))
	}
	switch {
	case !printable(b.TaxID, false):
		errs["tax_id"] = "Use letters, digits and punctuation only."
	case utf8.RuneCountInString(b.TaxID) > MaxBillingTaxID:
		errs["tax_id"] = fmt.Sprintf("At most %d characters, such as DE123456789 (this has %d).", MaxBillingTaxID, utf8.RuneCountInString(b.TaxID))
	}
	if b.TimeZone == "UTC" {
		b.TimeZone = ""
	}
	if _, err := time.LoadLocation(b.TimeZone); err != nil || len(b.TimeZone) > 64 || b.TimeZone == "Local" {
		errs["time_zone"] = "Choose a time zone from the list."
	}
	if len(errs) > 0 {
		return b, errs
	}
	return b, nil
}

// printable reports whether s is valid text without control characters (newlines too when multiline).
func printable(s string, multiline bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsControl(r) && !(multiline && r == '\n') })
}

// SetBillingDetails checks and stores an account's billing details and time zone in one update. It
// returns FieldErrors, storing nothing, when a field is refused.
func SetBillingDetails(ctx context.Context, d *db.DB, accountID int64, b BillingDetails, now time.Time) (BillingDetails, error) {
	b, errs := b.Clean()
	if errs != nil {
		return b, errs
	}
	err := d.W.WithContext(ctx).Model(&models.Account{}).Where("id = ?", accountID).Updates(map[string]any{
		"billing_name": b.Name, "billing_address": b.Address, "billing_tax_id": b.TaxID, "time_zone": b.TimeZone, "updated_at": now}).Error
	if err != nil {
		return b, fmt.Errorf("save the billing details of account %d: %w", accountID, err)
	}
	return b, nil
}

// Get reads an account.
func Get(ctx context.Context, d *db.DB, accountID int64) (*models.Account, error) {
	var a models.Account
	if err := d.R.WithContext(ctx).Take(&a, accountID).Error; err != nil {
		return nil, fmt.Errorf("read account %d: %w", accountID, err)
	}
	return &a, nil
}
