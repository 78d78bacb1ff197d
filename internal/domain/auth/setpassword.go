package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"videogen/models"
)

// SetPasswordTTL is how long a set-password link stays valid. It is longer than an e-mailed reset link
// (ResetTTL) because an operator hands it to a person, who may not open it within the hour.
const SetPasswordTTL = 24 * time.Hour

// SetPasswordLink issues a one-time link to the console's reset page for a user, so that someone created
// without a password (by an operator) can choose one and sign in. It is a reset token: the reset page
// already checks the password, marks the address verified and ends other sessions, and spends the token
// once. As with RequestReset, only the newest link works: the user's older unused reset links are spent.
func (s *Service) SetPasswordLink(ctx context.Context, userID int64) (string, error) {
	if s.BaseURL == "" {
		return "", errors.New("set-password link: no PUBLIC_BASE_URL to build it on")
	}
	var raw string
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		var err error
		raw, err = s.newResetToken(tx, userID, SetPasswordTTL)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("set-password link for user %d: %w", userID, err)
	}
	return s.BaseURL + "/password/reset?token=" + raw, nil
}

// ResetUser returns the user whose password a valid, unused reset link sets, without spending it: the
// page names the account before anything is done, and tells a first password from a new one.
func (s *Service) ResetUser(ctx context.Context, raw string) (*models.User, error) {
	userID, err := s.peekToken(ctx, raw, models.PurposeReset)
	if err != nil {
		return nil, err
	}
	var u models.User
	if err := s.DB.R.WithContext(ctx).Take(&u, userID).Error; err != nil {
		return nil, fmt.Errorf("read the user of a reset link: %w", err)
	}
	return &u, nil
}
