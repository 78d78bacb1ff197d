package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/riverqueue/river"
	"gorm.io/gorm"

	"videogen/internal/infra/ids"
	"videogen/internal/infra/mediafetch"
	"videogen/models"
)

// rotationOverlap is how long the previous secret keeps signing beside a new one, so receivers can
// switch without losing an event (OpenAI's keep_old_secret_active_for_24_hours).
const rotationOverlap = 24 * time.Hour

// maxURLLen bounds an endpoint's URL.
const maxURLLen = 2048

// Add saves a new endpoint of the account for rawURL and the event types, after the URL passes the
// import guard. It returns the endpoint and its signing secret, which is never shown again.
func (s *Service) Add(ctx context.Context, accountID int64, rawURL string, events []string) (*models.WebhookEndpoint, string, error) {
	return s.add(ctx, accountID, "", rawURL, events)
}

// add saves an endpoint, named name (checked by the caller), in one insert.
func (s *Service) add(ctx context.Context, accountID int64, name, rawURL string, events []string) (*models.WebhookEndpoint, string, error) {
	u, err := s.checkURL(ctx, rawURL)
	if err != nil {
		return nil, "", err
	}
	evs, err := checkEvents(events)
	if err != nil {
		return nil, "", err
	}
	now := s.now()
	secret := newSecret()
	ep := &models.WebhookEndpoint{ID: ids.NewWebhookEndpointID(), AccountID: accountID, Name: name, URL: u, Events: strings.Join(evs, ","),
		SecretHint: hint(secret), Enabled: true, CreatedAt: now, UpdatedAt: now}
	if ep.SecretSealed, err = s.seal.Seal([]byte(secret), []byte(ep.ID)); err != nil {
		return nil, "", fmt.Errorf("seal webhook secret: %w", err)
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		// Two adds at once must not pass the limit together: they queue on the account's row (SQLite's
		// single writer serialises them anyway).
		if s.db.Postgres {
			if err := tx.Exec("SELECT id FROM accounts WHERE id = ? FOR UPDATE", accountID).Error; err != nil {
				return err
			}
		}
		var n int64
		if err := tx.Model(&models.WebhookEndpoint{}).Where("account_id = ?", accountID).Count(&n).Error; err != nil {
			return err
		}
		if n >= MaxEndpoints {
			return &Invalid{Message: fmt.Sprintf("An account may have at most %d endpoints. Delete one you no longer use first.", MaxEndpoints)}
		}
		return tx.Create(ep).Error
	})
	if err != nil {
		if _, ok := errors.AsType[*Invalid](err); ok {
			return nil, "", err
		}
		return nil, "", fmt.Errorf("add webhook endpoint: %w", err)
	}
	return ep, secret, nil
}

// checkURL judges an endpoint URL as the import guard does, and returns it trimmed.
func (s *Service) checkURL(ctx context.Context, raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return "", &Invalid{Field: "url", Message: "Enter the URL that should receive the events."}
	case len(raw) > maxURLLen || !utf8.ValidString(raw):
		return "", &Invalid{Field: "url", Message: fmt.Sprintf("Use a URL of at most %d characters.", maxURLLen)}
	}
	if err := s.fetch.CheckURL(ctx, raw); err != nil {
		if fe, ok := errors.AsType[*mediafetch.Error](err); ok {
			return "", &Invalid{Field: "url", Message: "This URL cannot receive webhooks: " + fe.Reason + "."}
		}
		return "", fmt.Errorf("check webhook URL: %w", err)
	}
	return raw, nil
}

// checkEvents returns the event types chosen, each known, in the console's order.
func checkEvents(events []string) ([]string, error) {
	var out []string
	for _, t := range EventTypes {
		if slices.Contains(events, t) {
			out = append(out, t)
		}
	}
	for _, e := range events {
		if !slices.Contains(EventTypes, e) {
			return nil, &Invalid{Field: "events", Message: fmt.Sprintf("%q is not an event type; choose among %s.", e, strings.Join(EventTypes, ", "))}
		}
	}
	if len(out) == 0 {
		return nil, &Invalid{Field: "events", Message: "Choose at least one event to receive."}
	}
	return out, nil
}

// List returns the account's endpoints, oldest first.
func (s *Service) List(ctx context.Context, accountID int64) ([]models.WebhookEndpoint, error) {
	var eps []models.WebhookEndpoint
	if err := s.db.R.WithContext(ctx).Where("account_id = ?", accountID).Order("created_at, id").Find(&eps).Error; err != nil {
		return nil, fmt.Errorf("list webhook endpoints: %w", err)
	}
	return eps, nil
}

