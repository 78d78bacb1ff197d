package auth

// The second factor of staff sign-in (docs/support.md): an authenticator app (TOTP, RFC 6238, through
// github.com/pquerna/otp) and ten single-use recovery codes for when the phone is lost. A session passes
// it once (sessions.second_factor_at); signing in again starts a session that has not.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"image/png"
	"strconv"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"
	"gorm.io/gorm"

	"videogen/internal/domain/audit"
	"videogen/internal/infra/seal"
	"videogen/models"
)

// The authenticator's parameters: those every app supports (Google Authenticator ignores any other).
const (
	totpIssuer     = "videogen"
	totpPeriod     = 30 // seconds per code
	totpSecretSize = 20 // bytes: 160 bits, the size RFC 4226 recommends for HMAC-SHA-1
	// totpSkew is how many steps either side of now are accepted: a phone's clock a little off, or a code
	// typed just as it changed. Each step more also gives a guesser two more right answers, so only one.
	totpSkew = 1
)

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// RecoveryCodeCount is how many recovery codes a staff member holds.
const RecoveryCodeCount = 10

// recoveryAlphabet has no character that reads as another (no 0/o, 1/l/i), all lowercase so that
// nobody wonders about case: 31 symbols, 8 per code, about 40 bits.
const recoveryAlphabet = "23456789abcdefghjkmnpqrstuvwxyz"

// Errors the second-factor pages turn into messages.
var (
	ErrWrongCode       = errors.New("the code is not right, has expired or was already used")
	ErrNotEnrolled     = errors.New("no authenticator is set up")
	ErrAlreadyEnrolled = errors.New("an authenticator is already set up")
)

// TOTPEnrolment is an authenticator being set up: the key its app adds, by QR code or typed.
type TOTPEnrolment struct {
	Key *otp.Key
}

// Secret is the key as a person types it (base32, no padding).
func (e *TOTPEnrolment) Secret() string { return e.Key.Secret() }

// QRCodePNG is the key's otpauth:// URL as a QR code, size pixels square.
func (e *TOTPEnrolment) QRCodePNG(size int) ([]byte, error) {
	img, err := e.Key.Image(size, size)
	if err != nil {
		return nil, fmt.Errorf("draw the TOTP QR code: %w", err)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("encode the TOTP QR code: %w", err)
	}
	return buf.Bytes(), nil
}

// SecondFactorPass says how a session passed the second factor.
type SecondFactorPass struct {
	Recovery     bool  // with a recovery code (now spent), not the authenticator
	RecoveryLeft int64 // the unused recovery codes left, when Recovery
}

// BeginTOTP returns the authenticator a staff member is setting up. The secret is made once and kept
// sealed in users.totp_sealed (totp_enabled_at still NULL), so reloading the page, or a second tab,
// shows the same one until a code confirms it; ErrAlreadyEnrolled once one has.
func (s *Service) BeginTOTP(ctx context.Context, userID int64) (*TOTPEnrolment, error) {
	sealer, err := seal.New(s.Secrets, seal.TOTPSecret)
	if err != nil {
		return nil, err
	}
	// A second request storing its secret first makes this one read again, and show that secret.
	for range 3 {
		var u models.User
		if err := s.DB.R.WithContext(ctx).Take(&u, userID).Error; err != nil {
			return nil, fmt.Errorf("read user %d: %w", userID, err)
		}
		if u.TOTPEnabledAt != nil {
			return nil, ErrAlreadyEnrolled
		}
		if len(u.TOTPSealed) > 0 {
			raw, err := sealer.Open(u.TOTPSealed, totpAD(u.ID))
			if err == nil {
				return enrolment(u.Email, raw)
			}
			if !errors.Is(err, seal.ErrUnsealable) {
				return nil, fmt.Errorf("open the pending TOTP secret of user %d: %w", u.ID, err)
			}
			// Sealed under an APP_SECRET since removed: nobody can have confirmed it, so replace it.
		}
		raw := make([]byte, totpSecretSize)
		if _, err := rand.Read(raw); err != nil {
			return nil, fmt.Errorf("make a TOTP secret: %w", err)
		}
		box, err := sealer.Seal(raw, totpAD(u.ID))
		if err != nil {
			return nil, fmt.Errorf("seal the TOTP secret of user %d: %w", u.ID, err)
		}
		q := s.DB.W.WithContext(ctx).Model(&models.User{}).Where("id = ? AND totp_enabled_at IS NULL", u.ID)
		if len(u.TOTPSealed) == 0 {
			// None yet: NULL, or on SQLite an empty blob (GORM writes a nil []byte as one).
			q = q.Where("(totp_sealed IS NULL OR length(totp_sealed) = 0)")
		} else {
			q = q.Where("totp_sealed = ?", u.TOTPSealed)
		}
		res := q.Updates(map[string]any{"totp_sealed": box, "updated_at": s.now()})
		if res.Error != nil {
			return nil, fmt.Errorf("store the TOTP secret of user %d: %w", u.ID, res.Error)
		}
		if res.RowsAffected == 1 {
			return enrolment(u.Email, raw)
		}
	}
	return nil, fmt.Errorf("set up TOTP for user %d: the pending secret kept changing", userID)
}

