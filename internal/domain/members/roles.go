// Package members is an account's members: what each role may do in the account (Can, the one place
// that decides), and inviting people, accepting an invitation, changing a member's role, removing a
// member and leaving, under the rule that an account always keeps an owner (docs/members.md).
package members

import (
	"slices"
	"strings"

	"videogen/models"
)

// Roles are the account roles, from the most trusted.
var Roles = []string{models.AccountOwner, models.AccountAdmin, models.AccountDeveloper, models.AccountBilling, models.AccountViewer}

// ValidRole reports whether r is an account role.
func ValidRole(r string) bool { return slices.Contains(Roles, r) }

// Grantable is the roles a member with role by may give, by invitation or by changing a member's role:
// an owner any; an admin admin, developer or viewer — never owner, and never billing, whose AddFunds and
// BillingSettings (auto-recharge of the saved card included) an admin does not have and so may not hand
// out, to a colleague or to a second address of their own. Other roles none.
func Grantable(by string) []string {
	switch by {
	case models.AccountOwner:
		return Roles
	case models.AccountAdmin:
		return []string{models.AccountAdmin, models.AccountDeveloper, models.AccountViewer}
	}
	return nil
}

// MayGrant reports whether a member with role by may give role.
func MayGrant(by, role string) bool { return slices.Contains(Grantable(by), role) }

// Action is something in the console that not every role may do. What every role may do — read the
// dashboard, tasks, call log, webhooks, usage, members and the wallet's balance and ledger, and manage
// their own profile (password, display time zone, signing out, leaving) — is no Action: it needs no check.
type Action string

// The actions, as docs/members.md's matrix lists them.
const (
	// ManageMembers is inviting members, changing their roles, removing them and withdrawing invitations.
	// An admin never touches an owner, and grants only admin, developer or viewer (Grantable; Service
	// enforces it).
	ManageMembers Action = "manage-members"
	// SeeKeys is the API keys page.
	SeeKeys Action = "see-keys"
	// ManageKeys is creating and revoking API keys and setting their limits.
	ManageKeys Action = "manage-keys"
	// CreateVideos is making a video from the console's form (/console/videos/new); API keys make videos
	// by their own rights.
	CreateVideos Action = "create-videos"
	// CancelTasks is cancelling a video from its page.
	CancelTasks Action = "cancel-tasks"
	// ManageWebhooks is adding, rotating, enabling, disabling and deleting endpoints, and resending.
	ManageWebhooks Action = "manage-webhooks"
	// AddFunds is a top-up by card, and test funds.
	AddFunds Action = "add-funds"
	// BillingSettings is the balance alerts and auto-recharge, the billing details and the account's time
	// zone (the one its statements and key limits count days and months in).
	BillingSettings Action = "billing-settings"
	// SeePayments is the card payments: the wallet's list of them, the top-up form and each top-up's page.
	SeePayments Action = "see-payments"
	// SeeStatements is the monthly statements.
	SeeStatements Action = "see-statements"
	// RenameAccount is changing the account's name (the Account page).
	RenameAccount Action = "rename-account"
	// RequireTwoStep is requiring two-step sign-in of every member (the Account page).
	RequireTwoStep Action = "require-two-step"
	// Personal is what every member may do about themselves: their own password and display time zone,
	// signing out, leaving the account. It is named so that a route can say it needs no more.
	Personal Action = "personal"
)

// grants is the matrix: the roles that may do each action.
var grants = map[Action][]string{
	ManageMembers:   {models.AccountOwner, models.AccountAdmin},
	SeeKeys:         {models.AccountOwner, models.AccountAdmin, models.AccountDeveloper, models.AccountViewer},
	ManageKeys:      {models.AccountOwner, models.AccountAdmin, models.AccountDeveloper},
	CreateVideos:    {models.AccountOwner, models.AccountAdmin, models.AccountDeveloper},
	CancelTasks:     {models.AccountOwner, models.AccountAdmin, models.AccountDeveloper},
	ManageWebhooks:  {models.AccountOwner, models.AccountAdmin, models.AccountDeveloper},
	AddFunds:        {models.AccountOwner, models.AccountBilling},
	BillingSettings: {models.AccountOwner, models.AccountBilling},
	SeePayments:     {models.AccountOwner, models.AccountAdmin, models.AccountBilling, models.AccountViewer},
	SeeStatements:   {models.AccountOwner, models.AccountAdmin, models.AccountBilling, models.AccountViewer},
	RenameAccount:   {models.AccountOwner, models.AccountAdmin},
	RequireTwoStep:  {models.AccountOwner},
}

// Actions lists every action, in the matrix's order.
var Actions = []Action{ManageMembers, RenameAccount, RequireTwoStep, SeeKeys, ManageKeys, CreateVideos, CancelTasks, ManageWebhooks, AddFunds, BillingSettings, SeePayments, SeeStatements}

// Can reports whether a member with this role may do the action. An unknown role or action may do
// nothing.
func Can(role string, a Action) bool {
	if a == Personal {
		return ValidRole(role)
	}
	return slices.Contains(grants[a], role)
}

// WhoCan names the roles that may do the action, for a message: "an owner or admin".
func WhoCan(a Action) string {
	roles := grants[a]
	if len(roles) == 0 {
		return "nobody"
	}
	article := "a"
	if strings.ContainsRune("aeiou", rune(roles[0][0])) {
		article = "an"
	}
	switch len(roles) {
	case 1:
		return article + " " + roles[0]
	case 2:
		return article + " " + roles[0] + " or " + roles[1]
	}
	return article + " " + strings.Join(roles[:len(roles)-1], ", ") + " or " + roles[len(roles)-1]
}

// Doing says what the action is, to finish "Your role (viewer) cannot …".
func Doing(a Action) string {
	switch a {
	case ManageMembers:
		return "invite, change or remove members"
	case RenameAccount:
		return "rename the account"
	case RequireTwoStep:
		return "require two-step sign-in of every member"
	case SeeKeys:
		return "see API keys"
	case ManageKeys:
		return "create or revoke API keys"
	case CreateVideos:
		return "make videos in the console"
	case CancelTasks:
		return "cancel videos"
	case ManageWebhooks:
		return "change webhook endpoints"
	case AddFunds:
		return "add funds"
	case BillingSettings:
		return "change billing settings (balance alerts, billing details, the account's time zone)"
	case SeePayments:
		return "see card payments or add funds"
	case SeeStatements:
		return "see statements"
	}
	return string(a)
}

// Refusal is the sentence a refused member reads: their role, what it cannot do, and who can — naming,
// when given, members who can ("Ask owner@example.com.").
func Refusal(role string, a Action, contacts []string) string {
	msg := "Your role (" + role + ") cannot " + Doing(a) + ". Only " + WhoCan(a) + " can."
	if len(contacts) > 0 {
		msg += " Ask " + joinOr(contacts) + "."
	}
	return msg
}

func joinOr(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Describe says in a few words what a role may do, for the invitation form and e-mail.
func Describe(role string) string {
	switch role {
	case models.AccountOwner:
		return "everything, including money, members and other owners"
	case models.AccountAdmin:
		return "members (except owners), API keys, videos and webhooks; no money movements"
	case models.AccountDeveloper:
		return "API keys, videos, webhooks and the call log; no money movements"
	case models.AccountBilling:
		return "the wallet, payments, statements and billing settings; no API keys"
	case models.AccountViewer:
		return "reads every page; changes nothing"
	}
	return ""
}
