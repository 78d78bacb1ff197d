// Package notify writes the service's e-mails — a templ HTML body and a plain-text body each — and puts
// them in the mail outbox, in the transaction of the event they are about.
package notify

import (
	"bytes"
	"fmt"

	"gorm.io/gorm"

	"videogen/internal/mail"
	"videogen/views"
)

// Notifier composes the account e-mails and queues them.
type Notifier struct {
	Outbox *mail.Outbox
}

// Wake tells the outbox that the transaction which queued mail has committed, so it goes out now.
func (n *Notifier) Wake() { n.Outbox.Wake() }

func (n *Notifier) queue(tx *gorm.DB, to, subject, heading, body, button, link, after, kind string) error {
	var html bytes.Buffer
	if err := views.EmailAction(heading, body, button, link, after).Render(tx.Statement.Context, &html); err != nil {
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
