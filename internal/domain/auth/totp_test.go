package auth_test

import (
	"bytes"
	"context"
	"encoding/base32"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"videogen/internal/domain/accounts"
	"videogen/internal/domain/audit"
	"videogen/internal/domain/auth"
	"videogen/internal/infra/db"
	"videogen/internal/infra/ratelimit"
	"videogen/internal/infra/seal"
	"videogen/internal/testkit"
	"videogen/models"
)

// clock is the service's time, moved by the tests (codes are computed for it).
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type rig struct {
	svc   *auth.Service
	db    *db.DB
	clock *clock
}

// newRig is an auth service on a fresh database, its clock 10 s into a 30-second time step.
func newRig(t *testing.T, dbURL string, secrets ...string) *rig {
	t.Helper()
	d := testkit.OpenDB(t, dbURL)
	if len(secrets) == 0 {
		secrets = []string{"test-app-secret"}
	}
	c := &clock{t: time.Date(2026, 5, 4, 12, 0, 10, 0, time.UTC)}
	svc := &auth.Service{DB: d, Now: c.now, Secrets: secrets,
		Throttle: auth.Throttles{SecondFactorPerPair: ratelimit.NewLocalClock(auth.DefaultRates.SecondFactorPerPair, c.now),
			SecondFactorPerUser: ratelimit.NewLocalClock(auth.DefaultRates.SecondFactorPerUser, c.now)}}
	return &rig{svc: svc, db: d, clock: c}
}

// user is a staff member with a live session.
type user struct {
	ID, Session int64
	Email       string
}

