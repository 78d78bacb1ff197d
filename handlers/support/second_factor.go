package support

import (
	"videogen/handlers/web"

	"encoding/base64"
	"errors"
	"net/url"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/auth"
	"videogen/views/staff"
)

// The second factor's pages (docs/support.md): setting up an authenticator, entering its code (or a
// recovery code) once per session, and replacing the recovery codes. They are the only staff pages a
// session reaches before passing it; requireSecondFactor sends everyone here first.

const wrongCode = "This code does not work: it is not right, has expired, or was already used. Enter the code your app shows now, or a recovery code you have not used yet."

// qrSize is the QR code's side in pixels: comfortably scanned from a laptop screen.
const qrSize = 200

// showTOTPEnrolment shows the key to add to an authenticator app, as a QR code and as text.
func (h *handler) showTOTPEnrolment(c *fiber.Ctx) error {
	return h.renderEnrolment(c, c.Query("next"), "")
}

func (h *handler) renderEnrolment(c *fiber.Ctx, next, errMsg string) error {
	e, err := h.Auth.BeginTOTP(c.UserContext(), web.CurrentUser(c).ID)
	if errors.Is(err, auth.ErrAlreadyEnrolled) {
		return web.Redirect(c, "/support/2fa"+nextQuery(next))
	}
	if err != nil {
		return err
	}
	qr, err := e.QRCodePNG(qrSize)
	if err != nil {
		return err
	}
	return h.Render(c, staff.TOTPEnrol(h.Viewer(c, ""), staff.TOTPEnrolPage{Secret: e.Secret(),
		QR: "data:image/png;base64," + base64.StdEncoding.EncodeToString(qr), Next: supportNext(next), Error: errMsg}))
}

// enrolTOTP turns the authenticator on with a code it shows; this session has then passed the second
// factor, and the answer shows the recovery codes (200, not a redirect: they are shown this once).
func (h *handler) enrolTOTP(c *fiber.Ctx) error {
	next := web.Posted(c, "next")
	codes, err := h.Auth.ConfirmTOTP(c.UserContext(), web.CurrentUser(c).ID, sessionID(c), web.Posted(c, "code"), h.StaffActor(c))
	switch {
	case errors.Is(err, auth.ErrWrongCode):
		c.Status(fiber.StatusUnprocessableEntity)
		return h.renderEnrolment(c, next, "This code does not work. Check that the app shows videogen with your e-mail address, and enter the code it shows now.")
	case errors.Is(err, auth.ErrAlreadyEnrolled):
		return web.Redirect(c, "/support/2fa"+nextQuery(next)) // e.g. the form sent twice
	case errors.Is(err, auth.ErrNotEnrolled):
		return web.Redirect(c, "/support/2fa/setup"+nextQuery(next))
	case errors.Is(err, auth.ErrNoSession):
		return web.Redirect(c, "/signin?next="+url.QueryEscape(supportNext(next)))
	case err != nil:
		return err
	}
	if err := h.RememberDevice(c, web.CurrentUser(c).ID, true); err != nil {
		return err
	}
	return h.Render(c, staff.RecoveryCodes(h.Viewer(c, ""), staff.RecoveryCodesPage{Codes: codes, Next: supportNext(next), Enrolled: true}))
}

// showSecondFactor asks for a code; once this session has passed, it says so and offers new recovery codes.
func (h *handler) showSecondFactor(c *fiber.Ctx) error {
	next := c.Query("next")
	if web.CurrentUser(c).TOTPEnabledAt == nil {
		return web.Redirect(c, "/support/2fa/setup"+nextQuery(next))
	}
	p := staff.SecondFactorPage{Next: supportNext(next)}
	if sess := web.CurrentSession(c); sess != nil && sess.SecondFactorAt != nil {
		left, err := h.Auth.RecoveryCodesLeft(c.UserContext(), web.CurrentUser(c).ID)
		if err != nil {
			return err
		}
		p.PassedAt, p.RecoveryLeft = sess.SecondFactorAt, left
	}
	return h.Render(c, staff.SecondFactor(h.Viewer(c, ""), p))
}

