// Package auth signs people up and in: passwords, console sessions, e-mail verification and password
// reset, each throttled against guessing and abuse. It knows nothing of HTTP; handlers set the cookies.
package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/accounts"
	"videogen/internal/db"
	"videogen/internal/ratelimit"
)

// Errors the console turns into messages.
var (
	ErrBadCredentials = errors.New("the e-mail or password is not right")
	ErrBadToken       = errors.New("this link is invalid, already used or expired")
	ErrNoSession      = errors.New("not signed in")
)

// ThrottledError says an action was refused for being repeated too fast, by which limit, and for how long.
type ThrottledError struct {
	RetryAfter time.Duration
	Scope      string // "address" or "network": whose attempts ran out
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many attempts; try again in %s", e.Wait())
}

// Wait says in words how long to wait: "a minute", "12 minutes".
func (e *ThrottledError) Wait() string { return humanWait(e.RetryAfter) }

func humanWait(d time.Duration) string {
	switch {
	case d <= time.Minute:
		return "a minute"
	case d < time.Hour:
		return fmt.Sprintf("%d minutes", int(d.Minutes()+0.99))
	default:
		return fmt.Sprintf("%d hours", int(d.Hours()+0.99))
	}
}

// FieldErrors maps a form field to what is wrong with it.
type FieldErrors map[string]string

// Notifier queues the e-mails auth needs, inside the transaction that issues their link (the link already
// carries the token), and is woken once that transaction commits.
type Notifier interface {
	VerifyEmail(tx *gorm.DB, to, link string) error
	ResetPassword(tx *gorm.DB, to, link string) error
	AlreadyRegistered(tx *gorm.DB, to, signInLink, resetLink string) error
	Wake()
}

// Throttles are the limiters of the actions that can be abused.
type Throttles struct {
	SignInPerEmail ratelimit.Limiter // guessing one account's password
	SignInPerIP    ratelimit.Limiter // guessing across accounts
	Mail           ratelimit.Limiter // e-mails to one address (verification, reset, sign-up notices)
	FormsPerIP     ratelimit.Limiter // sign-ups and reset requests from one client (spam, hashing load)
}

// DefaultRates are the throttles' rates: 10 sign-in attempts per address (enough for a person who
// mistypes, few for a guesser) and 30 per IP per 15 minutes, 3 e-mails to one address and 20 sign-up or
// reset forms per IP per 10 minutes.
var DefaultRates = struct{ SignInPerEmail, SignInPerIP, Mail, FormsPerIP ratelimit.Rate }{
	SignInPerEmail: ratelimit.Rate{Events: 10, Per: 15 * time.Minute, Burst: 10},
	SignInPerIP:    ratelimit.Rate{Events: 30, Per: 15 * time.Minute, Burst: 30},
	Mail:           ratelimit.Rate{Events: 3, Per: 10 * time.Minute, Burst: 3},
	FormsPerIP:     ratelimit.Rate{Events: 20, Per: 10 * time.Minute, Burst: 20},
}

// NewThrottles builds the throttles in a store (shared through Redis when it is one).
func NewThrottles(store *ratelimit.Store) Throttles {
	return Throttles{
		SignInPerEmail: store.Limiter("videogen:signin-email:", DefaultRates.SignInPerEmail),
		SignInPerIP:    store.Limiter("videogen:signin-ip:", DefaultRates.SignInPerIP),
		Mail:           store.Limiter("videogen:mail:", DefaultRates.Mail),
		FormsPerIP:     store.Limiter("videogen:forms-ip:", DefaultRates.FormsPerIP),
	}
}

// Service is the sign-up, sign-in and account-recovery logic.
type Service struct {
	DB       *db.DB
	Notify   Notifier
	BaseURL  string // PUBLIC_BASE_URL: links in e-mails start with it
	Throttle Throttles
	Now      func() time.Time
	// Secrets are the APP_SECRET values: the first seals staff members' TOTP secrets and keys their
	// recovery-code hashes, every one opens and checks them (internal/seal).
	Secrets []string
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC().Truncate(time.Microsecond)
	}
	return db.Now()
}

// allow takes one token from l for key, turning a refusal into a *ThrottledError.
func allow(ctx context.Context, l ratelimit.Limiter, key string) error {
	return allowScoped(ctx, l, key, "")
}

func allowScoped(ctx context.Context, l ratelimit.Limiter, key, scope string) error {
	ok, wait, err := l.Allow(ctx, key)
	if err != nil {
		return nil // a limiter outage must not lock everyone out; the database still checks passwords
	}
	if !ok {
		return &ThrottledError{RetryAfter: wait, Scope: scope}
	}
	return nil
}

// hashing bounds how many argon2 computations (19 MiB each) run at once, so a flood of sign-ups or
// sign-ins queues instead of exhausting memory.
var hashing = make(chan struct{}, 4)

func hashPassword(p string) (string, error) {
	hashing <- struct{}{}
	defer func() { <-hashing }()
	return accounts.HashPassword(p)
}

func checkPassword(hash, p string) (bool, error) {
	hashing <- struct{}{}
	defer func() { <-hashing }()
	return accounts.CheckPassword(hash, p)
}

func hashToken(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}
