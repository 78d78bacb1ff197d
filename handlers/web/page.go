package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/auth"
	"videogen/internal/infra/ids"
	"videogen/internal/refusal"
	"videogen/models"
	"videogen/views"
)

// Cookies of the console.
const (
	SessionCookie = "vg_session"
	CSRFCookie    = "vg_csrf"
	TZCookie      = "vg_tz"
	SignupCookie  = "vg_signup" // which address this browser signed up with (console_signup.go)
	// DeviceCookie says this browser signed in as a user before: it exempts the browser from the sign-in
	// ceiling shared by strangers (internal/domain/auth/trust.go). It signs nobody in.
	DeviceCookie = "vg_device"
)

const (
	LocalUser         = "console_user"
	LocalSessionToken = "console_session"
	LocalSession      = "console_session_row"
	LocalCSRF         = "console_csrf"
)

// notices are the one-line messages a redirect may ask the next page to show (?notice=code): a fixed
// table, so a link can never put arbitrary text on the page.
var notices = map[string]string{
	"signed-out":        "You are signed out.",
	"key-revoked":       "The API key was revoked. Requests using it are refused from now on.",
	"key-limits-saved":  "The key's limits were saved. Its next request is held to them.",
	"funds-added":       "Test funds were added to your wallet.",
	"alerts-saved":      "Your balance alerts were saved.",
	"password-changed":  "Your password was changed, and every other device was signed out.",
	"password-reset":    "Your password was reset. Sign in with the new one.",
	"password-set":      "Your password is set. Sign in with it.",
	"timezone-saved":    "Your time zone was saved.",
	"billing-saved":     "Your billing details were saved.",
	"verification-sent": "We sent a new confirmation link. It works for 24 hours.",
	"already-verified":  "Your e-mail address is already confirmed.",
	"email-confirmed":   "Your e-mail address is confirmed. Welcome!",
	"video-created":     "Your video is queued and its price reserved. This page follows it live; it is charged when it is ready.",
	"webhook-disabled":  "The endpoint was disabled. Events are kept for it and sent when you enable it again.",
	"webhook-enabled":   "The endpoint was enabled. Deliveries that waited go out now.",
	"webhook-test-sent": "A test event is on its way. Its delivery appears below within a few seconds.",
	"webhook-deleted":   "The endpoint was deleted. No more events are sent to it.",
	"webhook-resent":    "The delivery is being sent again, with the same webhook-id. Reload to see the attempt.",
	// Members (docs/members.md).
	"member-invited":       "The invitation is on its way. Its link works for 7 days; it is listed below until accepted.",
	"member-role-changed":  "The role was changed. It applies from the member's next page.",
	"member-removed":       "The member was removed and signed out everywhere.",
	"invitation-withdrawn": "The invitation was withdrawn: its link no longer works.",
	"left-account":         "You left the account and were signed out.",
	"account-renamed":      "The account's name was saved. Every member sees it from their next page.",
	"two-step-required":    "Two-step sign-in is now required: members without it set it up before their next page.",
	"two-step-optional":    "Two-step sign-in is no longer required. Members who set it up keep using it.",
	"joined":               "Welcome! You are now a member of this account.",
	// Staff (docs/support.md).
	"balance-adjusted": "The balance was adjusted. The ledger and the audit log show it.",
	"account-disabled": "The account was disabled: its keys are refused and its users signed out.",
	"account-enabled":  "The account was re-enabled: its keys work again.",
	"role-changed":     "The role was changed. It applies from the user's next page.",
	"prices-saved":     "The prices were changed. New videos are charged the new prices.",
}

// web prepares every console and public page: it reads the session cookie, makes sure the browser has a
// CSRF cookie, refuses state-changing requests whose form token does not match it, and renders errors
// as pages.
func (h *Base) Page(c *fiber.Ctx) error {
	// hideFromNonStaff may have read the session already (the staff pages): it is not read twice.
	if tok := c.Cookies(SessionCookie); tok != "" && CurrentUser(c) == nil {
		u, sess, err := h.Auth.Session(c.UserContext(), tok)
		switch {
		case err == nil:
			c.Locals(LocalUser, u)
			c.Locals(LocalSession, sess)
			c.Locals(LocalSessionToken, strings.Clone(tok))
		case errors.Is(err, auth.ErrNoSession):
			h.ClearCookie(c, SessionCookie)
		default:
			return h.HTMLError(c, err)
		}
	}
	seed := c.Cookies(CSRFCookie)
	if len(seed) < 20 {
		seed = ids.NewToken(32)
		h.SetCookie(c, CSRFCookie, seed, 365*24*time.Hour)
	}
	// The token is bound to the session too: signing in (a new session) retires the tokens of before.
	// (Only a live session: a stale cookie is being cleared on this very answer.)
	if tok, ok := c.Locals(LocalSessionToken).(string); ok {
		seed += "|" + tok
	}
	c.Locals(LocalCSRF, h.csrfToken(seed, h.Secrets[0]))
	c.Locals(localCSRFSeed, seed)
	// A streamed multipart form carries its token as its first part, which its handler reads and checks
	// (CheckFormCSRF) before anything else of the body.
	if c.Method() == fiber.MethodPost && !ReadsConsoleVideoForm(c) && !h.csrfValid(seed, csrfSent(c)) {
		c.Status(fiber.StatusForbidden)
		return h.Render(c, views.ErrorPage(h.Viewer(c, ""), 403, "This form has expired",
			"For your safety the form could not be sent. Go back, reload the page and send it again."))
	}
	// Pages are about one person's account (or carry a one-time link): never stored by caches.
	c.Set(fiber.HeaderCacheControl, "no-store")
	if err := c.Next(); err != nil {
		return h.HTMLError(c, err)
	}
	return nil
}