// checkSecondFactor passes this session with an authenticator code or a recovery code, then goes on to
// the staff page that was asked for.
func (h *handler) checkSecondFactor(c *fiber.Ctx) error {
	next := web.Posted(c, "next")
	if web.CurrentUser(c).TOTPEnabledAt == nil {
		return web.Redirect(c, "/support/2fa/setup"+nextQuery(next))
	}
	_, err := h.Auth.CheckSecondFactor(c.UserContext(), web.CurrentUser(c).ID, sessionID(c), web.Posted(c, "code"), h.StaffActor(c), c.Cookies(web.DeviceCookie))
	p := staff.SecondFactorPage{Next: supportNext(next)}
	var throttled *auth.ThrottledError
	switch {
	case errors.As(err, &throttled):
		c.Status(fiber.StatusTooManyRequests)
		c.Set(fiber.HeaderRetryAfter, web.Itoa(int(throttled.RetryAfter.Seconds())+1))
		p.Throttled = "Too many codes were tried for your account. For its safety, wait " + throttled.Wait() + " and try again."
		return h.Render(c, staff.SecondFactor(h.Viewer(c, ""), p))
	case errors.Is(err, auth.ErrWrongCode):
		c.Status(fiber.StatusUnprocessableEntity)
		p.Error = wrongCode
		return h.Render(c, staff.SecondFactor(h.Viewer(c, ""), p))
	case errors.Is(err, auth.ErrNotEnrolled):
		return web.Redirect(c, "/support/2fa/setup"+nextQuery(next))
	case errors.Is(err, auth.ErrNoSession):
		return web.Redirect(c, "/signin?next="+url.QueryEscape(supportNext(next)))
	case err != nil:
		return err
	}
	if err := h.RememberDevice(c, web.CurrentUser(c).ID, true); err != nil {
		return err
	}
	return web.Redirect(c, supportNext(next))
}

// newRecoveryCodes replaces the recovery codes and shows the new ones. Only a session that has passed
// the second factor may: the codes are a way past it.
func (h *handler) newRecoveryCodes(c *fiber.Ctx) error {
	next := web.Posted(c, "next")
	if sess := web.CurrentSession(c); sess == nil || sess.SecondFactorAt == nil {
		return web.Redirect(c, "/support/2fa"+nextQuery(next))
	}
	codes, err := h.Auth.NewRecoveryCodes(c.UserContext(), web.CurrentUser(c).ID, h.StaffActor(c))
	if errors.Is(err, auth.ErrNotEnrolled) {
		return web.Redirect(c, "/support/2fa/setup"+nextQuery(next))
	}
	if err != nil {
		return err
	}
	return h.Render(c, staff.RecoveryCodes(h.Viewer(c, ""), staff.RecoveryCodesPage{Codes: codes, Next: supportNext(next)}))
}

// sessionID is the signed-in browser's session (0 when there is none, which no session row matches).
func sessionID(c *fiber.Ctx) int64 {
	if s := web.CurrentSession(c); s != nil {
		return s.ID
	}
	return 0
}

// supportNext is where to go once past the second factor: the staff page that was asked for, else the
// staff overview. It is a path of this site (safeNext) under /support: the second factor opens only
// those, so a link anywhere else would be a detour.
func supportNext(next string) string {
	const home = "/support"
	n := web.SafeNext(next)
	u, err := url.Parse(n)
	if err != nil {
		return home
	}
	// "/support/../console" is under /support only to the eye.
	if clean := path.Clean(u.Path); clean != u.Path && clean+"/" != u.Path {
		return home
	}
	if u.Path != home && !strings.HasPrefix(u.Path, home+"/") {
		return home
	}
	return n
}

// nextQuery carries where to go on to a second-factor page's address ("" when nowhere in particular).
func nextQuery(next string) string {
	if next == "" {
		return ""
	}
	return "?next=" + url.QueryEscape(supportNext(next))
}