// ConfirmTOTP turns the pending authenticator on with a code it shows, in one transaction with what
// follows from it: the code's time step is spent, ten recovery codes replace any earlier ones, the
// session has passed the second factor, and the audit log says so. It returns the recovery codes, which
// are stored only hashed: this is the one time they can be shown. ErrWrongCode when the code is not
// the authenticator's of now.
//
// Unlike CheckSecondFactor it is not throttled: the page asking for this code shows the secret itself,
// so guessing it gains nothing.
func (s *Service) ConfirmTOTP(ctx context.Context, userID, sessionID int64, code string, who audit.Actor) ([]string, error) {
	code = normalizeCode(code)
	if !isTOTPCode(code) {
		return nil, ErrWrongCode
	}
	sealer, err := seal.New(s.Secrets, seal.TOTPSecret)
	if err != nil {
		return nil, err
	}
	mac, err := seal.NewMAC(s.Secrets, seal.RecoveryCode)
	if err != nil {
		return nil, err
	}
	var codes []string
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var u models.User
		if err := tx.Take(&u, userID).Error; err != nil {
			return fmt.Errorf("read user %d: %w", userID, err)
		}
		switch {
		case u.TOTPEnabledAt != nil:
			return ErrAlreadyEnrolled
		case len(u.TOTPSealed) == 0:
			return ErrNotEnrolled // the page was never shown: nothing to confirm
		}
		raw, err := sealer.Open(u.TOTPSealed, totpAD(u.ID))
		if err != nil {
			return fmt.Errorf("open the pending TOTP secret of user %d: %w", u.ID, err)
		}
		now := s.now()
		step, ok := matchStep(raw, code, now, u.TOTPLastStep)
		if !ok {
			return ErrWrongCode
		}
		// Guarded by the secret that was checked: a second tab's confirmation, or a new pending secret,
		// in between makes this one change nothing.
		res := tx.Model(&models.User{}).Where("id = ? AND totp_enabled_at IS NULL AND totp_sealed = ?", u.ID, u.TOTPSealed).
			Updates(map[string]any{"totp_enabled_at": now, "totp_last_step": step, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("turn on TOTP for user %d: %w", u.ID, res.Error)
		}
		if res.RowsAffected != 1 {
			return ErrAlreadyEnrolled
		}
		if codes, err = replaceRecoveryCodes(tx, mac, u.ID, now); err != nil {
			return err
		}
		if err := markSecondFactor(tx, u.ID, sessionID, now); err != nil {
			return err
		}
		return audit.Record(ctx, tx, now, who, audit.Entry{Action: audit.EnrolTOTP, TargetType: audit.TargetUser, TargetID: userRef(u.ID),
			Detail: "authenticator confirmed; " + strconv.Itoa(RecoveryCodeCount) + " recovery codes issued; this session passed the second factor"})
	})
	if err != nil {
		return nil, err
	}
	return codes, nil
}

