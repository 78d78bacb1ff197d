package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"videogen/internal/domain/accounts"
	"videogen/models"
)

// SignUp is the sign-up form.
type SignUp struct {
	Email       string
	Password    string
	AcceptTerms bool
	// AccountName names the new account; "" names it after the e-mail's domain (accounts.DefaultName).
	AccountName string
	// BrowserProof is a random value the signing-up browser keeps (a cookie). Its hash goes with the
	// verification link of a new account, so that confirming from that browser signs the person in (see
	// Verify); for an address already registered it is stored nowhere, and the answer is the same.
	BrowserProof string
}

// dummyHash is checked against when no user matches, so a wrong e-mail costs the same time as a wrong
// password and sign-in timing does not tell which addresses are registered.
var dummyHash, _ = accounts.HashPassword("not a real password, only for timing")

// Register creates an unverified user and its account and e-mails a verification link. When the address
// is already registered it e-mails the owner instead and answers exactly the same way, so the form never
// reveals who has an account.
func (s *Service) Register(ctx context.Context, in SignUp, ip string) (FieldErrors, error) {
	if err := allow(ctx, s.Throttle.FormsPerIP, ip); err != nil {
		return nil, err
	}
	errs := FieldErrors{}
	email, err := accounts.NormalizeEmail(in.Email)
	if err != nil {
		errs["email"] = "Enter an e-mail address such as you@example.com."
	}
	if msg := CheckPassword(in.Password, in.Email); msg != "" {
		errs["password"] = msg
	}
	if !in.AcceptTerms {
		errs["terms"] = "Accept the terms of service and the privacy notice to create an account."
	}
	if strings.TrimSpace(in.AccountName) != "" {
		if _, err := accounts.CleanName(in.AccountName); err != nil {
			errs["account_name"] = accounts.NameProblem(err)
		}
	}
	if len(errs) > 0 {
		return errs, nil
	}
	hash, err := hashPassword(in.Password) // always, so both answers take as long
	if err != nil {
		return nil, err
	}
	if _, err := accounts.ByEmail(ctx, s.DB, email); err == nil {
		return nil, s.noticeExisting(ctx, email)
	}
	// Counted against the address's recovery budget, but never refused: a new address has had no mail
	// from us, and a refusal here would answer differently from the registered-address path.
	_ = allow(ctx, s.Throttle.Recovery, email)
	// The user, the verification link and its e-mail commit together: a crash leaves all or nothing.
	now := s.now()
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		u, err := accounts.CreateIn(tx, accounts.NewUser{Email: email, PasswordHash: hash, TermsAcceptedAt: &now, At: now,
			AccountName: strings.TrimSpace(in.AccountName)})
		if err != nil {
			return err
		}
		return s.queueVerification(tx, u, in.BrowserProof)
	})
	if errors.Is(err, accounts.ErrEmailTaken) {
		return nil, s.noticeExisting(ctx, email) // a concurrent sign-up won
	}
	if err != nil {
		return nil, err
	}
	return nil, nil
}

func (s *Service) noticeExisting(ctx context.Context, email string) error {
	if allow(ctx, s.Throttle.Notices, email) != nil {
		return nil // already told recently; stay silent rather than flood the inbox
	}
	// In a transaction of its own: the e-mail's record and its job commit together.
	return s.DB.Tx(ctx, func(tx *gorm.DB) error {
		return s.Notify.AlreadyRegistered(tx, email, s.BaseURL+"/signin", s.BaseURL+"/password/forgot")
	})
}

// ErrAccountDisabled is returned by SignIn, after the password was checked, for a user of an account
// staff disabled.
var ErrAccountDisabled = errors.New("the account is disabled")

// ErrRemoved is returned by SignIn, after the password was checked, for a member removed from their
// account (or who left it): the login stays for the history that names it, but opens nothing.
var ErrRemoved = errors.New("the member was removed from the account")

// SignIn checks an e-mail and password and returns the user. It is throttled per client, per client and
// address, and per address for clients the account does not know (trust.go). A user of a disabled
// account is refused with ErrAccountDisabled — only once the password is right, so the refusal tells
// nothing to someone who does not know it.
func (s *Service) SignIn(ctx context.Context, email, password string, c Client) (*models.User, error) {
	norm := strings.ToLower(strings.TrimSpace(email))
	if err := allowScoped(ctx, s.Throttle.SignInPerIP, c.IP, "network"); err != nil {
		return nil, err
	}
	if err := allowScoped(ctx, s.Throttle.SignInPerPair, pairKey(c.IP, norm), "address"); err != nil {
		return nil, err
	}
	if err := allowStranger(ctx, s.Throttle.SignInPerAddress, norm, func() (bool, error) { return s.knownForSignIn(ctx, norm, c) }); err != nil {
		return nil, err
	}
	if len(password) > MaxPasswordLength {
		return nil, ErrBadCredentials
	}
	u, err := accounts.ByEmail(ctx, s.DB, norm)
	if err != nil || u.PasswordHash == "" {
		_, _ = checkPassword(dummyHash, password)
		if err != nil && !errors.Is(err, accounts.ErrNoSuchUser) && !strings.Contains(err.Error(), "not an e-mail address") {
			return nil, err
		}
		return nil, ErrBadCredentials
	}
	ok, err := checkPassword(u.PasswordHash, password)
	if err != nil {
		return nil, fmt.Errorf("check password of user %d: %w", u.ID, err)
	}
	if !ok {
		return nil, ErrBadCredentials
	}
	if u.Removed() {
		return nil, ErrRemoved
	}
	var acct models.Account
	if err := s.DB.R.WithContext(ctx).Select("id", "disabled_at").Take(&acct, u.AccountID).Error; err != nil {
		return nil, fmt.Errorf("read the account of user %d: %w", u.ID, err)
	}
	if acct.Disabled() {
		return nil, ErrAccountDisabled
	}
	return u, nil
}