// csrfToken binds a form to the browser's CSRF cookie with the app secret (a signed double-submit
// token): a forged cross-site form has neither the cookie's value nor the secret. Stateless, so every
// instance accepts every other's tokens.
func (h *Base) csrfToken(seed, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("csrf\x00" + seed))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

const localCSRFSeed = "console_csrf_seed"

// CheckFormCSRF reports whether token, read by a handler from its streamed form, is this browser's.
func (h *Base) CheckFormCSRF(c *fiber.Ctx, token string) bool {
	seed, _ := c.Locals(localCSRFSeed).(string)
	return seed != "" && h.csrfValid(seed, token)
}

// FormExpired answers a form whose CSRF token is missing or stale, as Page does.
func (h *Base) FormExpired(c *fiber.Ctx) error {
	c.Status(fiber.StatusForbidden)
	return h.Render(c, views.ErrorPage(h.Viewer(c, ""), 403, "This form has expired",
		"For your safety the form could not be sent. Go back, reload the page and send it again."))
}

// csrfSent is the token a POST carries: in its form body, or in the X-CSRF-Token header for scripts.
// Never from the query string: a token in a URL lands in browser history, Referer headers and proxy logs.
func csrfSent(c *fiber.Ctx) string {
	if v, ok := FormValue(c, "_csrf"); ok {
		return v
	}
	return c.Get("X-CSRF-Token")
}

// formValue is a field of a posted form and whether it was posted at all. Only the body counts (Fiber's
// c.FormValue reads the query string first): a link must not be able to fill in a form's fields, and
// what a form carries stays out of URLs and the logs that keep them.
func FormValue(c *fiber.Ctx, name string) (string, bool) {
	v := c.Request().PostArgs().Peek(name)
	if v == nil {
		return "", false
	}
	return string(v), true
}

// PostedAll is every value of a repeated field of a posted form (checkboxes), in order.
func PostedAll(c *fiber.Ctx, name string) []string {
	var out []string
	for _, v := range c.Request().PostArgs().PeekMulti(name) {
		out = append(out, string(v))
	}
	return out
}

// posted is a field of a posted form ("" when it was not posted); see formValue.
func Posted(c *fiber.Ctx, name string) string {
	v, _ := FormValue(c, name)
	return v
}

func (h *Base) csrfValid(seed, token string) bool {
	for _, s := range h.Secrets { // any of the rotated secrets
		if hmac.Equal([]byte(token), []byte(h.csrfToken(seed, s))) {
			return true
		}
	}
	return false
}

// tooManyForms answers a form sent too often from one network.
func (h *Base) TooManyForms(c *fiber.Ctx, t *auth.ThrottledError) error {
	c.Status(fiber.StatusTooManyRequests)
	c.Set(fiber.HeaderRetryAfter, Itoa(int(t.RetryAfter.Seconds())+1))
	return h.Render(c, views.ErrorPage(h.Viewer(c, ""), 429, "Please wait a little",
		"Many forms were sent from your network in a short time. Try again in "+t.Wait()+"."))
}

// requireUser sends signed-out visitors to the sign-in page, and back here afterwards.
func (h *Base) RequireUser(c *fiber.Ctx) error {
	if CurrentUser(c) == nil {
		return c.Redirect("/signin?next="+url.QueryEscape(c.OriginalURL()), fiber.StatusSeeOther)
	}
	return c.Next()
}

func CurrentUser(c *fiber.Ctx) *models.User {
	u, _ := c.Locals(LocalUser).(*models.User)
	return u
}

// currentSession is the signed-in browser's session row (nil when signed out).
func CurrentSession(c *fiber.Ctx) *models.Session {
	s, _ := c.Locals(LocalSession).(*models.Session)
	return s
}

