package handlers_test

import (
	"html"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"videogen/internal/testkit"
	"videogen/models"
)

// staff is a signed-in staff member whose session has passed the second factor.
type staff struct {
	*browser
	Email    string
	Secret   string   // the TOTP secret, as the enrolment page shows it for typing
	Recovery []string // the ten recovery codes shown once at enrolment
}

var (
	// totpSecretRE is the enrolment page's key: groups of four, each its own element (totpKey joins them).
	totpSecretRE   = regexp.MustCompile(`id="totp-secret"[^>]*>((?:<span>[A-Z2-7]+</span>)+)</code>`)
	recoveryCodeRE = regexp.MustCompile(`<li><code>([0-9a-z-]+)</code></li>`)
)

// signInStaff makes a verified user of the given role (as `videogen accounts role` would), then enrols
// a TOTP authenticator through the staff pages — reading the secret as a person who cannot scan the QR
// code would, and computing the code with the same library as the server — and keeps the recovery codes.
func signInStaff(t *testing.T, s *testkit.Server, email, role string) *staff {
	t.Helper()
	b := signUpVerified(t, s, email)
	if err := s.DB.W.Model(&models.User{}).Where("email = ?", email).Update("role", role).Error; err != nil {
		t.Fatal(err)
	}
	setup := b.get("/support/2fa/setup")
	m := totpSecretRE.FindStringSubmatch(setup.Body)
	if setup.Status != 200 || m == nil {
		t.Fatalf("the enrolment page shows no secret to type: %d %s", setup.Status, trimPage(setup.Body))
	}
	secret := totpKey(m[1])
	p := b.submit("/support/2fa/setup", "code", url.Values{"code": {totpCode(t, secret)}})
	if p.Status != 200 {
		t.Fatalf("enrolling with a right code: %d %s", p.Status, trimPage(p.Body))
	}
	var codes []string
	for _, m := range recoveryCodeRE.FindAllStringSubmatch(p.Body, -1) {
		codes = append(codes, html.UnescapeString(m[1]))
	}
	if len(codes) != 10 {
		t.Fatalf("enrolment showed %d recovery codes, want 10", len(codes))
	}
	return &staff{browser: b, Email: email, Secret: secret, Recovery: codes}
}

// totpKey is the key of a totpSecretRE match, as typed: its groups without the markup between them.
func totpKey(groups string) string { return markupRE.ReplaceAllString(groups, "") }

var markupRE = regexp.MustCompile(`<[^>]*>`)

// visibleText is what a page shows as text: the HTML without its tags (attributes, such as a QR code's
// data URI, go with them), entities decoded.
func visibleText(body string) string { return html.UnescapeString(markupRE.ReplaceAllString(body, "")) }

// totpCode is the authenticator's code of now.
func totpCode(t *testing.T, secret string) string {
	t.Helper()
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// waitCall waits until the call log (written in batches, a moment after the answer) holds the call.
func waitCall(t *testing.T, s *testkit.Server, requestID string) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, "call "+requestID+" in the call log", func() bool {
		var n int64
		if err := s.DB.R.Model(&models.CallLog{}).Where("request_id = ?", requestID).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}
