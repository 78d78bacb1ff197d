package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"gorm.io/gorm"

	"videogen/internal/infra/ids"
	"videogen/models"
)

// What OpenAI's webhook-endpoints API (openai-go v3.96, webhooks.WebhookService) asks of the endpoints,
// beside what the console does with them (docs/webhooks.md, "The API").

// MaxNameLen bounds an endpoint's name, in characters.
const MaxNameLen = 100

// checkName trims a name and checks it: printable, one line, at most MaxNameLen characters.
func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if n := utf8.RuneCountInString(name); n > MaxNameLen || !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl) {
		return "", &Invalid{Field: "name", Message: fmt.Sprintf("name must be one line of at most %d characters.", MaxNameLen)}
	}
	return name, nil
}

// AddNamed is Add with the endpoint's name.
func (s *Service) AddNamed(ctx context.Context, accountID int64, name, rawURL string, events []string) (*models.WebhookEndpoint, string, error) {
	name, err := checkName(name)
	if err != nil {
		return nil, "", err
	}
	return s.add(ctx, accountID, name, rawURL, events)
}

// Change is an update of an endpoint: nil fields stay as they are; Events, when set, is the whole new set.
type Change struct {
	Name, URL *string
	Events    []string
}

// Update changes an endpoint's name, URL or events and returns it. updated_at moves only when something
// changed (as OpenAI's: "unchanged updates do not advance it").
func (s *Service) Update(ctx context.Context, accountID int64, id string, ch Change) (*models.WebhookEndpoint, error) {
	ep, err := s.Get(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	set := map[string]any{}
	if ch.Name != nil {
		name, err := checkName(*ch.Name)
		if err != nil {
			return nil, err
		}
		if name != ep.Name {
			set["name"], ep.Name = name, name
		}
	}
	if ch.URL != nil {
		u, err := s.checkURL(ctx, *ch.URL)
		if err != nil {
			return nil, err
		}
		if u != ep.URL {
			set["url"], ep.URL = u, u
		}
	}
	if ch.Events != nil {
		evs, err := checkEvents(ch.Events)
		if err != nil {
			return nil, err
		}
		if joined := strings.Join(evs, ","); joined != ep.Events {
			set["events"], ep.Events = joined, joined
		}
	}
	if len(set) == 0 {
		return ep, nil
	}
	ep.UpdatedAt = s.now()
	set["updated_at"] = ep.UpdatedAt
	res := s.db.W.WithContext(ctx).Model(&models.WebhookEndpoint{}).Where("id = ? AND account_id = ?", id, accountID).Updates(set)
	if res.Error != nil {
		return nil, fmt.Errorf("update webhook endpoint: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil, ErrNoEndpoint
	}
	return ep, nil
}

// ListPage is a page of the account's endpoints, newest first, after the endpoint with id after ("" for
// the first page): OpenAI's cursor list.
func (s *Service) ListPage(ctx context.Context, accountID int64, after string, limit int) ([]models.WebhookEndpoint, bool, error) {
	q := s.db.R.WithContext(ctx).Where("account_id = ?", accountID)
	if after != "" {
		var cur models.WebhookEndpoint
		err := s.db.R.WithContext(ctx).Select("id", "created_at").Where("id = ? AND account_id = ?", after, accountID).Take(&cur).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, false, &Invalid{Field: "after", Message: "after is not an endpoint of this account: pass the id of the last endpoint of the page before."}
		}
		if err != nil {
			return nil, false, fmt.Errorf("read the list's cursor: %w", err)
		}
		q = q.Where("created_at < ? OR (created_at = ? AND id < ?)", cur.CreatedAt, cur.CreatedAt, cur.ID)
	}
	var out []models.WebhookEndpoint
	if err := q.Order("created_at DESC, id DESC").Limit(limit + 1).Find(&out).Error; err != nil {
		return nil, false, fmt.Errorf("list webhook endpoints: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// RotateNow gives the endpoint a new signing secret and returns it. With keep, the current secret keeps
// signing beside it for 24 hours (Rotate, the console's); without, it stops at once — the default of
// OpenAI's rotate_secret (keep_old_secret_active_for_24_hours false).
func (s *Service) RotateNow(ctx context.Context, accountID int64, id string, keep bool) (string, error) {
	if keep {
		return s.Rotate(ctx, accountID, id)
	}
	secret := newSecret()
	box, err := s.seal.Seal([]byte(secret), []byte(id))
	if err != nil {
		return "", fmt.Errorf("seal webhook secret: %w", err)
	}
	res := s.db.W.WithContext(ctx).Exec(`UPDATE webhook_endpoints SET previous_secret_sealed = NULL, previous_until = NULL,
		secret_sealed = ?, secret_hint = ?, updated_at = ? WHERE id = ? AND account_id = ?`, box, hint(secret), s.now(), id, accountID)
	if res.Error != nil {
		return "", fmt.Errorf("rotate webhook secret: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return "", ErrNoEndpoint
	}
	return secret, nil
}

// ErrTestsBusy: the account already has as many API tests under way as it may (testsPerAccount).
var ErrTestsBusy = errors.New("webhook tests under way")

// testsPerAccount bounds an account's synchronous tests at once: each may hold a connection for the
// delivery timeout, and they must not crowd out other accounts' deliveries.
const testsPerAccount = 2

// TestNow sends the endpoint a sample event of the type now and returns the HTTP status its receiver
// answered (0: no answer — refused, timed out, unreachable). Unlike SendTest (the console's, through the
// outbox with retries) it is one attempt, made while the caller waits, as OpenAI's test is; it is not
// listed among the deliveries.
func (s *Service) TestNow(ctx context.Context, accountID int64, id, typ string) (int, error) {
	if _, err := checkEvents([]string{typ}); err != nil {
		return 0, err
	}
	ep, err := s.Get(ctx, accountID, id)
	if err != nil {
		return 0, err
	}
	if !ep.Enabled {
		return 0, &Invalid{Message: "This endpoint is disabled, so nothing is sent to it. Enable it in the console first, then send the test event."}
	}
	if !s.startTest(accountID) {
		return 0, ErrTestsBusy
	}
	defer s.endTest(accountID)
	now := s.now()
	ev := event{ID: ids.NewEventID(), Object: "event", CreatedAt: now.Unix(), Type: typ, Data: eventData{ID: testVideoPrefix + ids.NewToken(20)}}
	body, err := json.Marshal(ev)
	if err != nil {
		return 0, fmt.Errorf("encode webhook event: %w", err)
	}
	secrets, err := s.signingSecrets(ep, now)
	if err != nil {
		return 0, err
	}
	out := s.post(ctx, ep, &models.WebhookEvent{ID: ev.ID, Payload: string(body)}, secrets, now)
	return out.status, nil
}

func (s *Service) startTest(accountID int64) bool {
	s.testsMu.Lock()
	defer s.testsMu.Unlock()
	if s.tests == nil {
		s.tests = map[int64]int{}
	}
	if s.tests[accountID] >= testsPerAccount {
		return false
	}
	s.tests[accountID]++
	return true
}

func (s *Service) endTest(accountID int64) {
	s.testsMu.Lock()
	defer s.testsMu.Unlock()
	if s.tests[accountID]--; s.tests[accountID] <= 0 {
		delete(s.tests, accountID)
	}
}