// CheckSecondFactor passes a session through the second factor with a code of the user's authenticator
// or one of their recovery codes (told apart by their form), and records it in the audit log.
//
// A code is good once: an authenticator code's time step must be later than the last one accepted
// (users.totp_last_step), and a recovery code is spent. Both are spent by an UPDATE guarded by what was
// checked, so two requests racing with one code cannot both pass. Every attempt, right or wrong, counts
// against throttles (*ThrottledError): a six-digit code is otherwise guessable. They are the sign-in's,
// per client and staff member and per staff member for clients their account does not know (trust.go),
// so a code guessed from elsewhere never locks the staff member out of their own browser. device is the
// browser's device cookie ("" when none).
func (s *Service) CheckSecondFactor(ctx context.Context, userID, sessionID int64, code string, who audit.Actor, device string) (SecondFactorPass, error) {
	var pass SecondFactorPass
	if err := allowScoped(ctx, s.Throttle.SecondFactorPerPair, pairKey(who.IP, userRef(userID)), "address"); err != nil {
		return pass, err
	}
	known := func() (bool, error) { return s.knownForSecondFactor(ctx, userID, Client{IP: who.IP, Device: device}) }
	if err := allowStranger(ctx, s.Throttle.SecondFactorPerUser, userRef(userID), known); err != nil {
		return pass, err
	}
	code = normalizeCode(code)
	var check func(tx *gorm.DB, u *models.User, now time.Time) error
	switch {
	case isTOTPCode(code):
		sealer, err := seal.New(s.Secrets, seal.TOTPSecret)
		if err != nil {
			return pass, err
		}
		check = func(tx *gorm.DB, u *models.User, now time.Time) error {
			raw, err := sealer.Open(u.TOTPSealed, totpAD(u.ID))
			if err != nil {
				return fmt.Errorf("open the TOTP secret of user %d: %w", u.ID, err)
			}
			step, ok := matchStep(raw, code, now, u.TOTPLastStep)
			if !ok {
				return ErrWrongCode
			}
			res := tx.Model(&models.User{}).Where("id = ? AND totp_last_step < ?", u.ID, step).Update("totp_last_step", step)
			if res.Error != nil {
				return fmt.Errorf("spend the TOTP step of user %d: %w", u.ID, res.Error)
			}
			if res.RowsAffected != 1 {
				return ErrWrongCode // the same code (or a later one), accepted for another request meanwhile
			}
			return audit.Record(ctx, tx, now, who, audit.Entry{Action: audit.SecondFactor,
				TargetType: audit.TargetUser, TargetID: userRef(u.ID), Detail: "authenticator code"})
		}
	case isRecoveryCode(code):
		mac, err := seal.NewMAC(s.Secrets, seal.RecoveryCode)
		if err != nil {
			return pass, err
		}
		check = func(tx *gorm.DB, u *models.User, now time.Time) error {
			res := tx.Model(&models.RecoveryCode{}).
				Where("user_id = ? AND used_at IS NULL AND code_hash IN ?", u.ID, mac.Sums(recoveryMessage(u.ID, code))).
				Update("used_at", now)
			if res.Error != nil {
				return fmt.Errorf("spend a recovery code of user %d: %w", u.ID, res.Error)
			}
			if res.RowsAffected == 0 {
				return ErrWrongCode
			}
			pass.Recovery = true
			if err := tx.Model(&models.RecoveryCode{}).Where("user_id = ? AND used_at IS NULL", u.ID).Count(&pass.RecoveryLeft).Error; err != nil {
				return fmt.Errorf("count recovery codes of user %d: %w", u.ID, err)
			}
			if err := audit.Record(ctx, tx, now, who, audit.Entry{Action: audit.RecoveryUsed, TargetType: audit.TargetUser,
				TargetID: userRef(u.ID), Detail: strconv.FormatInt(pass.RecoveryLeft, 10) + " recovery codes left"}); err != nil {
				return err
			}
			return audit.Record(ctx, tx, now, who, audit.Entry{Action: audit.SecondFactor,
				TargetType: audit.TargetUser, TargetID: userRef(u.ID), Detail: "recovery code"})
		}
	default:
		return pass, ErrWrongCode
	}
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var u models.User
		if err := tx.Take(&u, userID).Error; err != nil {
			return fmt.Errorf("read user %d: %w", userID, err)
		}
		if u.TOTPEnabledAt == nil || len(u.TOTPSealed) == 0 {
			return ErrNotEnrolled
		}
		now := s.now()
		if err := check(tx, &u, now); err != nil {
			return err
		}
		return markSecondFactor(tx, u.ID, sessionID, now)
	})
	if err != nil {
		return SecondFactorPass{}, err
	}
	return pass, nil
}

