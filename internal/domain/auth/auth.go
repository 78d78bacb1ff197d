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

	"videogen/internal/domain/accounts"
	"videogen/internal/infra/db"
	"videogen/internal/infra/queue"
	"videogen/internal/infra/ratelimit"
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
// carries the token): each e-mail is a record and a job, committed or rolled back with the link.
type Notifier interface {
	VerifyEmail(tx *gorm.DB, to, link string) error
	ResetPassword(tx *gorm.DB, to, link string) error
	AlreadyRegistered(tx *gorm.DB, to, signInLink, resetLink string) error
}

// Throttles are the limiters of the actions that can be abused. A nil limiter limits nothing (tests
// that exercise one throttle leave the others out); NewThrottles sets them all.
type Throttles struct {
	// Sign-in and the current password on the account page (trust.go says how they combine).
	SignInPerPair    ratelimit.Limiter // one client guessing one address's password
	SignInPerAddress ratelimit.Limiter // every client the account does not know, together, per address
	SignInPerIP      ratelimit.Limiter // one client guessing across addresses
	// A staff member's second factor, the same way: per client and staff member, and a ceiling per staff
	// member for clients their account does not know.
	SecondFactorPerPair ratelimit.Limiter
	SecondFactorPerUser ratelimit.Limiter
	// E-mails to one address come out of two budgets (docs/decisions.md, "Account-recovery mail has a
	// budget of its own"). Notices is what anyone can cause to be sent to an address: the notice that
	// someone tried to sign up with it, and invitations from any account (internal/domain/members).
	// Recovery is the address's own account recovery: its verification links, and its reset links —
	// counted by address when the reset was asked from a client the account knows (trust.go), and for
	// every other client by address and the client's network, under RecoveryStrangers' ceiling per
	// address — so nothing a stranger sends spends what the owner needs, and one stranger's network cannot
	// spend what an owner on a new device and network needs either.
	Notices           ratelimit.Limiter
	Recovery          ratelimit.Limiter
	RecoveryStrangers ratelimit.Limiter
	FormsPerIP        ratelimit.Limiter // sign-ups and reset requests from one client (spam, hashing load)
}

// DefaultRates are the throttles' rates. Sign-in: 10 attempts per client and address in 15 minutes
// (enough for a person who mistypes, few for a guesser), 30 per client across addresses, and per address
// from clients the account does not know 100 at once, then 300 a day — ten strangers' failures no longer
// lock the owner out, and a guesser spread over a hundred networks gets fewer tries a day (about 400) than
// one address's limit gave before (960). The second factor: 10
// codes per client and staff member, and 20 per staff member from unknown clients, in 15 minutes — no
// more than the 10 per staff member before, doubled, since a code is guessed only by someone who already
// has the password. Mail: 3 notices and 3 recovery e-mails to one address per 10 minutes (and as many
// reset e-mails asked from each network the account does not know, at most 10 an hour from all of
// them), and 20 sign-up or reset forms per client per 10 minutes.
var DefaultRates = struct {
	SignInPerPair, SignInPerAddress, SignInPerIP, SecondFactorPerPair, SecondFactorPerUser, Notices, Recovery, RecoveryStrangers, FormsPerIP ratelimit.Rate
}{
	SignInPerPair:       ratelimit.Rate{Events: 10, Per: 15 * time.Minute, Burst: 10},
	SignInPerAddress:    ratelimit.Rate{Events: 300, Per: 24 * time.Hour, Burst: 100},
	SignInPerIP:         ratelimit.Rate{Events: 30, Per: 15 * time.Minute, Burst: 30},
	SecondFactorPerPair: ratelimit.Rate{Events: 10, Per: 15 * time.Minute, Burst: 10},
	SecondFactorPerUser: ratelimit.Rate{Events: 20, Per: 15 * time.Minute, Burst: 20},
	Notices:             ratelimit.Rate{Events: 3, Per: 10 * time.Minute, Burst: 3},
	Recovery:            ratelimit.Rate{Events: 3, Per: 10 * time.Minute, Burst: 3},
	RecoveryStrangers:   ratelimit.Rate{Events: 10, Per: time.Hour, Burst: 10},
	FormsPerIP:          ratelimit.Rate{Events: 20, Per: 10 * time.Minute, Burst: 20},
}

// NewThrottles builds the throttles in a store (shared through Redis when it is one).
func NewThrottles(store *ratelimit.Store) Throttles {
	return Throttles{
		SignInPerPair:       store.Limiter("videogen:signin-pair:", DefaultRates.SignInPerPair),
		SignInPerAddress:    store.Limiter("videogen:signin-address:", DefaultRates.SignInPerAddress),
		SignInPerIP:         store.Limiter("videogen:signin-ip:", DefaultRates.SignInPerIP),
		SecondFactorPerPair: store.Limiter("videogen:2fa-pair:", DefaultRates.SecondFactorPerPair),
		SecondFactorPerUser: store.Limiter("videogen:2fa-user:", DefaultRates.SecondFactorPerUser),
		Notices:             store.Limiter("videogen:mail:", DefaultRates.Notices),
		Recovery:            store.Limiter("videogen:mail-recovery:", DefaultRates.Recovery),
		RecoveryStrangers:   store.Limiter("videogen:mail-recovery-strangers:", DefaultRates.RecoveryStrangers),
		FormsPerIP:          store.Limiter("videogen:forms-ip:", DefaultRates.FormsPerIP),
	}
}

// Service is the sign-up, sign-in and account-recovery logic.
type Service struct {
	DB       *db.DB
	Notify   Notifier
	BaseURL  string // PUBLIC_BASE_URL: links in e-mails start with it
	Throttle Throttles
	Now      func() time.Time
	// Queue takes the password-reset requests (reset.go); its worker is added by ResetWorker.
	Queue *queue.Queue
	// Secrets are the APP_SECRET values: the first seals staff members' TOTP secrets, keys their
	// recovery-code hashes and signs device cookies; every one opens and checks them (internal/infra/seal).
	Secrets []string
}

func (s *Service) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// allow takes one token from l for key, turning a refusal into a *ThrottledError.
func allow(ctx context.Context, l ratelimit.Limiter, key string) error {
	return allowScoped(ctx, l, key, "")
}

func allowScoped(ctx context.Context, l ratelimit.Limiter, key, scope string) error {
	if l == nil {
		return nil
	}
	ok, wait, err := l.Allow(ctx, key)
	if err != nil {
		return nil // a limiter outage must not lock everyone out; the database still checks passwords
	}
	if !ok {
		return &ThrottledError{RetryAfter: wait, Scope: scope}
	}
	return nil
}

// allowStranger takes one token for key from a ceiling shared by the clients an account does not know.
// Once the ceiling is reached, a client known tells it apart from the strangers (trust.go) and goes on.
func allowStranger(ctx context.Context, l ratelimit.Limiter, key string, known func() (bool, error)) error {
	err := allowScoped(ctx, l, key, "address")
	if err == nil {
		return nil
	}
	ok, kerr := known()
	if kerr != nil {
		return kerr
	}
	if ok {
		return nil
	}
	return err
}

// pairKey is the limiter key of one client and one address or user.
func pairKey(ip, who string) string { return ip + " " + who }

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
