package console

import (
	"videogen/handlers/web"

	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/auth"
	"videogen/internal/infra/ids"
	"videogen/views/customer"
)

func (h *Handler) showSignUp(c *fiber.Ctx) error {
	if web.CurrentUser(c) != nil {
		return web.Redirect(c, "/console")
	}
	return h.Render(c, customer.SignUp(h.Viewer(c, ""), customer.SignUpForm{}))
}

// signUp creates the account and sends the verification e-mail; the answer is the same whether or not the
// address was already registered.
func (h *Handler) signUp(c *fiber.Ctx) error {
	form := customer.SignUpForm{Email: web.Posted(c, "email"), AccountName: web.Posted(c, "account_name"), Terms: web.Posted(c, "terms") != ""}
	proof := ids.NewToken(32)
	errs, err := h.Auth.Register(c.UserContext(), auth.SignUp{Email: form.Email, Password: web.Posted(c, "password"), AcceptTerms: form.Terms,
		AccountName: form.AccountName, BrowserProof: proof}, h.ClientIP(c))
	var throttled *auth.ThrottledError
	if errors.As(err, &throttled) {
		return h.TooManyForms(c, throttled)
	}
	if err != nil {
		return err
	}
	if len(errs) > 0 {
		form.Errors = errs
		c.Status(fiber.StatusUnprocessableEntity)
		return h.Render(c, customer.SignUp(h.Viewer(c, ""), form))
	}
	// Set for a registered address too (where it matches nothing), so this answer stays the same.
	h.setSignupCookie(c, proof)
	return h.Render(c, customer.CheckInbox(h.Viewer(c, ""), form.Email, h.MailPrinted))
}

// The sign-up cookie marks the browser that signed up: it holds a random proof whose hash is stored with
// the verification link of that sign-up (and of no other), so confirming the address from this browser
// signs the person in (verifyEmail). Someone who signs up again with the same address gets a proof of
// their own that matches no link. It is sent to /verify only, and lives as long as the link.
const signupCookiePath = "/verify"

func (h *Handler) setSignupCookie(c *fiber.Ctx, proof string) {
	c.Cookie(&fiber.Cookie{Name: web.SignupCookie, Value: proof, Path: signupCookiePath, MaxAge: int(auth.VerifyTTL.Seconds()),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: h.SecureCookies})
}

func (h *Handler) clearSignupCookie(c *fiber.Ctx) {
	c.Cookie(&fiber.Cookie{Name: web.SignupCookie, Value: "", Path: signupCookiePath, MaxAge: -1, Expires: time.Unix(1, 0),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: h.SecureCookies})
}