// NewRecoveryCodes replaces a staff member's unused recovery codes with ten new ones and returns them
// (to be shown once). Spent codes stay, as a record.
func (s *Service) NewRecoveryCodes(ctx context.Context, userID int64, who audit.Actor) ([]string, error) {
	mac, err := seal.NewMAC(s.Secrets, seal.RecoveryCode)
	if err != nil {
		return nil, err
	}
	var codes []string
	err = s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var u models.User
		if err := tx.Take(&u, userID).Error; err != nil {
			return fmt.Errorf("read user %d: %w", userID, err)
		}
		if u.TOTPEnabledAt == nil {
			return ErrNotEnrolled
		}
		now := s.now()
		var err error
		if codes, err = replaceRecoveryCodes(tx, mac, u.ID, now); err != nil {
			return err
		}
		return audit.Record(ctx, tx, now, who, audit.Entry{Action: audit.RecoveryReset, TargetType: audit.TargetUser,
			TargetID: userRef(u.ID), Detail: strconv.Itoa(RecoveryCodeCount) + " new recovery codes; the unused ones before no longer work"})
	})
	if err != nil {
		return nil, err
	}
	return codes, nil
}

// RecoveryCodesLeft counts a user's unused recovery codes.
func (s *Service) RecoveryCodesLeft(ctx context.Context, userID int64) (int64, error) {
	var n int64
	if err := s.DB.R.WithContext(ctx).Model(&models.RecoveryCode{}).Where("user_id = ? AND used_at IS NULL", userID).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count recovery codes of user %d: %w", userID, err)
	}
	return n, nil
}

// MarkSecondFactor records that a user's session passed the second factor (ErrNoSession when it is not
// theirs or no longer live). ConfirmTOTP and CheckSecondFactor do it themselves, with their check.
func (s *Service) MarkSecondFactor(ctx context.Context, userID, sessionID int64) error {
	return markSecondFactor(s.DB.W.WithContext(ctx), userID, sessionID, s.now())
}

func markSecondFactor(tx *gorm.DB, userID, sessionID int64, now time.Time) error {
	res := tx.Model(&models.Session{}).Where("id = ? AND user_id = ? AND revoked_at IS NULL AND expires_at > ?", sessionID, userID, now).
		Update("second_factor_at", now)
	if res.Error != nil {
		return fmt.Errorf("mark session %d past the second factor: %w", sessionID, res.Error)
	}
	if res.RowsAffected != 1 {
		return ErrNoSession
	}
	return nil
}

// ForgetSecondFactor makes every session of a user pass the second factor again, inside tx. A role
// change calls it: a pass earned under one role must not carry staff reach granted later (demoted, then
// promoted again, an old browser would otherwise walk straight back in).
func ForgetSecondFactor(tx *gorm.DB, userID int64) error {
	err := tx.Model(&models.Session{}).Where("user_id = ? AND second_factor_at IS NOT NULL", userID).Update("second_factor_at", nil).Error
	if err != nil {
		return fmt.Errorf("forget the second factor of user %d's sessions: %w", userID, err)
	}
	return nil
}

// enrolment is the authenticator key of a secret, named for the app's list: "videogen (e-mail)".
func enrolment(email string, secret []byte) (*TOTPEnrolment, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: totpIssuer, AccountName: email, Period: totpPeriod,
		Secret: secret, Digits: totpOpts.Digits, Algorithm: totpOpts.Algorithm})
	if err != nil {
		return nil, fmt.Errorf("make the TOTP key: %w", err)
	}
	return &TOTPEnrolment{Key: key}, nil
}

// totpAD binds a sealed secret to its user's row: copied onto another user, it does not open.
func totpAD(userID int64) []byte { return []byte("users.totp_sealed\x00" + userRef(userID)) }

