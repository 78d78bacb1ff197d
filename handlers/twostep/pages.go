// Package twostep serves the pages of the second sign-in step — setting up an authenticator, entering
// its code once per session, replacing the recovery codes — for the staff pages (/support/2fa) and the
// console (/console/2fa) alike: one flow, the two places differing only in their paths and words
// (docs/console.md, "Two-step sign-in"; docs/support.md).
package twostep

import (
	"encoding/base64"
	"errors"
	"net/url"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"

	"videogen/handlers/web"
	"videogen/internal/domain/auth"
	"videogen/views/twostep"
)

const wrongCode = "This code does not work: it is not right, has expired, or was already used. Enter the code your app shows now, or a recovery code you have not used yet."

// qrSize is the QR code's side in pixels: comfortably scanned from a laptop screen.
const qrSize = 200

// Pages are one place's second-step pages.
type Pages struct {
	*web.Base
	Where twostep.Where
	// Home is where a session goes once past the step when nothing else was asked for, and the path
	// every next link must stay under ("/support", "/console").
	Home string
	// Required reports whether the signed-in member must have the second step (their account requires
	// it); the enrolment page says so.
	Required func(c *fiber.Ctx) bool
}

// Register adds the pages to r, the group at Where.Base.
func (p *Pages) Register(r fiber.Router) {
	r.Get("", p.showSecondFactor)
	r.Post("", p.checkSecondFactor)
	r.Get("/setup", p.showEnrolment)
	r.Post("/setup", p.enrol)
	r.Post("/recovery-codes", p.newRecoveryCodes)
}

// showEnrolment shows the key to add to an authenticator app, as a QR code and as text.
func (p *Pages) showEnrolment(c *fiber.Ctx) error { return p.renderEnrolment(c, c.Query("next"), "") }

func (p *Pages) renderEnrolment(c *fiber.Ctx, next, errMsg string) error {
	e, err := p.Auth.BeginTOTP(c.UserContext(), web.CurrentUser(c).ID)
	if errors.Is(err, auth.ErrAlreadyEnrolled) {
		return web.Redirect(c, p.Where.Base+p.NextQuery(next))
	}
	if err != nil {
		return err
	}
	qr, err := e.QRCodePNG(qrSize)
	if err != nil {
		return err
	}
	page := twostep.TOTPEnrolPage{Where: p.Where, Secret: e.Secret(), QR: "data:image/png;base64," + base64.StdEncoding.EncodeToString(qr),
		Next: p.Next(next), Error: errMsg, Required: p.Required != nil && p.Required(c)}
	return p.Render(c, twostep.TOTPEnrol(p.Viewer(c, ""), page))
}

// enrol turns the authenticator on with a code it shows; this session has then passed the second step,
// and the answer shows the recovery codes (200, not a redirect: they are shown this once).
func (p *Pages) enrol(c *fiber.Ctx) error {
	next := web.Posted(c, "next")
	codes, err := p.Auth.ConfirmTOTP(c.UserContext(), web.CurrentUser(c).ID, sessionID(c), web.Posted(c, "code"), p.StaffActor(c))
	switch {
	case errors.Is(err, auth.ErrWrongCode):
		c.Status(fiber.StatusUnprocessableEntity)
		return p.renderEnrolment(c, next, "This code does not work. Check that the app shows videogen with your e-mail address, and enter the code it shows now.")
	case errors.Is(err, auth.ErrAlreadyEnrolled):
		return web.Redirect(c, p.Where.Base+p.NextQuery(next)) // e.g. the form sent twice
	case errors.Is(err, auth.ErrNotEnrolled):
		return web.Redirect(c, p.Where.Base+"/setup"+p.NextQuery(next))
	case errors.Is(err, auth.ErrNoSession):
		return web.Redirect(c, "/signin?next="+url.QueryEscape(p.Next(next)))
	case err != nil:
		return err
	}
	if err := p.RememberDevice(c, web.CurrentUser(c).ID, true); err != nil {
		return err
	}
	return p.Render(c, twostep.RecoveryCodes(p.Viewer(c, ""), twostep.RecoveryCodesPage{Where: p.Where, Codes: codes, Next: p.Next(next), Enrolled: true}))
}