// Get returns one endpoint of the account, or ErrNoEndpoint.
func (s *Service) Get(ctx context.Context, accountID int64, id string) (*models.WebhookEndpoint, error) {
	if !ids.IsWebhookEndpointID(id) {
		return nil, ErrNoEndpoint
	}
	var ep models.WebhookEndpoint
	err := s.db.R.WithContext(ctx).Where("id = ? AND account_id = ?", id, accountID).Take(&ep).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNoEndpoint
	}
	if err != nil {
		return nil, fmt.Errorf("read webhook endpoint: %w", err)
	}
	return &ep, nil
}

// Rotate gives the endpoint a new signing secret and returns it (shown once). The current secret keeps
// signing beside it for 24 hours; a secret older than that, from an earlier rotation, stops now.
func (s *Service) Rotate(ctx context.Context, accountID int64, id string) (string, error) {
	secret := newSecret()
	box, err := s.seal.Seal([]byte(secret), []byte(id))
	if err != nil {
		return "", fmt.Errorf("seal webhook secret: %w", err)
	}
	now := s.now()
	res := s.db.W.WithContext(ctx).Exec(`UPDATE webhook_endpoints SET previous_secret_sealed = secret_sealed, previous_until = ?,
		secret_sealed = ?, secret_hint = ?, updated_at = ? WHERE id = ? AND account_id = ?`,
		now.Add(rotationOverlap), box, hint(secret), now, id, accountID)
	if res.Error != nil {
		return "", fmt.Errorf("rotate webhook secret: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return "", ErrNoEndpoint
	}
	return secret, nil
}

// SetEnabled switches an endpoint on or off. Switched on, its failure streak starts again, and
// deliveries that waited while it was off go out.
func (s *Service) SetEnabled(ctx context.Context, accountID int64, id string, on bool) error {
	reason := "disabled in the console"
	if on {
		reason = ""
	}
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		res := tx.Exec(`UPDATE webhook_endpoints SET enabled = ?, disabled_reason = ?, failing_since = NULL, updated_at = ?
			WHERE id = ? AND account_id = ?`, on, reason, s.now(), id, accountID)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrNoEndpoint
		}
		if !on {
			return nil
		}
		return s.requeueWaiting(tx, accountID, id)
	})
	if err != nil && !errors.Is(err, ErrNoEndpoint) {
		return fmt.Errorf("switch webhook endpoint: %w", err)
	}
	return err
}

// requeueWaiting queues the jobs of an endpoint's deliveries that waited while it was off (their jobs
// ended when they found it off; one still waiting for its retry is kept, not doubled).
func (s *Service) requeueWaiting(tx *gorm.DB, accountID int64, endpointID string) error {
	priority, err := s.priorityOf(tx, accountID)
	if err != nil {
		return err
	}
	var waiting []models.WebhookDelivery
	return tx.Select("id", "attempts").Where("endpoint_id = ? AND next_attempt_at IS NOT NULL", endpointID).
		FindInBatches(&waiting, 500, func(batch *gorm.DB, _ int) error {
			jobs := make([]river.InsertManyParams, len(waiting))
			for i, d := range waiting {
				jobs[i] = s.jobFor(d.ID, d.Attempts, priority)
			}
			return s.queue.InsertManyTx(tx, jobs)
		}).Error
}

// Delete removes an endpoint with its deliveries and their attempts.
func (s *Service) Delete(ctx context.Context, accountID int64, id string) error {
	res := s.db.W.WithContext(ctx).Where("id = ? AND account_id = ?", id, accountID).Delete(&models.WebhookEndpoint{})
	if res.Error != nil {
		return fmt.Errorf("delete webhook endpoint: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrNoEndpoint
	}
	return nil
}

// signingSecrets opens the secrets that sign the endpoint's deliveries now: the current one, and the
// previous one during its 24 hours after a rotation.
func (s *Service) signingSecrets(ep *models.WebhookEndpoint, now time.Time) ([]string, error) {
	cur, err := s.seal.Open(ep.SecretSealed, []byte(ep.ID))
	if err != nil {
		return nil, fmt.Errorf("open the signing secret of %s: %w", ep.ID, err)
	}
	out := []string{string(cur)}
	if ep.PreviousSecretSealed != nil && ep.PreviousUntil != nil && now.Before(*ep.PreviousUntil) {
		prev, err := s.seal.Open(ep.PreviousSecretSealed, []byte(ep.ID))
		if err != nil {
			return nil, fmt.Errorf("open the previous signing secret of %s: %w", ep.ID, err)
		}
		out = append(out, string(prev))
	}
	return out, nil
}
