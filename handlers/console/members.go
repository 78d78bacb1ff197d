package console

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/members"
	"videogen/models"
	"videogen/views"
	"videogen/views/customer"
)

// membersPage renders the members page with p's form and problem.
func (h *Handler) membersPage(c *fiber.Ctx, p customer.MembersPage) error {
	u := web.CurrentUser(c)
	ctx := c.UserContext()
	var err error
	if p.Members, err = models.Members(ctx, h.DB.R, u.AccountID); err != nil {
		return err
	}
	if p.Invitations, err = models.PendingInvitations(ctx, h.DB.R, u.AccountID, h.Now()); err != nil {
		return err
	}
	if p.Former, err = models.FormerMembers(ctx, h.DB.R, u.AccountID, 20); err != nil {
		return err
	}
	if p.Role == "" {
		p.Role = models.AccountDeveloper
	}
	return h.Render(c, customer.MembersView(h.Viewer(c, "members"), p))
}

// showMembers answers GET /console/members: every role reads who the members are.
func (h *Handler) showMembers(c *fiber.Ctx) error { return h.membersPage(c, customer.MembersPage{}) }

// inviteMember answers the invitation form (POST /console/members, email and role): the link goes out
// through the outbox, valid 7 days.
func (h *Handler) inviteMember(c *fiber.Ctx) error {
	email, role := strings.TrimSpace(web.Posted(c, "email")), web.Posted(c, "role")
	if _, err := h.Members.Invite(c.UserContext(), web.CurrentUser(c), email, role); err != nil {
		return h.memberProblem(c, err, customer.MembersPage{Email: email, Role: role})
	}
	return web.Redirect(c, "/console/members?notice=member-invited")
}

// changeMemberRole answers POST /console/members/{id}/role.
func (h *Handler) changeMemberRole(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil {
		return fiber.ErrNotFound
	}
	if err := h.Members.ChangeRole(c.UserContext(), web.CurrentUser(c), id, web.Posted(c, "role")); err != nil {
		return h.memberProblem(c, err, customer.MembersPage{})
	}
	return web.Redirect(c, "/console/members?notice=member-role-changed")
}

// member reads a current member of the signed-in account by the id in the path.
func (h *Handler) member(c *fiber.Ctx) (*models.User, error) {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil {
		return nil, fiber.ErrNotFound
	}
	u, err := models.UserByID(c.UserContext(), h.DB.R, id)
	if errors.Is(err, models.ErrNotFound) || err == nil && (u.AccountID != web.CurrentUser(c).AccountID || u.Removed()) {
		return nil, fiber.ErrNotFound
	}
	return u, err
}

// confirmRemoveMember answers GET /console/members/{id}/remove: what removing them does, and whether
// their keys go too.
func (h *Handler) confirmRemoveMember(c *fiber.Ctx) error {
	u, err := h.member(c)
	if err != nil {
		return err
	}
	if by := web.CurrentUser(c); by.AccountRole != models.AccountOwner && u.AccountRole == models.AccountOwner {
		return h.memberProblem(c, &members.Refused{Action: members.ManageMembers, Message: "Only an owner can remove an owner."}, customer.MembersPage{})
	}
	keys, err := models.AccountKeys(c.UserContext(), h.DB.R, u.AccountID)
	if err != nil {
		return err
	}
	p := customer.RemoveMemberPage{Member: *u}
	pending, err := models.PendingInvitations(c.UserContext(), h.DB.R, u.AccountID, h.Now())
	if err != nil {
		return err
	}
	for _, in := range pending {
		if in.InvitedBy == u.ID {
			p.Invitations++
		}
	}
	for _, k := range keys {
		if k.CreatedBy != nil && *k.CreatedBy == u.ID && k.RevokedAt == nil {
			p.Keys = append(p.Keys, k)
		}
	}
	return h.Render(c, customer.RemoveMember(h.Viewer(c, "members"), p))
}

// removeMember answers POST /console/members/{id}/remove: the member is signed out everywhere and
// signs in no more; their keys are revoked too when the form asks.
func (h *Handler) removeMember(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil {
		return fiber.ErrNotFound
	}
	by := web.CurrentUser(c)
	r, err := h.Members.Remove(c.UserContext(), by, id, web.Posted(c, "revoke_keys") != "")
	if err != nil {
		return h.memberProblem(c, err, customer.MembersPage{})
	}
	if r.RevokedKeys > 0 {
		h.Keys.ForgetAccount(by.AccountID) // the revoked keys stop on this instance at once
	}
	return web.Redirect(c, "/console/members?notice=member-removed")
}

