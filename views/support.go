package views

import (
	"fmt"

	"videogen/models"
)

// StaffContext is set when a staff member looks at a tenant's page: whose account it is, and where its
// pages are. The customer's own page components render it, with a banner saying whose data this is.
type StaffContext struct {
	Account    models.Account
	OwnerEmail string
	Base       string // "/support/accounts/{id}"
	Admin      bool   // the viewer may change things (admin forms are shown)
}

// StaffAccountPage is one tenant as staff see it.
type StaffAccountPage struct {
	Account models.Account
	Users   []models.User
	Keys    []models.APIKey
	Tasks   []models.Task
	Entries []models.LedgerEntry
	Calls   []models.CallLog
	Topups  []models.Topup
	// The admin forms, shown again with what was typed and what is wrong.
	Adjust *AdjustForm
}

// AdjustForm is an admin's credit or debit of a balance, as typed.
type AdjustForm struct {
	Direction string // "credit" or "debit"
	Amount    string // dollars
	Reason    string
	Error     string
}

// StaffTask is what staff see of a task beyond the customer's page.
type StaffTask struct {
	Summary         string // why the customer was or was not charged, in one sentence
	CredentialID    string
	CredentialLabel string
	Provider        string
	Calls           []models.CallLog // the API calls that name the task
}

// SearchResult is one thing the staff search found.
type SearchResult struct {
	Kind  string // "account", "user", "key", "task", "media", "call"
	Label string
	Href  string
	Note  string
}

// SearchPage is the staff search: what was typed and what it found.
type SearchPage struct {
	Query   string
	Results []SearchResult
	Hint    string // what to try next when nothing was found, or how the query was read
	Error   string // why the query was not searched at all
}

// StaffCallPage is one API call opened from its request id.
type StaffCallPage struct {
	Call    models.CallLog
	Account *models.Account
	Owner   string
	Task    *TaskPage // the task the call concerns, with its story
}

// StaffLedgerPage is one account's whole ledger, a page at a time.
type StaffLedgerPage struct {
	Entries     []models.LedgerEntry
	Next, First string
}

// AuditFilter is the audit log page's query, as typed.
type AuditFilter struct {
	Actor, Action, Account, From, To string
}

// AuditPage is one page of the audit log.
type AuditPage struct {
	Rows        []models.AuditEntry
	Filter      AuditFilter
	Next, First string
	Error       string
}

func bytesLabel(n *int64) string {
	if n == nil {
		return "size unknown"
	}
	return humanBytes(*n)
}

// humanBytes is a size for people: "12.3 MB".
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