func (r *rig) staff(t *testing.T, email string) user {
	t.Helper()
	ctx := context.Background()
	u, err := accounts.Create(ctx, r.db, accounts.NewUser{Email: email, Verified: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.db.W.Model(&models.User{}).Where("id = ?", u.ID).Update("role", models.RoleSupport).Error; err != nil {
		t.Fatal(err)
	}
	return user{ID: u.ID, Session: r.session(t, u.ID), Email: email}
}

// session signs the user in once more and returns the new session's id.
func (r *rig) session(t *testing.T, userID int64) int64 {
	t.Helper()
	tok, err := r.svc.StartSession(context.Background(), userID, "192.0.2.1", "test")
	if err != nil {
		t.Fatal(err)
	}
	_, sess, err := r.svc.Session(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	return sess.ID
}

func actor(u user) audit.Actor {
	return audit.StaffActor(&models.User{ID: u.ID, Email: u.Email}, "192.0.2.1")
}

// enrol sets up an authenticator for u and returns its secret and the recovery codes.
func (r *rig) enrol(t *testing.T, u user) (string, []string) {
	t.Helper()
	e, err := r.svc.BeginTOTP(context.Background(), u.ID)
	if err != nil {
		t.Fatal(err)
	}
	codes, err := r.svc.ConfirmTOTP(context.Background(), u.ID, u.Session, r.code(t, e.Secret(), 0), actor(u))
	if err != nil {
		t.Fatal(err)
	}
	return e.Secret(), codes
}

// code is the authenticator's code at the service's now plus offset.
func (r *rig) code(t *testing.T, secret string, offset time.Duration) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, r.clock.now().Add(offset))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (r *rig) user(t *testing.T, id int64) models.User {
	t.Helper()
	var u models.User
	if err := r.db.R.Take(&u, id).Error; err != nil {
		t.Fatal(err)
	}
	return u
}

func (r *rig) passedAt(t *testing.T, sessionID int64) *time.Time {
	t.Helper()
	var s models.Session
	if err := r.db.R.Take(&s, sessionID).Error; err != nil {
		t.Fatal(err)
	}
	return s.SecondFactorAt
}

func (r *rig) audited(t *testing.T, userID int64, action string) int64 {
	t.Helper()
	var n int64
	if err := r.db.R.Model(&models.AuditEntry{}).Where("actor_user_id = ? AND action = ? AND target_type = ? AND target_id = ?",
		userID, action, audit.TargetUser, strconv.FormatInt(userID, 10)).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

var recoveryCodeRE = regexp.MustCompile(`^[2-9a-hjkmnp-z]{4}-[2-9a-hjkmnp-z]{4}$`)

func TestTOTPEnrolment(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		u := r.staff(t, "ada@example.com")

		first, err := r.svc.BeginTOTP(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		again, err := r.svc.BeginTOTP(ctx, u.ID)
		if err != nil || again.Secret() != first.Secret() {
			t.Fatalf("reloading the setup page changed the secret: %v", err)
		}
		if first.Key.Issuer() != "videogen" || first.Key.AccountName() != u.Email || len(first.Secret()) != 32 {
			t.Fatalf("key %s", first.Key.URL())
		}
		if png, err := first.QRCodePNG(200); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("QR code: %v", err)
		}
		row := r.user(t, u.ID)
		raw, _ := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(first.Secret())
		switch {
		case row.TOTPEnabledAt != nil:
			t.Fatal("enabled before a code confirmed it")
		case len(row.TOTPSealed) == 0:
			t.Fatal("the pending secret is not kept")
		case bytes.Contains(row.TOTPSealed, raw) || bytes.Contains(row.TOTPSealed, []byte(first.Secret())):
			t.Fatal("users.totp_sealed holds the secret in the clear")
		}

		for _, bad := range []string{"", "12345", "1234567", "abcdef", r.code(t, first.Secret(), 5*time.Minute), "k7m2-x9qp"} {
			if _, err := r.svc.ConfirmTOTP(ctx, u.ID, u.Session, bad, actor(u)); !errors.Is(err, auth.ErrWrongCode) {
				t.Fatalf("confirming with %q: %v", bad, err)
			}
		}
		if r.user(t, u.ID).TOTPEnabledAt != nil || r.passedAt(t, u.Session) != nil {
			t.Fatal("a wrong code turned something on")
		}

		// Typed with a space, as the app shows it.
		code := r.code(t, first.Secret(), 0)
		codes, err := r.svc.ConfirmTOTP(ctx, u.ID, u.Session, code[:3]+" "+code[3:], actor(u))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, c := range codes {
			if !recoveryCodeRE.MatchString(c) || seen[c] {
				t.Fatalf("recovery code %q (of %q)", c, codes)
			}
			seen[c] = true
		}
		if len(codes) != auth.RecoveryCodeCount {
			t.Fatalf("%d recovery codes", len(codes))
		}
		row = r.user(t, u.ID)
		if row.TOTPEnabledAt == nil || row.TOTPLastStep != r.clock.now().Unix()/30 {
			t.Fatalf("enabled at %v, last step %d", row.TOTPEnabledAt, row.TOTPLastStep)
		}
		if r.passedAt(t, u.Session) == nil {
			t.Fatal("the enrolling session has not passed the second factor")
		}
		var stored []models.RecoveryCode
		r.db.R.Where("user_id = ?", u.ID).Find(&stored)
		if len(stored) != 10 {
			t.Fatalf("%d recovery codes stored", len(stored))
		}
		for _, s := range stored {
			for _, c := range codes {
				if strings.Contains(s.CodeHash, c) || strings.Contains(s.CodeHash, strings.ReplaceAll(c, "-", "")) {
					t.Fatalf("recovery code %s stored in the clear", c)
				}
			}
			if len(s.CodeHash) != 64 || s.UsedAt != nil {
				t.Fatalf("stored %+v", s)
			}
		}
		if n := r.audited(t, u.ID, audit.EnrolTOTP); n != 1 {
			t.Fatalf("%d enrolment rows in the audit log", n)
		}

		if _, err := r.svc.BeginTOTP(ctx, u.ID); !errors.Is(err, auth.ErrAlreadyEnrolled) {
			t.Fatalf("the setup page after enrolment: %v", err)
		}
		r.clock.add(30 * time.Second)
		if _, err := r.svc.ConfirmTOTP(ctx, u.ID, u.Session, r.code(t, first.Secret(), 0), actor(u)); !errors.Is(err, auth.ErrAlreadyEnrolled) {
			t.Fatalf("enrolling twice: %v", err)
		}
	})
}

// TestTOTPCodes: a code of now, or of one step either side, passes once; older steps, later ones and
// a step already accepted do not.
func TestTOTPCodes(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		u := r.staff(t, "grace@example.com")
		secret, _ := r.enrol(t, u) // spends the step of now

		for _, tc := range []struct {
			name   string
			move   time.Duration // the clock, before the code is entered
			offset time.Duration // the code's time, from the clock
			ok     bool
		}{
			{"the enrolment code again", 0, 0, false},
			{"the next step's code (the phone's clock is ahead)", 0, 30 * time.Second, true},
			{"the same code again", 0, 30 * time.Second, false},
			{"a code of before, though within the skew", 0, 0, false},
			{"two steps ahead", 0, 60 * time.Second, false},
			{"the code of now, a minute later", 60 * time.Second, 0, true},
			{"the previous step's code, after a later one passed", 0, -30 * time.Second, false},
			{"a code two steps old", 90 * time.Second, -60 * time.Second, false},
			{"a code one step old (the phone's clock is behind, or it was typed as it changed)", 0, -30 * time.Second, true},
			{"the code of now, after the previous step's", 0, 0, true},
		} {
			r.clock.add(tc.move)
			sess := r.session(t, u.ID)
			pass, err := r.svc.CheckSecondFactor(ctx, u.ID, sess, r.code(t, secret, tc.offset), actor(u), "")
			if tc.ok && (err != nil || pass.Recovery) {
				t.Fatalf("%s: refused: %v", tc.name, err)
			}
			if !tc.ok && !errors.Is(err, auth.ErrWrongCode) {
				t.Fatalf("%s: %v, want ErrWrongCode", tc.name, err)
			}
			if passed := r.passedAt(t, sess) != nil; passed != tc.ok {
				t.Fatalf("%s: session passed %v", tc.name, passed)
			}
		}
		if n := r.audited(t, u.ID, audit.SecondFactor); n != 4 {
			t.Fatalf("%d passes in the audit log, want 4", n)
		}
	})
}