// withdrawInvitation answers POST /console/members/invitations/{id}/withdraw: the link stops working.
func (h *Handler) withdrawInvitation(c *fiber.Ctx) error {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil {
		return fiber.ErrNotFound
	}
	if _, err := h.Members.Withdraw(c.UserContext(), web.CurrentUser(c), id); err != nil {
		return h.memberProblem(c, err, customer.MembersPage{})
	}
	return web.Redirect(c, "/console/members?notice=invitation-withdrawn")
}

// confirmLeave answers GET /console/members/leave; the last owner is told why they cannot.
func (h *Handler) confirmLeave(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	p := customer.LeavePage{}
	if u.AccountRole == models.AccountOwner {
		ms, err := models.Members(c.UserContext(), h.DB.R, u.AccountID)
		if err != nil {
			return err
		}
		owners := 0
		for _, m := range ms {
			if m.AccountRole == models.AccountOwner {
				owners++
			}
		}
		p.LastOwner = owners <= 1
	}
	return h.Render(c, customer.LeaveAccount(h.Viewer(c, "members"), p))
}

// leaveAccount answers POST /console/members/leave: every role may leave, except the last owner.
func (h *Handler) leaveAccount(c *fiber.Ctx) error {
	err := h.Members.Leave(c.UserContext(), web.CurrentUser(c))
	if errors.Is(err, members.ErrLastOwner) {
		c.Status(fiber.StatusConflict)
		return h.Render(c, customer.LeaveAccount(h.Viewer(c, "members"), customer.LeavePage{LastOwner: true}))
	}
	if err != nil {
		return err
	}
	h.ClearCookie(c, web.SessionCookie)
	return web.Redirect(c, "/signin?notice=left-account")
}

// memberProblem answers a refused change of the members: 403 for what the role may not do, 404 for a
// member or invitation that is not (or no longer) there, 409 for the last owner, 422 for a form to fix,
// 429 (with when) past the invitations an account may send in a day.
func (h *Handler) memberProblem(c *fiber.Ctx, err error, p customer.MembersPage) error {
	var refused *members.Refused
	var invalid *members.Invalid
	var tooMany *members.TooManySent
	switch {
	case errors.As(err, &tooMany):
		c.Status(fiber.StatusTooManyRequests)
		c.Set(fiber.HeaderRetryAfter, strconv.FormatInt(max(1, int64(tooMany.Next.Sub(h.Now()).Seconds())+1), 10))
		p.Errors = map[string]string{"": fmt.Sprintf("This account has sent %d invitations in the last 24 hours, the most it may send in a day "+
			"(withdrawn ones count too). You can send the next one after %s.", tooMany.Sent, h.Viewer(c, "members").When(tooMany.Next))}
		return h.membersPage(c, p)
	case errors.As(err, &refused):
		contacts, cerr := members.Contacts(c.UserContext(), h.DB, web.CurrentUser(c).AccountID, refused.Action)
		if cerr != nil {
			return cerr
		}
		msg := refused.Message
		if len(contacts) > 0 {
			msg += " Ask " + strings.Join(contacts, " or ") + "."
		}
		c.Status(fiber.StatusForbidden)
		return h.Render(c, views.ErrorPage(h.Viewer(c, "members"), 403, "Not allowed for your role", msg))
	case errors.Is(err, members.ErrNoMember), errors.Is(err, members.ErrNoInvitation):
		return fiber.ErrNotFound
	case errors.Is(err, members.ErrLastOwner):
		c.Status(fiber.StatusConflict)
		p.Problem = "This account would be left without an owner. Make another member an owner first."
		return h.membersPage(c, p)
	case errors.As(err, &invalid):
		c.Status(fiber.StatusUnprocessableEntity)
		if p.Errors == nil {
			p.Errors = map[string]string{}
		}
		if p.Email == "" && p.Role == "" { // not the invitation form: the message heads the page
			p.Problem = invalid.Message
		} else {
			p.Errors[invalid.Field] = invalid.Message
		}
		return h.membersPage(c, p)
	}
	return err
}
