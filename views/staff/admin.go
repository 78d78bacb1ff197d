package staff

import (
	"time"
	"videogen/views"

	"videogen/internal/staff/admin"
	"videogen/models"
)

// AdjustPage is an admin's credit or debit of one account, on its own page: shown again with what is
// wrong (422), or stated in full to be confirmed before any money moves.
type AdjustPage struct {
	Account models.Account
	Owner   string
	Base    string // the account's staff pages: "/support/accounts/{id}"
	Form    AdjustForm
	// Set when the input is valid and the admin is asked to confirm.
	Confirm   bool
	Amount    int64 // signed: what available changes by
	Available int64 // now
	After     int64 // once applied
	Negative  bool  // After is below zero: the admin must tick allow_negative
	// AllowNegative is the box as the admin left it.
	AllowNegative bool
}

// AccountStatePage is disabling or re-enabling an account, on its own page: shown again with what is
// wrong (422), or, for a disable, what it will do, to be confirmed.
type AccountStatePage struct {
	Account models.Account
	Owner   string
	Base    string
	Action  string // "disable" or "enable"
	Reason  string
	Error   string
	Plan    *admin.DisablePlan // set with Confirm, for a disable
	Confirm bool
}

// AdminMessage is an admin action refused as a whole (the last admin, a vanished user), with the way back.
type AdminMessage struct {
	Title, Message  string
	Back, BackLabel string
}

// PricesPage is the price table as an admin edits it: the current prices with who set them, the form
// (shown again with what is wrong), or the changes stated in full to be confirmed.
type PricesPage struct {
	Rows    []PriceEdit
	Reason  string
	Error   string
	Confirm bool
	Changes []PriceChangeRow // set with Confirm
}

// PriceEdit is one model's row of the price form.
type PriceEdit struct {
	Model     string
	Current   int64 // micro-dollars per second, stored now (or as the admin saw it, on a confirmation)
	UpdatedAt time.Time
	UpdatedBy string
	Typed     string // the new price as typed, dollars per second
	Error     string
}

// PriceChangeRow is one model's price before and after.
type PriceChangeRow struct {
	Model    string
	Old, New int64
}

// staffBase is where an account's staff pages are.
func staffBase(a models.Account) string { return "/support/accounts/" + views.Int64(a.ID) }

// adjustOf is the adjustment form as last typed, or an empty one.
func adjustOf(f *AdjustForm) AdjustForm {
	if f == nil {
		return AdjustForm{}
	}
	return *f
}

// adjustHeadline says what an adjustment does in one line: "Credit $25.00 to account 42 (owner@x)".
func adjustHeadline(p AdjustPage) string {
	who := " account " + views.Int64(p.Account.ID) + " (" + p.Owner + ")"
	if p.Amount < 0 {
		return "Debit " + views.Money(-p.Amount) + " from" + who
	}
	return "Credit " + views.Money(p.Amount) + " to" + who
}

// adjustButton is the confirming button's label: "Credit $25.00".
func adjustButton(p AdjustPage) string {
	if p.Amount < 0 {
		return "Debit " + views.Money(-p.Amount)
	}
	return "Credit " + views.Money(p.Amount)
}

func accountStateTitle(p AccountStatePage) string {
	if p.Action == "enable" {
		return "Re-enable account " + views.Int64(p.Account.ID)
	}
	return "Disable account " + views.Int64(p.Account.ID)
}

// priceSetBy says when and by whom a price was set ("seeded" for the default).
func priceSetBy(v views.Viewer, r PriceEdit) string {
	by := r.UpdatedBy
	if by == "" {
		by = "default price"
	}
	return v.When(r.UpdatedAt) + " · " + by
}