// showSecondFactor asks for a code; once this session has passed, it says so and offers new recovery codes.
func (p *Pages) showSecondFactor(c *fiber.Ctx) error {
	next := c.Query("next")
	if web.CurrentUser(c).TOTPEnabledAt == nil {
		return web.Redirect(c, p.Where.Base+"/setup"+p.NextQuery(next))
	}
	page := twostep.SecondFactorPage{Where: p.Where, Next: p.Next(next)}
	if sess := web.CurrentSession(c); sess != nil && sess.SecondFactorAt != nil {
		left, err := p.Auth.RecoveryCodesLeft(c.UserContext(), web.CurrentUser(c).ID)
		if err != nil {
			return err
		}
		page.PassedAt, page.RecoveryLeft = sess.SecondFactorAt, left
	}
	return p.Render(c, twostep.SecondFactor(p.Viewer(c, ""), page))
}

// checkSecondFactor passes this session with an authenticator code or a recovery code, then goes on to
// the page that was asked for. The sign-in's throttles apply (auth.CheckSecondFactor).
func (p *Pages) checkSecondFactor(c *fiber.Ctx) error {
	next := web.Posted(c, "next")
	if web.CurrentUser(c).TOTPEnabledAt == nil {
		return web.Redirect(c, p.Where.Base+"/setup"+p.NextQuery(next))
	}
	_, err := p.Auth.CheckSecondFactor(c.UserContext(), web.CurrentUser(c).ID, sessionID(c), web.Posted(c, "code"), p.StaffActor(c), c.Cookies(web.DeviceCookie))
	page := twostep.SecondFactorPage{Where: p.Where, Next: p.Next(next)}
	var throttled *auth.ThrottledError
	switch {
	case errors.As(err, &throttled):
		c.Status(fiber.StatusTooManyRequests)
		c.Set(fiber.HeaderRetryAfter, web.Itoa(int(throttled.RetryAfter.Seconds())+1))
		page.Throttled = "Too many codes were tried for your account. For its safety, wait " + throttled.Wait() + " and try again."
		return p.Render(c, twostep.SecondFactor(p.Viewer(c, ""), page))
	case errors.Is(err, auth.ErrWrongCode):
		c.Status(fiber.StatusUnprocessableEntity)
		page.Error = wrongCode
		return p.Render(c, twostep.SecondFactor(p.Viewer(c, ""), page))
	case errors.Is(err, auth.ErrNotEnrolled):
		return web.Redirect(c, p.Where.Base+"/setup"+p.NextQuery(next))
	case errors.Is(err, auth.ErrNoSession):
		return web.Redirect(c, "/signin?next="+url.QueryEscape(p.Next(next)))
	case err != nil:
		return err
	}
	if err := p.RememberDevice(c, web.CurrentUser(c).ID, true); err != nil {
		return err
	}
	return web.Redirect(c, p.Next(next))
}

// newRecoveryCodes replaces the recovery codes and shows the new ones. Only a session that has passed
// the second step may: the codes are a way past it.
func (p *Pages) newRecoveryCodes(c *fiber.Ctx) error {
	next := web.Posted(c, "next")
	if sess := web.CurrentSession(c); sess == nil || sess.SecondFactorAt == nil {
		return web.Redirect(c, p.Where.Base+p.NextQuery(next))
	}
	codes, err := p.Auth.NewRecoveryCodes(c.UserContext(), web.CurrentUser(c).ID, p.StaffActor(c))
	if errors.Is(err, auth.ErrNotEnrolled) {
		return web.Redirect(c, p.Where.Base+"/setup"+p.NextQuery(next))
	}
	if err != nil {
		return err
	}
	return p.Render(c, twostep.RecoveryCodes(p.Viewer(c, ""), twostep.RecoveryCodesPage{Where: p.Where, Codes: codes, Next: p.Next(next)}))
}

// sessionID is the signed-in browser's session (0 when there is none, which no session row matches).
func sessionID(c *fiber.Ctx) int64 {
	if s := web.CurrentSession(c); s != nil {
		return s.ID
	}
	return 0
}

// Next is where to go once past the second step: the page that was asked for, else Home. It is a path
// of this site (web.SafeNext) under Home: the step opens only those, so a link anywhere else would be a
// detour.
func (p *Pages) Next(next string) string {
	n := web.SafeNext(next)
	u, err := url.Parse(n)
	if err != nil {
		return p.Home
	}
	// "/support/../console" is under /support only to the eye.
	if clean := path.Clean(u.Path); clean != u.Path && clean+"/" != u.Path {
		return p.Home
	}
	if u.Path != p.Home && !strings.HasPrefix(u.Path, p.Home+"/") {
		return p.Home
	}
	return n
}

// NextQuery carries where to go on to a second-step page's address ("" when nowhere in particular).
func (p *Pages) NextQuery(next string) string {
	if next == "" {
		return ""
	}
	return "?next=" + url.QueryEscape(p.Next(next))
}
