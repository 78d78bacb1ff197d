package handlers

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/auth"
	"videogen/views"
)

func (h *handler) showSignUp(c *fiber.Ctx) error {
	if currentUser(c) != nil {
		return redirect(c, "/console")
	}
	return h.render(c, views.SignUp(h.viewer(c, ""), views.SignUpForm{}))
}

// signUp creates the account and sends the verification e-mail; the answer is the same whether or not the
// address was already registered.
func (h *handler) signUp(c *fiber.Ctx) error {
	form := views.SignUpForm{Email: c.FormValue("email"), Terms: c.FormValue("terms") != ""}
	errs, err := h.Auth.Register(c.UserContext(), auth.SignUp{Email: form.Email, Password: c.FormValue("password"), AcceptTerms: form.Terms}, h.clientIP(c))
	var throttled *auth.ThrottledError
	if errors.As(err, &throttled) {
		return h.tooManyForms(c, throttled)
	}
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		form.Errors = errs
		c.Status(fiber.StatusUnprocessableEntity)
		return h.render(c, views.SignUp(h.viewer(c, ""), form))
	}
	return h.render(c, views.CheckInbox(h.viewer(c, ""), form.Email))
}