// matchStep returns the time step within totpSkew of now whose code is code and which is later than
// after (the last step accepted: a code is good once), or false.
func matchStep(secret []byte, code string, now time.Time, after int64) (int64, bool) {
	b32 := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(secret)
	current := now.Unix() / totpPeriod
	matched, ok := int64(0), false
	for step := current - totpSkew; step <= current+totpSkew; step++ {
		want, err := totp.GenerateCodeCustom(b32, time.Unix(step*totpPeriod, 0), totpOpts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 && step > after {
			matched, ok = step, true
		}
	}
	return matched, ok
}

// replaceRecoveryCodes deletes a user's unused recovery codes and stores ten new ones, hashed; it
// returns them as shown: "k7m2-x9qp".
func replaceRecoveryCodes(tx *gorm.DB, mac *seal.MAC, userID int64, now time.Time) ([]string, error) {
	if err := tx.Where("user_id = ? AND used_at IS NULL", userID).Delete(&models.RecoveryCode{}).Error; err != nil {
		return nil, fmt.Errorf("delete the recovery codes of user %d: %w", userID, err)
	}
	codes := make([]string, RecoveryCodeCount)
	rows := make([]models.RecoveryCode, RecoveryCodeCount)
	for i := range codes {
		raw, err := newRecoveryCode()
		if err != nil {
			return nil, err
		}
		codes[i] = raw[:4] + "-" + raw[4:]
		rows[i] = models.RecoveryCode{UserID: userID, CodeHash: mac.Sum(recoveryMessage(userID, raw)), CreatedAt: now}
	}
	if err := tx.Create(&rows).Error; err != nil {
		return nil, fmt.Errorf("store the recovery codes of user %d: %w", userID, err)
	}
	return codes, nil
}

// newRecoveryCode is 8 random symbols of recoveryAlphabet.
func newRecoveryCode() (string, error) {
	const n = len(recoveryAlphabet)
	out := make([]byte, 0, 8)
	buf := make([]byte, 16)
	for len(out) < 8 {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("make a recovery code: %w", err)
		}
		for _, b := range buf {
			// Bytes past the last whole multiple of n are skipped, so every symbol is equally likely.
			if int(b) < 256-256%n && len(out) < 8 {
				out = append(out, recoveryAlphabet[int(b)%n])
			}
		}
	}
	return string(out), nil
}

// recoveryMessage is what a recovery code's hash is of: the code bound to its user, so a hash copied
// onto another user's row matches nothing.
func recoveryMessage(userID int64, code string) []byte {
	return []byte("user " + userRef(userID) + "\x00" + code)
}

// normalizeCode is a typed code as it is checked: lower case, without the spaces and dashes people add
// or copy ("123 456", "K7M2-X9QP").
func normalizeCode(code string) string {
	if len(code) > 64 {
		return ""
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '\t', '\u00a0':
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(code)))
}

func isTOTPCode(c string) bool {
	return len(c) == 6 && strings.Trim(c, "0123456789") == ""
}

func isRecoveryCode(c string) bool {
	if len(c) != 8 {
		return false
	}
	for i := 0; i < len(c); i++ {
		if strings.IndexByte(recoveryAlphabet, c[i]) < 0 {
			return false
		}
	}
	return true
}

func userRef(id int64) string { return strconv.FormatInt(id, 10) }

// ResetSecondFactor forgets a user's authenticator and recovery codes and ends their sessions, with tx:
// for a staff member who lost both. Their next staff page sends them to enrolment again.
func (s *Service) ResetSecondFactor(ctx context.Context, tx *gorm.DB, userID int64) error {
	res := tx.WithContext(ctx).Model(&models.User{}).Where("id = ?", userID).
		Updates(map[string]any{"totp_sealed": nil, "totp_enabled_at": nil, "totp_last_step": 0})
	if res.Error != nil {
		return fmt.Errorf("reset the second factor of user %d: %w", userID, res.Error)
	}
	if err := tx.WithContext(ctx).Where("user_id = ? AND used_at IS NULL", userID).Delete(&models.RecoveryCode{}).Error; err != nil {
		return fmt.Errorf("drop the recovery codes of user %d: %w", userID, err)
	}
	return s.EndAllSessions(ctx, tx, userID)
}
