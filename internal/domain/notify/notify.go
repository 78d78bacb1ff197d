// Package notify writes the service's e-mails — a templ HTML body and a plain-text body each — and puts
// them in the mail outbox (a record and its River job), in the transaction of the event they are about.
package notify

import (
	"bytes"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/mail"
	"videogen/views/email"
)

// Notifier composes the account e-mails and queues them.
type Notifier struct {
	Outbox *mail.Outbox
}

func (n *Notifier) queue(tx *gorm.DB, to, subject, heading, body, button, link, after, kind string) error {
	var html bytes.Buffer
	if err := email.EmailAction(heading, body, button, link, after).Render(tx.Statement.Context, &html); err != nil {
		return fmt.Errorf("render %s e-mail: %w", kind, err)
	}
	text := fmt.Sprintf("%s\n\n%s\n\n%s: %s\n\n%s\n", heading, body, button, link, after)
	return n.Outbox.Enqueue(tx, mail.Message{To: to, Subject: subject, Text: text, HTML: html.String(),
		Tags: map[string]string{"kind": kind}})
}

// VerifyEmail queues the link that confirms an address.
func (n *Notifier) VerifyEmail(tx *gorm.DB, to, link string) error {
	return n.queue(tx, to, "Confirm your e-mail address for videogen", "Confirm your e-mail address",
		"Confirm that this address belongs to you to add funds and create API keys.",
		"Confirm my address", link, "The link works for 24 hours. If you did not create an account, ignore this e-mail.",
		"verify")
}

// ResetPassword queues the link that sets a new password.
func (n *Notifier) ResetPassword(tx *gorm.DB, to, link string) error {
	return n.queue(tx, to, "Reset your videogen password", "Choose a new password",
		"Someone asked to reset the password of your videogen account. If it was you, choose a new one.",
		"Choose a new password", link, "The link works for one hour. If you did not ask for it, ignore this e-mail: your password stays as it is.",
		"reset")
}

// AlreadyRegistered queues a note to the owner of an address that someone tried to sign up with it.
func (n *Notifier) AlreadyRegistered(tx *gorm.DB, to, signInLink, resetLink string) error {
	return n.queue(tx, to, "Someone tried to create a videogen account with your address", "You already have an account",
		"Someone, maybe you, tried to create a new videogen account with this address. You already have one: sign in instead.",
		"Sign in", signInLink, "Forgot your password? Reset it at "+resetLink+". If it was not you, no action is needed.",
		"already-registered")
}

// Receipt queues the confirmation of a credit: the amount, the balance after it and, when the charge has
// one, Stripe's receipt.
func (n *Notifier) Receipt(tx *gorm.DB, to, amount, balance, receiptURL, walletURL string) error {
	body := fmt.Sprintf("We received your payment of %s and added it to your wallet. Your available balance is now %s.", amount, balance)
	button, link, after := "Open your wallet", walletURL, "Thank you. Your wallet page lists every payment and charge."
	if receiptURL != "" {
		button, link, after = "View the receipt", receiptURL, "Your wallet, with every payment and charge: "+walletURL
	}
	return n.queue(tx, to, "Payment received: "+amount+" added to your videogen wallet", "Payment received", body, button, link, after, "receipt")
}

// LowBalance queues the warning that available fell under the customer's threshold.
func (n *Notifier) LowBalance(tx *gorm.DB, to, available, threshold, walletURL string) error {
	body := fmt.Sprintf("Your available balance is %s, under the %s you asked us to warn you about. When it runs out, new videos are refused with 402 until you add funds.", available, threshold)
	return n.queue(tx, to, "Your videogen balance is low: "+available, "Your balance is low", body,
		"Add funds", walletURL, "You set this warning on your wallet page, where you can change it or switch on auto-recharge.", "low-balance")
}

// RechargeOff queues the news that auto-recharge was switched off, and why.
func (n *Notifier) RechargeOff(tx *gorm.DB, to, why, walletURL string) error {
	return n.queue(tx, to, "Auto-recharge is off for your videogen wallet", "Auto-recharge is off",
		why+" We switched auto-recharge off, so nothing more will be charged automatically.",
		"Open your wallet", walletURL, "Add funds or switch auto-recharge on again on your wallet page.", "recharge-off")
}

// WebhookDisabled queues the news to an account's owner that one of its webhook endpoints was disabled
// after failing for three days, and why.
func (n *Notifier) WebhookDisabled(tx *gorm.DB, to, url, why, link string) error {
	return n.queue(tx, to, "A videogen webhook endpoint was disabled", "Your webhook endpoint was disabled",
		why+" We disabled the endpoint, so no more events are sent to "+url+" until you switch it on again.",
		"Open the endpoint", link, "Events of the past 30 days and every attempt are listed there; fix the receiver, switch the endpoint on, and resend what it missed.",
		"webhook-disabled")
}

// Invitation queues an invitation to join an account: who sent it, the account, the role and what it
// allows, and the link, which works until expires.
func (n *Notifier) Invitation(tx *gorm.DB, to, inviter, account, role, roleSummary, link string, expires time.Time) error {
	until := expires.UTC().Format("2 January 2006 15:04 MST")
	var html bytes.Buffer
	if err := email.Invitation(inviter, account, role, roleSummary, link, until).Render(tx.Statement.Context, &html); err != nil {
		return fmt.Errorf("render invitation e-mail: %w", err)
	}
	text := fmt.Sprintf("Join %s on videogen\n\n%s invited you to join the videogen account %s as %s.\nAs %s you can use %s.\n\n"+
		"Accept the invitation: %s\n\nThe link works until %s. If you do not know %s, ignore this e-mail: nothing happens unless you accept.\n",
		account, inviter, account, role, role, roleSummary, link, until, inviter)
	return n.Outbox.Enqueue(tx, mail.Message{To: to, Subject: inviter + " invited you to join " + account + " on videogen", Text: text,
		HTML: html.String(), Tags: map[string]string{"kind": "invitation"}})
}
