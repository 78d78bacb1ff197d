package payments

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"videogen/billing/topups"
	"videogen/models"
)

// ErrNoTopup is returned for a top-up that does not exist or belongs to another account.
var ErrNoTopup = errors.New("no such top-up")

// Topup returns one of the account's top-ups.
func (s *Service) Topup(ctx context.Context, accountID int64, id string) (*models.Topup, error) {
	var t models.Topup
	err := s.db.R.WithContext(ctx).Where("id = ? AND account_id = ?", id, accountID).Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNoTopup
	}
	if err != nil {
		return nil, fmt.Errorf("read top-up %s: %w", id, err)
	}
	return &t, nil
}

// Topups returns the account's latest top-ups, newest first.
func (s *Service) Topups(ctx context.Context, accountID int64, limit int) ([]models.Topup, error) {
	var out []models.Topup
	if err := s.db.R.WithContext(ctx).Where("account_id = ?", accountID).Order("created_at DESC, id DESC").
		Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list top-ups of account %d: %w", accountID, err)
	}
	return out, nil
}

// CancelCheckout records that the customer left Stripe's page without paying. Only a pending top-up
// changes; if Stripe later reports the session paid after all (another tab), it is still credited.
func (s *Service) CancelCheckout(ctx context.Context, accountID int64, id string) (*models.Topup, error) {
	if _, err := topups.Cancel(s.db.W.WithContext(ctx), accountID, id, s.now().UTC()); err != nil {
		return nil, err
	}
	return s.Topup(ctx, accountID, id)
}

// Profile returns the account's billing profile (zero values when it has none yet).
func (s *Service) Profile(ctx context.Context, accountID int64) (*models.BillingProfile, error) {
	p := models.BillingProfile{AccountID: accountID, LowBalanceArmed: true, RechargeArmed: true}
	if err := s.db.R.WithContext(ctx).Where("account_id = ?", accountID).Limit(1).Find(&p).Error; err != nil {
		return nil, fmt.Errorf("read billing profile of account %d: %w", accountID, err)
	}
	return &p, nil
}
