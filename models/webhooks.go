package models

import (
	"strings"
	"time"
)

// WebhookEndpoint is a customer's URL that receives signed events (docs/webhooks.md).
type WebhookEndpoint struct {
	ID                   string
	AccountID            int64
	Name                 string // the customer's label ("" for endpoints added without one)
	URL                  string
	Events               string // event types, comma-separated
	SecretSealed         []byte
	SecretHint           string
	PreviousSecretSealed []byte
	PreviousUntil        *time.Time
	Enabled              bool
	DisabledReason       string
	FailingSince         *time.Time
	CreatedAt            time.Time
	UpdatedAt            time.Time
}

// EventTypes lists the event types the endpoint receives.
func (e *WebhookEndpoint) EventTypes() []string {
	if e.Events == "" {
		return nil
	}
	return strings.Split(e.Events, ",")
}

// Receives reports whether the endpoint subscribed to the event type.
func (e *WebhookEndpoint) Receives(typ string) bool {
	for _, t := range e.EventTypes() {
		if t == typ {
			return true
		}
	}
	return false
}

// WebhookEvent is one event, kept as the exact body every delivery of it sends.
type WebhookEvent struct {
	ID        string
	AccountID int64
	Type      string
	SubjectID string
	Payload   string
	CreatedAt time.Time
}

// WebhookDelivery is one event on its way to one endpoint.
type WebhookDelivery struct {
	ID            int64
	EventID       string
	EndpointID    string
	Attempts      int
	CreatedAt     time.Time
	NextAttemptAt *time.Time
	DeliveredAt   *time.Time
	FailedAt      *time.Time
}

// WebhookAttempt is one POST of a delivery and what came of it.
type WebhookAttempt struct {
	ID         int64
	DeliveryID int64
	EndpointID string
	Attempt    int
	At         time.Time
	Status     int
	LatencyMS  int
	Response   string
	Error      string
}
