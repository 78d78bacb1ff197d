package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/ids"
	"videogen/internal/infra/storetext"
	"videogen/models"
)

// SessionTTL is how long a console sign-in lasts.
const SessionTTL = 30 * 24 * time.Hour

// touchEvery bounds how often a session's last-seen time is written.
const touchEvery = 5 * time.Minute

// StartSession signs a user in and returns the cookie's token, which is never stored.
func (s *Service) StartSession(ctx context.Context, userID int64, ip, userAgent string) (string, error) {
	token := ids.NewToken(43)
	now := s.now()
	userAgent, _ = storetext.Clip(userAgent, 300)
	row := &models.Session{UserID: userID, TokenHash: hashToken(token), CreatedAt: now, LastSeenAt: now,
		ExpiresAt: now.Add(SessionTTL), IP: ip, UserAgent: userAgent}
	err := s.DB.W.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(row).Error; err != nil {
			return err
		}
		// Staff see when each user last signed in.
		return tx.Model(&models.User{}).Where("id = ?", userID).Update("last_sign_in_at", now).Error
	})
	if err != nil {
		return "", fmt.Errorf("start session: %w", err)
	}
	return token, nil
}

// Session returns the signed-in user of a cookie token, or ErrNoSession.
func (s *Service) Session(ctx context.Context, token string) (*models.User, *models.Session, error) {
	if token == "" || len(token) > 100 {
		return nil, nil, ErrNoSession
	}
	now := s.now()
	var sess models.Session
	err := s.DB.R.WithContext(ctx).Where("token_hash = ? AND revoked_at IS NULL AND expires_at > ?", hashToken(token), now).Take(&sess).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, ErrNoSession
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read session: %w", err)
	}
	// A disabled account's users are signed out: its sessions were ended when it was disabled, and one
	// started since (a verification link, a sign-in racing the disable) opens nothing either. So is a
	// member removed from the account, however their session outlived the removal. One read answers all:
	// the user, if they are still a member and their account is enabled.
	// The account's name comes with it, for the console's header, and whether it requires two steps.
	var users []struct {
		models.User           `gorm:"embedded"`
		SessionAccountName    string
		SessionRequiresSecond bool
	}
	err = s.DB.R.WithContext(ctx).Model(&models.User{}).
		Select("users.*", "accounts.name AS session_account_name", "accounts.require_second_factor AS session_requires_second").
		Joins("JOIN accounts ON accounts.id = users.account_id").
		Where("users.id = ? AND users.removed_at IS NULL AND accounts.disabled_at IS NULL", sess.UserID).Limit(1).Find(&users).Error
	if err != nil {
		return nil, nil, fmt.Errorf("read session user: %w", err)
	}
	if len(users) == 0 {
		return nil, nil, ErrNoSession
	}
	u := users[0].User
	u.AccountName, u.AccountRequiresSecondFactor = users[0].SessionAccountName, users[0].SessionRequiresSecond
	if now.Sub(sess.LastSeenAt) > touchEvery {
		_ = s.DB.W.WithContext(ctx).Model(&models.Session{}).Where("id = ?", sess.ID).Update("last_seen_at", now).Error
	}
	return &u, &sess, nil
}

// EndSession signs one browser out.
func (s *Service) EndSession(ctx context.Context, token string) error {
	return s.DB.W.WithContext(ctx).Model(&models.Session{}).
		Where("token_hash = ? AND revoked_at IS NULL", hashToken(token)).Update("revoked_at", s.now()).Error
}

// EndAllSessions signs a user out everywhere (after a password change or reset).
func (s *Service) EndAllSessions(ctx context.Context, tx *gorm.DB, userID int64) error {
	if tx == nil {
		tx = s.DB.W.WithContext(ctx)
	}
	err := tx.Model(&models.Session{}).Where("user_id = ? AND revoked_at IS NULL", userID).Update("revoked_at", s.now()).Error
	if err != nil {
		return fmt.Errorf("end sessions of user %d: %w", userID, err)
	}
	return nil
}