// SendVerification e-mails a fresh verification link (throttled per address, out of its recovery budget:
// only the signed-in user asks for it).
func (s *Service) SendVerification(ctx context.Context, u *models.User) error {
	if u.Verified() {
		return nil
	}
	if err := allow(ctx, s.Throttle.Recovery, u.Email); err != nil {
		return err
	}
	return s.DB.Tx(ctx, func(tx *gorm.DB) error { return s.queueVerification(tx, u, "") })
}

// queueVerification issues a verification link (bound to a sign-up's browser proof, if any) and queues
// its e-mail in tx.
func (s *Service) queueVerification(tx *gorm.DB, u *models.User, browserProof string) error {
	raw, err := s.issueTokenFor(tx, u.ID, models.PurposeVerify, VerifyTTL, browserProof)
	if err != nil {
		return err
	}
	return s.Notify.VerifyEmail(tx, u.Email, s.BaseURL+"/verify?token="+raw)
}

// CheckVerifyToken reports whether a verification link is still good, without spending it.
func (s *Service) CheckVerifyToken(ctx context.Context, raw string) error {
	_, err := s.peekToken(ctx, raw, models.PurposeVerify)
	return err
}

// Verify spends a verification link and marks the address verified. signedUpHere reports whether
// browserProof is the proof of the sign-up that sent this link — the browser confirming is the one that
// signed up, so it may be signed in. A link alone, or a proof from any other sign-up (even one made for
// the same address), never reports it.
func (s *Service) Verify(ctx context.Context, raw, browserProof string) (u *models.User, signedUpHere bool, err error) {
	u = &models.User{}
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		userID, proofHash, err := s.useToken(tx, raw, models.PurposeVerify)
		if err != nil {
			return err
		}
		signedUpHere = proofHash != "" && browserProof != "" &&
			subtle.ConstantTimeCompare([]byte(proofHash), []byte(hashToken(browserProof))) == 1
		if err := tx.Model(&models.User{}).Where("id = ? AND email_verified_at IS NULL", userID).Update("email_verified_at", s.now()).Error; err != nil {
			return fmt.Errorf("mark verified: %w", err)
		}
		return tx.Take(u, userID).Error
	})
	if err != nil {
		return nil, false, err
	}
	return u, signedUpHere, nil
}

// CheckResetToken reports whether a reset link is still good, before the form is shown.
func (s *Service) CheckResetToken(ctx context.Context, raw string) error {
	_, err := s.peekToken(ctx, raw, models.PurposeReset)
	return err
}

// ResetPassword sets a new password with a reset link and signs the user out everywhere. A reset also
// proves the address, so an unverified user becomes verified.
func (s *Service) ResetPassword(ctx context.Context, raw, password string) (*models.User, FieldErrors, error) {
	userID, err := s.peekToken(ctx, raw, models.PurposeReset)
	if err != nil {
		return nil, nil, err
	}
	var u models.User
	if err := s.DB.R.WithContext(ctx).Take(&u, userID).Error; err != nil {
		return nil, nil, fmt.Errorf("read user: %w", err)
	}
	if msg := CheckPassword(password, u.Email); msg != "" {
		return nil, FieldErrors{"password": msg}, nil
	}
	hash, err := hashPassword(password)
	if err != nil {
		return nil, nil, err
	}
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if _, _, err := s.useToken(tx, raw, models.PurposeReset); err != nil {
			return err
		}
		now := s.now()
		updates := map[string]any{"password_hash": hash, "updated_at": now}
		if u.EmailVerifiedAt == nil {
			updates["email_verified_at"] = now
		}
		if err := tx.Model(&models.User{}).Where("id = ?", u.ID).Updates(updates).Error; err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		return s.EndAllSessions(ctx, tx, u.ID)
	})
	if err != nil {
		return nil, nil, err
	}
	return &u, nil, nil
}

// ChangePassword replaces a signed-in user's password and ends all their sessions.
func (s *Service) ChangePassword(ctx context.Context, u *models.User, current, next string) (FieldErrors, error) {
	// Guessing the current password here needs a session of the user: the budget is the user's, wherever
	// the guesses come from (a stolen session cookie on many networks gets no more), and no stranger can
	// spend it.
	if err := allowScoped(ctx, s.Throttle.SignInPerPair, "session-user "+strconv.FormatInt(u.ID, 10), "address"); err != nil {
		return nil, err
	}
	ok, err := checkPassword(u.PasswordHash, current)
	if err != nil && u.PasswordHash != "" {
		return nil, err
	}
	if !ok {
		return FieldErrors{"current": "This is not your current password."}, nil
	}
	if msg := CheckPassword(next, u.Email); msg != "" {
		return FieldErrors{"password": msg}, nil
	}
	hash, err := hashPassword(next)
	if err != nil {
		return nil, err
	}
	return nil, s.DB.Tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Model(&models.User{}).Where("id = ?", u.ID).Updates(map[string]any{"password_hash": hash, "updated_at": s.now()}).Error; err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		return s.EndAllSessions(ctx, tx, u.ID)
	})
}
