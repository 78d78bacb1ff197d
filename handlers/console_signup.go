package handlers

import (
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/auth"
	"videogen/internal/ids"
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
	form := views.SignUpForm{Email: posted(c, "email"), Terms: posted(c, "terms") != ""}
	proof := ids.NewToken(32)
	errs, err := h.Auth.Register(c.UserContext(), auth.SignUp{Email: form.Email, Password: posted(c, "password"), AcceptTerms: form.Terms,
		BrowserProof: proof}, h.clientIP(c))
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
	// Set for a registered address too (where it matches nothing), so this answer stays the same.
	h.setSignupCookie(c, proof)
	return h.render(c, views.CheckInbox(h.viewer(c, ""), form.Email))
}

// The sign-up cookie marks the browser that signed up: it holds a random proof whose hash is stored with
// the verification link of that sign-up (and of no other), so confirming the address from this browser
// signs the person in (verifyEmail). Someone who signs up again with the same address gets a proof of
// their own that matches no link. It is sent to /verify only, and lives as long as the link.
const signupCookiePath = "/verify"

func (h *handler) setSignupCookie(c *fiber.Ctx, proof string) {
	c.Cookie(&fiber.Cookie{Name: signupCookie, Value: proof, Path: signupCookiePath, MaxAge: int(auth.VerifyTTL.Seconds()),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: h.SecureCookies})
}

func (h *handler) clearSignupCookie(c *fiber.Ctx) {
	c.Cookie(&fiber.Cookie{Name: signupCookie, Value: "", Path: signupCookiePath, MaxAge: -1, Expires: time.Unix(1, 0),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: h.SecureCookies})
}
