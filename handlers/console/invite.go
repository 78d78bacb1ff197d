package console

import (
	"errors"
	"net/url"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/members"
	"videogen/views/customer"
)

// invitePage renders an invitation's page: who invites whom to what, and the form to join — or, to
// someone signed in as another person, the offer to sign out first. A link that no longer works answers
// 410 Gone.
func (h *Handler) invitePage(c *fiber.Ctx, token string, p customer.InvitePage) error {
	inv, err := h.Members.Peek(c.UserContext(), token)
	if errors.Is(err, members.ErrBadInvitation) || err == nil && inv.Lapsed {
		c.Status(fiber.StatusGone)
		return h.Render(c, customer.InviteView(h.Viewer(c, ""), customer.InvitePage{}))
	}
	if err != nil {
		return err
	}
	p.Invitation, p.Token = inv, token
	if inv.Member {
		p.Problem = inv.Email + " is already a member of " + inv.AccountName + ": sign in instead."
	} else if inv.Elsewhere {
		p.Problem = inv.Email + " already signs in to another videogen account, and one login belongs to one account. " +
			"Ask " + inv.InviterEmail + " to invite another address of yours."
	}
	if p.Problem != "" {
		c.Status(fiber.StatusConflict)
	}
	return h.Render(c, customer.InviteView(h.Viewer(c, ""), p))
}

// showInvite answers GET /invite?token=, the link of an invitation e-mail. It only reads.
func (h *Handler) showInvite(c *fiber.Ctx) error {
	return h.invitePage(c, c.Query("token"), customer.InvitePage{})
}

// acceptInvite answers the invitation's form: the person becomes a member with the password they chose
// and is signed in. While another person is signed in in this browser, it acts on nobody's behalf: the
// page asks to sign out first (form=signout), which ends that session and shows the invitation again.
func (h *Handler) acceptInvite(c *fiber.Ctx) error {
	token := web.Posted(c, "token")
	if web.Posted(c, "form") == "signout" {
		if tok, ok := c.Locals(web.LocalSessionToken).(string); ok {
			if err := h.Auth.EndSession(c.UserContext(), tok); err != nil {
				return err
			}
		}
		h.ClearCookie(c, web.SessionCookie)
		return web.Redirect(c, "/invite?token="+url.QueryEscape(token))
	}
	if web.CurrentUser(c) != nil {
		c.Status(fiber.StatusConflict)
		return h.invitePage(c, token, customer.InvitePage{})
	}
	terms := web.Posted(c, "terms") != ""
	u, errs, err := h.Members.Accept(c.UserContext(), members.Acceptance{Token: token, Password: web.Posted(c, "password"), AcceptTerms: terms})
	var invalid *members.Invalid
	switch {
	case errors.Is(err, members.ErrBadInvitation):
		return h.invitePage(c, token, customer.InvitePage{})
	case errors.As(err, &invalid):
		return h.invitePage(c, token, customer.InvitePage{Problem: invalid.Message})
	case err != nil:
		return err
	case len(errs) > 0:
		c.Status(fiber.StatusUnprocessableEntity)
		return h.invitePage(c, token, customer.InvitePage{Errors: errs, Terms: terms})
	}
	if err := h.startSession(c, u.ID); err != nil {
		return err
	}
	return web.Redirect(c, "/console?notice=joined")
}