// viewer collects what every page needs to know about who looks at it.
func (h *Base) Viewer(c *fiber.Ctx, active string) views.Viewer {
	v := views.Viewer{User: CurrentUser(c), Active: active, TestTopups: h.TestTopups, Location: time.UTC,
		SupportEmail: h.SupportEmail, SelfTopup: h.TestTopups || h.Payments.Enabled()}
	v.CSRF, _ = c.Locals(LocalCSRF).(string)
	v.Notice = notices[c.Query("notice")]
	// app.js writes the browser's zone URL-encoded ("Europe%2FParis").
	zone, _ := url.QueryUnescape(c.Cookies(TZCookie))
	if v.User != nil && v.User.TimeZone != "" {
		zone = v.User.TimeZone
	}
	if zone != "" && len(zone) < 64 {
		if loc, err := time.LoadLocation(zone); err == nil {
			v.Location = loc
		}
	}
	return v
}

// render writes a templ page.
func (h *Base) Render(c *fiber.Ctx, page templ.Component) error {
	c.Type("html", "utf-8")
	return page.Render(c.UserContext(), c.Response().BodyWriter())
}

// htmlError renders an error as a page; the details go to the log, never to the page.
func (h *Base) HTMLError(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	if errors.As(err, &fe) && fe.Code == fiber.StatusNotFound {
		c.Status(fiber.StatusNotFound)
		return h.Render(c, views.ErrorPage(h.Viewer(c, ""), 404, "Page not found", "There is nothing at this address. Check the link, or start again from the home page."))
	}
	if errors.As(err, &fe) && fe.Code < 500 {
		c.Status(fe.Code)
		return h.Render(c, views.ErrorPage(h.Viewer(c, ""), fe.Code, "This request could not be handled", fe.Message+". Go back and try again."))
	}
	if _, isRefusal := refusal.As(err); !isRefusal {
		err = h.outage(c, err)
	}
	if status, ae, ok := StatusOf(err); ok && status == fiber.StatusServiceUnavailable {
		c.Status(status)
		if ae.RetryAfter > 0 {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(ae.RetryAfter))
		}
		return h.Render(c, views.ErrorPage(h.Viewer(c, ""), status, "Briefly unavailable",
			"A part of the service is unavailable for a moment. Nothing was changed; try again in a few seconds."))
	}
	if status, ae, ok := StatusOf(err); ok && status < 500 {
		c.Status(status)
		return h.Render(c, views.ErrorPage(h.Viewer(c, ""), status, "This request could not be handled", ae.Message+" Go back and try again."))
	}
	h.Log.Error("page failed", "request_id", RequestID(c), "path", c.Path(), "err", err)
	c.Status(fiber.StatusInternalServerError)
	return h.Render(c, views.ErrorPage(h.Viewer(c, ""), 500, "Something went wrong",
		"We could not show this page. Try again in a moment; if it keeps failing, contact support and quote "+RequestID(c)+"."))
}

func (h *Base) SetCookie(c *fiber.Ctx, name, value string, maxAge time.Duration) {
	c.Cookie(&fiber.Cookie{Name: name, Value: value, Path: "/", MaxAge: int(maxAge.Seconds()),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: h.SecureCookies})
}

// client is who a sign-in or a code comes from, as the throttles tell clients apart.
func (h *Base) Client(c *fiber.Ctx) auth.Client {
	return auth.Client{IP: h.ClientIP(c), Device: c.Cookies(DeviceCookie)}
}

// rememberDevice gives this browser the device cookie of the user it just proved to be — by a password
// or a link, or, with secondFactor, by a staff member's second factor too — unless the one it holds
// already says as much.
func (h *Base) RememberDevice(c *fiber.Ctx, userID int64, secondFactor bool) error {
	token, changed, err := h.Auth.DeviceCookie(c.UserContext(), c.Cookies(DeviceCookie), userID, secondFactor)
	if err != nil {
		return err
	}
	if changed {
		h.SetCookie(c, DeviceCookie, token, auth.DeviceTTL)
	}
	return nil
}

func (h *Base) ClearCookie(c *fiber.Ctx, name string) {
	c.Cookie(&fiber.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1, Expires: time.Unix(1, 0),
		HTTPOnly: true, SameSite: fiber.CookieSameSiteLaxMode, Secure: h.SecureCookies})
}

// redirect answers a form with 303 See Other, the Post/Redirect/Get pattern.
func Redirect(c *fiber.Ctx, to string) error { return c.Redirect(to, fiber.StatusSeeOther) }

// safeNext keeps a post-sign-in redirect on this site: a path of this site and nothing else. Control
// characters would split the Location header, and "/\\host" or "/\t/host" are read by browsers as
// another site, so anything but a plain path falls back to the dashboard.
func SafeNext(next string) string {
	const home = "/console"
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || len(next) > 2000 {
		return home
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c < 0x20 || c == 0x7f || c == '\\' {
			return home
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") {
		return home
	}
	return u.RequestURI()
}

func Itoa(n int) string { return strconv.Itoa(n) }