// TestTOTPReplayRace: one code sent by many requests at once passes one of them.
func TestTOTPReplayRace(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		u := r.staff(t, "race@example.com")
		secret, _ := r.enrol(t, u)
		code := r.code(t, secret, 30*time.Second)
		const n = 8
		sessions := make([]int64, n)
		for i := range sessions {
			sessions[i] = r.session(t, u.ID)
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, errs[i] = r.svc.CheckSecondFactor(context.Background(), u.ID, sessions[i], code, actor(u), "")
			})
		}
		wg.Wait()
		passed := 0
		for i, err := range errs {
			switch {
			case err == nil:
				passed++
			case !errors.Is(err, auth.ErrWrongCode):
				t.Fatalf("request %d: %v", i, err)
			}
		}
		if passed != 1 {
			t.Fatalf("%d requests passed with one code", passed)
		}
	})
}

func TestTOTPRecoveryCodes(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		u := r.staff(t, "lin@example.com")
		_, codes := r.enrol(t, u)
		other := r.staff(t, "mo@example.com")
		_, otherCodes := r.enrol(t, other)

		check := func(code string) (auth.SecondFactorPass, error) {
			return r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), code, actor(u), "")
		}
		pass, err := check(codes[0])
		if err != nil || !pass.Recovery || pass.RecoveryLeft != 9 {
			t.Fatalf("first use: %+v %v", pass, err)
		}
		for _, tc := range []struct {
			name, code string
			ok         bool
		}{
			{"the same code again", codes[0], false},
			{"another user's code", otherCodes[0], false},
			{"typed in capitals without the dash", strings.ToUpper(strings.ReplaceAll(codes[1], "-", "")), true},
			{"with spaces", " " + codes[2][:4] + " " + codes[2][5:] + " ", true},
			{"a made-up code", "k7m2-x9qp", false},
		} {
			_, err := check(tc.code)
			if tc.ok != (err == nil) || (!tc.ok && !errors.Is(err, auth.ErrWrongCode)) {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if left, _ := r.svc.RecoveryCodesLeft(ctx, u.ID); left != 7 {
			t.Fatalf("%d codes left, want 7", left)
		}
		if n := r.audited(t, u.ID, audit.RecoveryUsed); n != 3 {
			t.Fatalf("%d recovery codes used in the audit log", n)
		}

		fresh, err := r.svc.NewRecoveryCodes(ctx, u.ID, actor(u))
		if err != nil || len(fresh) != 10 {
			t.Fatalf("new codes: %d %v", len(fresh), err)
		}
		if _, err := check(codes[3]); !errors.Is(err, auth.ErrWrongCode) {
			t.Fatalf("an unused code from before the new ones: %v", err)
		}
		if _, err := check(fresh[9]); err != nil {
			t.Fatalf("a new code: %v", err)
		}
		var used, unused int64
		r.db.R.Model(&models.RecoveryCode{}).Where("user_id = ? AND used_at IS NOT NULL", u.ID).Count(&used)
		r.db.R.Model(&models.RecoveryCode{}).Where("user_id = ? AND used_at IS NULL", u.ID).Count(&unused)
		if used != 4 || unused != 9 {
			t.Fatalf("%d used and %d unused codes kept, want 4 and 9", used, unused)
		}
		if n := r.audited(t, u.ID, audit.RecoveryReset); n != 1 {
			t.Fatalf("%d code replacements in the audit log", n)
		}
	})
}

