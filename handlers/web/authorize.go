package web

import (
	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/members"
	"videogen/views"
)

// Require lets a console request through only when the signed-in member's account role may do the
// action (members.Can, the one place that decides); anyone else gets a 403 page that names their role,
// who may do it, and members of the account to ask (docs/members.md).
func (h *Base) Require(a members.Action) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if u := CurrentUser(c); u != nil && !members.Can(u.AccountRole, a) {
			return h.Refuse(c, a)
		}
		return c.Next()
	}
}

// RequireForm is Require for a page whose forms post to its own URL, each naming itself in a hidden
// "form" field: forms maps each to the action it needs (members.Personal for one about the member
// themselves); any other form needs otherwise — so a form added later without an entry is held to the
// strict rule, not let through.
func (h *Base) RequireForm(forms map[string]members.Action, otherwise members.Action) fiber.Handler {
	return func(c *fiber.Ctx) error {
		a, ok := forms[Posted(c, "form")]
		if !ok {
			a = otherwise
		}
		if u := CurrentUser(c); u != nil && !members.Can(u.AccountRole, a) {
			return h.Refuse(c, a)
		}
		return c.Next()
	}
}

// Refuse answers 403 with the page that says the member's role cannot do the action, and whom to ask.
func (h *Base) Refuse(c *fiber.Ctx, a members.Action) error {
	u := CurrentUser(c)
	contacts, err := members.Contacts(c.UserContext(), h.DB, u.AccountID, a)
	if err != nil {
		return err
	}
	c.Status(fiber.StatusForbidden)
	return h.Render(c, views.ErrorPage(h.Viewer(c, ""), 403, "Not allowed for your role", members.Refusal(u.AccountRole, a, contacts)))
}
