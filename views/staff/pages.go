package staff

import (
	"videogen/models"
)

// StaffAccountPage is one tenant as staff see it.
type StaffAccountPage struct {
	Account models.Account
	Users   []models.User
	// Invitations are the account's pending invitations to join it (docs/members.md).
	Invitations []models.Invitation
	Keys        []models.APIKey
	Tasks       []models.Task
	Entries     []models.LedgerEntry
	Calls       []models.CallLog
	Topups      []models.Topup
	// The admin forms, shown again with what was typed and what is wrong.
	Adjust *AdjustForm
}

// AdjustForm is an admin's credit or debit of a balance, as typed.
type AdjustForm struct {
	Direction string // "credit" or "debit"
	Amount    string // dollars
	Reason    string
	// CustomerNote is what the customer reads beside the entry ("" : "Adjustment by support").
	CustomerNote string
	Error        string
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
	// First and Next link the first and the next page of users matching part of an address ("" when
	// there is none).
	First, Next string
}

// StaffCallPage is one API call opened from its request id.
type StaffCallPage struct {
	Call models.CallLog // a call of no account (it carried no valid key): an account's calls are on its pages
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