// TestSecondFactorThrottle: every attempt counts against its client and the staff member; past ten in a
// row from one client even the right code waits there, and other users are not held up.
func TestSecondFactorThrottle(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		u := r.staff(t, "guessed@example.com")
		secret, _ := r.enrol(t, u)
		other := r.staff(t, "bystander@example.com")
		otherSecret, _ := r.enrol(t, other)
		for i := range 10 {
			if _, err := r.svc.CheckSecondFactor(ctx, u.ID, u.Session, "000000", actor(u), ""); !errors.Is(err, auth.ErrWrongCode) {
				t.Fatalf("attempt %d: %v", i+1, err)
			}
		}
		var throttled *auth.ThrottledError
		_, err := r.svc.CheckSecondFactor(ctx, u.ID, u.Session, r.code(t, secret, 30*time.Second), actor(u), "")
		if !errors.As(err, &throttled) || throttled.RetryAfter <= 0 {
			t.Fatalf("the 11th attempt: %v", err)
		}
		if _, err := r.svc.CheckSecondFactor(ctx, other.ID, other.Session, r.code(t, otherSecret, 30*time.Second), actor(other), ""); err != nil {
			t.Fatalf("another user: %v", err)
		}
	})
}

// device is the device cookie a browser gets when it proves to be userID (with secondFactor, by a code).
func (r *rig) device(t *testing.T, userID int64, secondFactor bool) string {
	t.Helper()
	token, changed, err := r.svc.DeviceCookie(context.Background(), "", userID, secondFactor)
	if err != nil || !changed {
		t.Fatalf("device cookie: %q %v %v", token, changed, err)
	}
	return token
}

// altered is token with its last character changed.
func altered(token string) string {
	last := "0"
	if strings.HasSuffix(token, last) {
		last = "1"
	}
	return token[:len(token)-1] + last
}

