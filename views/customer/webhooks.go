package customer

import (
	"slices"
	"strconv"

	"videogen/internal/domain/webhooks"
	"videogen/models"
)

// WebhooksPage is the account's endpoints and the form that adds one.
type WebhooksPage struct {
	Endpoints  []models.WebhookEndpoint
	EventTypes []string
	Max        int
	// The form as posted, and why it was refused.
	URL    string
	Events []string
	Error  *webhooks.Invalid
}

// Checked reports whether the form has the event type ticked.
func (p WebhooksPage) Checked(typ string) bool { return slices.Contains(p.Events, typ) }

// FieldError is the refusal's message when it is about field.
func (p WebhooksPage) FieldError(field string) string {
	if p.Error != nil && p.Error.Field == field {
		return p.Error.Message
	}
	return ""
}

// FormError is the refusal's message when it is about no one field.
func (p WebhooksPage) FormError() string {
	if p.Error != nil && p.Error.Field == "" {
		return p.Error.Message
	}
	return ""
}

// WebhookPage is one endpoint: its settings, its actions and its deliveries.
type WebhookPage struct {
	Endpoint   models.WebhookEndpoint
	Deliveries webhooks.Page
	EventTypes []string
	Paged      bool // an older page of attempts
	// PreviousSigns: a rotation's previous secret still signs beside the current one.
	PreviousSigns bool
	NewSecret     string
	Added         bool // NewSecret is the new endpoint's
	Rotated       bool // NewSecret replaces the previous one, which signs beside it for 24 hours
	Error         *webhooks.Invalid
}

// ErrorText is the refusal's message ("" when none).
func (p WebhookPage) ErrorText() string {
	if p.Error == nil {
		return ""
	}
	return p.Error.Message
}

// PendingNote says how many deliveries wait for their first attempt, and why when the endpoint is off.
func (p WebhookPage) PendingNote() string {
	n := len(p.Deliveries.Pending)
	s := strconv.Itoa(n) + " waiting for their first attempt"
	if n == 1 {
		s = "1 waiting for its first attempt"
	}
	if !p.Endpoint.Enabled {
		s += " (they go out when the endpoint is enabled)"
	}
	return s + "."
}

// Newest is the query of the first page, "" when this is it.
// Live says the page follows new attempts: its newest page, which new attempts join (an older page
// stays as it was read).
func (p WebhookPage) Live() bool { return !p.Paged }

func (p WebhookPage) Newest() string {
	if !p.Paged {
		return ""
	}
	return "?"
}

// Older is the query of the next (older) page of attempts, "" when there is none.
func (p WebhookPage) Older() string {
	if p.Deliveries.Before == 0 {
		return ""
	}
	return "?before=" + strconv.FormatInt(p.Deliveries.Before, 10)
}

// AttemptOutcome says in a few words what one attempt came to.
func AttemptOutcome(a webhooks.Attempt) string {
	switch {
	case a.Error != "":
		return a.Error
	case a.Status >= 200 && a.Status < 300:
		return "delivered"
	case a.Status >= 300 && a.Status < 400:
		return "redirects are not followed; answer with a 2xx at this URL"
	}
	return "not a 2xx answer"
}
