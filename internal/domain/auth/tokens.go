package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/ids"
	"videogen/models"
)

// Lifetimes of e-mailed links.
const (
	VerifyTTL = 24 * time.Hour
	ResetTTL  = time.Hour
)

// issueToken makes a single-use link token for a user inside tx (the transaction that also queues the
// e-mail carrying it) and returns it.
func (s *Service) issueToken(tx *gorm.DB, userID int64, purpose string, ttl time.Duration) (string, error) {
	return s.issueTokenFor(tx, userID, purpose, ttl, "")
}

// issueTokenFor is issueToken for a link that also signs in the browser holding proof (a sign-up's).
func (s *Service) issueTokenFor(tx *gorm.DB, userID int64, purpose string, ttl time.Duration, proof string) (string, error) {
	raw := ids.NewToken(43)
	now := s.now()
	row := &models.EmailToken{UserID: userID, Purpose: purpose, TokenHash: hashToken(raw), CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if proof != "" {
		row.SignupProofHash = hashToken(proof)
	}
	if err := tx.Create(row).Error; err != nil {
		return "", fmt.Errorf("issue %s token: %w", purpose, err)
	}
	return raw, nil
}

// newResetToken issues a password-reset token in tx and spends the user's older unused ones: only the
// newest link works.
func (s *Service) newResetToken(tx *gorm.DB, userID int64, ttl time.Duration) (string, error) {
	if err := tx.Model(&models.EmailToken{}).Where("user_id = ? AND purpose = ? AND used_at IS NULL", userID, models.PurposeReset).
		Update("used_at", s.now()).Error; err != nil {
		return "", fmt.Errorf("retire old reset links of user %d: %w", userID, err)
	}
	return s.issueToken(tx, userID, models.PurposeReset, ttl)
}

// peekToken returns the user of a valid, unused token without using it up.
func (s *Service) peekToken(ctx context.Context, raw, purpose string) (int64, error) {
	var t models.EmailToken
	err := s.DB.R.WithContext(ctx).Where("token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ?", hashToken(raw), purpose, s.now()).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return 0, ErrBadToken
	}
	if err != nil {
		return 0, fmt.Errorf("read %s token: %w", purpose, err)
	}
	return t.UserID, nil
}

// useToken spends a token inside tx and returns its user and the hash of the sign-up proof it carries
// ("" for most): the guarded UPDATE lets one use win.
func (s *Service) useToken(tx *gorm.DB, raw, purpose string) (int64, string, error) {
	var rows []models.EmailToken
	err := tx.Raw("UPDATE email_tokens SET used_at = ? WHERE token_hash = ? AND purpose = ? AND used_at IS NULL AND expires_at > ? RETURNING user_id, signup_proof_hash",
		s.now(), hashToken(raw), purpose, s.now()).Scan(&rows).Error
	if err != nil {
		return 0, "", fmt.Errorf("use %s token: %w", purpose, err)
	}
	if len(rows) == 0 {
		return 0, "", ErrBadToken
	}
	return rows[0].UserID, rows[0].SignupProofHash, nil
}