// TestSecondFactorStrangersDoNotLockOut: someone who has a staff member's password guesses codes from
// many networks. Past the ceiling, a new stranger waits; the staff member does not — from the network
// where a session of theirs passed the second factor, nor from a browser holding the device cookie a
// second-factor pass gave it. A device cookie from a password alone, or another user's, is no such key.
func TestSecondFactorStrangersDoNotLockOut(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		u := r.staff(t, "owner@example.com") // its session started from 192.0.2.1, and passed at enrolment
		secret, codes := r.enrol(t, u)
		from := func(ip string) audit.Actor { return audit.StaffActor(&models.User{ID: u.ID, Email: u.Email}, ip) }
		for i := range auth.DefaultRates.SecondFactorPerUser.Burst {
			ip := fmt.Sprintf("203.0.113.%d", i+1)
			if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), "000000", from(ip), ""); !errors.Is(err, auth.ErrWrongCode) {
				t.Fatalf("stranger %d: %v", i+1, err)
			}
		}
		var throttled *auth.ThrottledError
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), r.code(t, secret, 30*time.Second), from("198.51.100.9"), ""); !errors.As(err, &throttled) {
			t.Fatalf("a new stranger past the ceiling, even with the right code: %v", err)
		}
		password := r.device(t, u.ID, false)
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[0], from("198.51.100.10"), password); !errors.As(err, &throttled) {
			t.Fatalf("a password-only device cookie opened the ceiling: %v", err)
		}
		otherUser := r.staff(t, "colleague@example.com")
		foreign := r.device(t, otherUser.ID, true)
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[0], from("198.51.100.11"), foreign); !errors.As(err, &throttled) {
			t.Fatalf("another user's device cookie opened the ceiling: %v", err)
		}

		// The owner, from their own network: in.
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), r.code(t, secret, 30*time.Second), actor(u), ""); err != nil {
			t.Fatalf("the owner from their own network: %v", err)
		}
		// The owner's browser that passed before, on a network never seen: in.
		mine := r.device(t, u.ID, true)
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[1], from("198.51.100.12"), mine); err != nil {
			t.Fatalf("the owner's browser on a new network: %v", err)
		}
		// A cookie altered, or signed under another secret, is none.
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[2], from("198.51.100.13"), altered(mine)); !errors.As(err, &throttled) {
			t.Fatalf("an altered device cookie opened the ceiling: %v", err)
		}
		elsewhere := &auth.Service{DB: r.db, Secrets: []string{"another-installation"}, Now: r.clock.now}
		stray, _, err := elsewhere.DeviceCookie(ctx, "", u.ID, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[2], from("198.51.100.14"), stray); !errors.As(err, &throttled) {
			t.Fatalf("a device cookie of another secret opened the ceiling: %v", err)
		}

		// One cookie copied to many networks gets one browser's tries: ten in 15 minutes, counted on the
		// cookie (it was used once above).
		for i := range 9 {
			ip := fmt.Sprintf("198.18.0.%d", i+1)
			if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), "000000", from(ip), mine); !errors.Is(err, auth.ErrWrongCode) {
				t.Fatalf("the cookie's use %d from a new network: %v", i+2, err)
			}
		}
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[2], from("198.18.0.99"), mine); !errors.As(err, &throttled) {
			t.Fatalf("the cookie's 11th use in 15 minutes: %v", err)
		}

		// A new password voids every cookie given before it.
		r.clock.add(time.Second) // a cookie of another second: one not yet counted
		before := r.device(t, u.ID, true)
		if err := r.db.W.Model(&models.User{}).Where("id = ?", u.ID).Update("password_hash", "a new password's hash").Error; err != nil {
			t.Fatal(err)
		}
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[2], from("198.18.1.1"), before); !errors.As(err, &throttled) {
			t.Fatalf("a cookie given before the password changed: %v", err)
		}
		if _, err := r.svc.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[2], from("198.18.1.2"), r.device(t, u.ID, true)); err != nil {
			t.Fatalf("a cookie given after the password changed: %v", err)
		}
	})
}

