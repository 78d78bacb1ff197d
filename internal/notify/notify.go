// Package notify writes the service's e-mails — a templ HTML body and a plain-text body each — and hands
// them to the configured mail sender.
package notify

import (
	"bytes"
	"context"
	"fmt"

	"videogen/internal/mail"
	"videogen/views"
)

// Notifier composes and sends the account e-mails.
type Notifier struct {
	Mail mail.Sender
}

func (n *Notifier) send(ctx context.Context, to, subject, heading, body, button, link, after, idem, kind string) error {
	var html bytes.Buffer
	if err := views.EmailAction(heading, body, button, link, after).Render(ctx, &html); err != nil {
		return fmt.Errorf("render %s e-mail: %w", kind, err)
	}
	text := fmt.Sprintf("%s\n\n%s\n\n%s: %s\n\n%s\n", heading, body, button, link, after)
	err := n.Mail.Send(ctx, mail.Message{To: to, Subject: subject, Text: text, HTML: html.String(), IdempotencyKey: idem,
		Tags: map[string]string{"kind": kind}})
	if err != nil {
		return fmt.Errorf("send %s e-mail: %w", kind, err)
	}
	return nil
}

// VerifyEmail sends the link that confirms an address.
func (n *Notifier) VerifyEmail(ctx context.Context, to, link string, tokenID int64) error {
	return n.send(ctx, to, "Confirm your e-mail address for videogen", "Confirm your e-mail address",
		"Confirm that this address belongs to you to add funds and create API keys.",
		"Confirm my address", link, "The link works for 24 hours. If you did not create an account, ignore this e-mail.",
		fmt.Sprintf("verify/%d", tokenID), "verify")
}

// ResetPassword sends the link that sets a new password.
func (n *Notifier) ResetPassword(ctx context.Context, to, link string, tokenID int64) error {
	return n.send(ctx, to, "Reset your videogen password", "Choose a new password",
		"Someone asked to reset the password of your videogen account. If it was you, choose a new one.",
		"Choose a new password", link, "The link works for one hour. If you did not ask for it, ignore this e-mail: your password stays as it is.",
		fmt.Sprintf("reset/%d", tokenID), "reset")
}

// AlreadyRegistered tells the owner of an address that someone tried to sign up with it.
func (n *Notifier) AlreadyRegistered(ctx context.Context, to, signInLink, resetLink string) error {
	return n.send(ctx, to, "Someone tried to create a videogen account with your address", "You already have an account",
		"Someone, maybe you, tried to create a new videogen account with this address. You already have one: sign in instead.",
		"Sign in", signInLink, "Forgot your password? Reset it at "+resetLink+". If it was not you, no action is needed.",
		"", "already-registered")
}
