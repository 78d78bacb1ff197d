package views

import "videogen/models"

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