// TestDeviceCookieKeptOrRenewed: a sign-in keeps the browser's cookie while it says as much and is
// fresh, raises a password's to a second factor's, never lowers one, and renews one a month old.
func TestDeviceCookieKeptOrRenewed(t *testing.T) {
	r := newRig(t, testkit.SQLiteURL(t))
	ctx := context.Background()
	u := r.staff(t, "kept@example.com")
	pw := r.device(t, u.ID, false)
	if tok, changed, err := r.svc.DeviceCookie(ctx, pw, u.ID, false); err != nil || changed || tok != pw {
		t.Fatalf("a fresh password cookie at the next sign-in: changed %v, %v", changed, err)
	}
	r.clock.add(time.Second)
	sf, changed, err := r.svc.DeviceCookie(ctx, pw, u.ID, true)
	if err != nil || !changed || sf == pw {
		t.Fatalf("passing the second factor with a password cookie: changed %v, %v", changed, err)
	}
	if tok, changed, _ := r.svc.DeviceCookie(ctx, sf, u.ID, false); changed || tok != sf {
		t.Fatal("a password sign-in replaced a second factor's cookie with a password's")
	}
	other := r.staff(t, "someone-else@example.com")
	if _, changed, _ := r.svc.DeviceCookie(ctx, sf, other.ID, false); !changed {
		t.Fatal("another user's sign-in kept this user's cookie")
	}
	r.clock.add(31 * 24 * time.Hour)
	renewed, changed, _ := r.svc.DeviceCookie(ctx, sf, u.ID, false)
	if !changed || renewed == sf {
		t.Fatal("a month-old cookie was not renewed at a sign-in")
	}
	// The renewal keeps the second factor's level: it still opens the code's ceiling.
	if _, changed, _ := r.svc.DeviceCookie(ctx, renewed, u.ID, true); changed {
		t.Fatal("the renewed cookie lost the second factor's level")
	}
}

// TestTOTPSealing: the secret is sealed for its user under APP_SECRET, opens after a rotation that keeps
// the old value, and not on another user's row.
func TestTOTPSealing(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL, "old-secret")
		ctx := context.Background()
		u := r.staff(t, "rotate@example.com")
		secret, codes := r.enrol(t, u)

		rotated := &auth.Service{DB: r.svc.DB, Now: r.svc.Now, Throttle: r.svc.Throttle, Secrets: []string{"new-secret", "old-secret"}}
		if _, err := rotated.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), r.code(t, secret, 30*time.Second), actor(u), ""); err != nil {
			t.Fatalf("after a rotation keeping the old secret: %v", err)
		}
		if _, err := rotated.CheckSecondFactor(ctx, u.ID, r.session(t, u.ID), codes[0], actor(u), ""); err != nil {
			t.Fatalf("a recovery code after a rotation keeping the old secret: %v", err)
		}

		// A sealed secret copied onto another user's row does not open there.
		thief := r.staff(t, "thief@example.com")
		r.enrol(t, thief)
		if err := r.db.W.Model(&models.User{}).Where("id = ?", thief.ID).Update("totp_sealed", r.user(t, u.ID).TOTPSealed).Error; err != nil {
			t.Fatal(err)
		}
		r.clock.add(time.Minute)
		_, err := r.svc.CheckSecondFactor(ctx, thief.ID, thief.Session, r.code(t, secret, 0), actor(thief), "")
		if !errors.Is(err, seal.ErrUnsealable) {
			t.Fatalf("another user's sealed secret: %v", err)
		}
	})
}

func TestSecondFactorMark(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		r := newRig(t, dbURL)
		ctx := context.Background()
		a, b := r.staff(t, "a@example.com"), r.staff(t, "b@example.com")
		if err := r.svc.MarkSecondFactor(ctx, a.ID, b.Session); !errors.Is(err, auth.ErrNoSession) {
			t.Fatalf("marking another user's session: %v", err)
		}
		if r.passedAt(t, b.Session) != nil {
			t.Fatal("another user's session was marked")
		}
		if err := r.svc.MarkSecondFactor(ctx, a.ID, a.Session); err != nil || r.passedAt(t, a.Session) == nil {
			t.Fatalf("marking: %v", err)
		}
		if _, err := r.svc.CheckSecondFactor(ctx, b.ID, b.Session, "123456", actor(b), ""); !errors.Is(err, auth.ErrNotEnrolled) {
			t.Fatalf("a code without an authenticator: %v", err)
		}
	})
}
