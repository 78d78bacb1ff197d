package handlers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/accounts"
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
	// Set for a registered address too, so this answer stays the same either way.
	if email, err := accounts.NormalizeEmail(form.Email); err == nil {
		h.setSignupCookie(c, email)
	}
	return h.render(c, views.CheckInbox(h.viewer(c, ""), form.Email))
}

// The sign-up cookie marks the browser that signed up with an address, so that confirming the address
// from that same browser signs the person in (verifyEmail). It is sent to /verify only, and lives as long
// as the verification link.
const signupCookiePath = "/verify"

// signupProof is the sign-up cookie's value: the expiry and an HMAC, with the app secret, of the
// normalised address and that expiry. It holds no address, and cannot be made for another one or
// lengthened without the secret.
func signupProof(email string, expires int64, secret string) string {
	exp := strconv.FormatInt(expires, 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("signup\x00" + email + "\x00" + exp))
	return exp + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *handler) setSignupCookie(c *fiber.Ctx, email string) {
	c.Cookie(&fiber.Cookie{Name: signupCookie, Value: signupProof(email, h.Now().Add(auth.VerifyTTL).Unix(), h.Secrets[0]),
		Path: signupCookiePath, MaxAge: int(auth.VerifyTTL.Seconds()), HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: h.SecureCookies})
}

func (h *handler) clearSignupCookie(c *fiber.Ctx) {
	c.Cookie(&fiber.Cookie{Name: signupCookie, Value: "", Path: signupCookiePath, MaxAge: -1, Expires: time.Unix(1, 0),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: h.SecureCookies})
}

// signedUpHere reports whether this browser signed up with the (normalised) address, and the
// verification link's lifetime has not run out since. Any of the rotated secrets is accepted.
func (h *handler) signedUpHere(c *fiber.Ctx, email string) bool {
	value := c.Cookies(signupCookie)
	exp, _, ok := strings.Cut(value, ".")
	expires, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || h.Now().Unix() >= expires {
		return false
	}
	for _, s := range h.Secrets {
		if hmac.Equal([]byte(value), []byte(signupProof(email, expires, s))) {
			return true
		}
	}
	return false
}
