package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"gorm.io/gorm"

	"videogen/internal/infra/ids"
	"videogen/models"
)

// event is the body of every delivery, shaped as OpenAI's video events: {"id":"evt_…","object":"event",
// "created_at":<unix>,"type":"video.completed","data":{"id":"video_…"}}.
type event struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	CreatedAt int64     `json:"created_at"`
	Type      string    `json:"type"`
	Data      eventData `json:"data"`
}

type eventData struct {
	ID string `json:"id"`
}

// TasksEnded is the outbox: called inside the transaction of tasks' terminal transitions that ended the
// same way (one task's, or the task store's group-committed completions: video i of accountIDs[i]), it
// writes for each a video.completed or video.failed event, and a delivery of it to each enabled endpoint
// of its account that receives that type; the accounts' endpoints are read in one query. With no such
// endpoint it writes nothing. The deliveries' jobs are inserted in the same transaction, so they are
// worked once it commits, and never if it rolls back.
func (s *Service) TasksEnded(tx *gorm.DB, accountIDs []int64, videoIDs []string, completed bool, at time.Time) error {
	if len(accountIDs) == 0 {
		return nil
	}
	typ := VideoFailed
	if completed {
		typ = VideoCompleted
	}
	var eps []models.WebhookEndpoint
	if err := tx.Select("id", "account_id", "events").Where("account_id IN ? AND enabled = ?", accountIDs, true).Order("id").Find(&eps).Error; err != nil {
		return fmt.Errorf("find webhook endpoints: %w", err)
	}
	if len(eps) == 0 {
		return nil
	}
	for i, acct := range accountIDs {
		var to []string
		for j := range eps {
			if eps[j].AccountID == acct && eps[j].Receives(typ) {
				to = append(to, eps[j].ID)
			}
		}
		if len(to) == 0 {
			continue
		}
		if err := s.record(tx, acct, typ, videoIDs[i], at, to); err != nil {
			return err
		}
	}
	return nil
}

// record writes one event and a delivery of it, due at once, to each endpoint in to.
func (s *Service) record(tx *gorm.DB, accountID int64, typ, subject string, at time.Time, to []string) error {
	at = at.UTC().Truncate(time.Microsecond)
	ev := event{ID: ids.NewEventID(), Object: "event", CreatedAt: at.Unix(), Type: typ, Data: eventData{ID: subject}}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode webhook event: %w", err)
	}
	if err := tx.Create(&models.WebhookEvent{ID: ev.ID, AccountID: accountID, Type: typ, SubjectID: subject, Payload: string(body), CreatedAt: at}).Error; err != nil {
		return fmt.Errorf("record webhook event: %w", err)
	}
	// The priority counts the account's waiting deliveries before these join them.
	priority, err := s.priorityOf(tx, accountID)
	if err != nil {
		return err
	}
	ds := make([]models.WebhookDelivery, len(to))
	for i, ep := range to {
		ds[i] = models.WebhookDelivery{EventID: ev.ID, EndpointID: ep, CreatedAt: at, NextAttemptAt: &at}
	}
	if err := tx.Create(&ds).Error; err != nil {
		return fmt.Errorf("record webhook deliveries: %w", err)
	}
	jobs := make([]river.InsertManyParams, len(ds))
	for i, d := range ds {
		jobs[i] = s.jobFor(d.ID, 0, priority)
	}
	return s.queue.InsertManyTx(tx, jobs)
}

// cancelledTaskCode is the error code of a task its customer cancelled: tasks.CodeCancelled, which this
// package cannot import (the task store records events through it).
const cancelledTaskCode = "cancelled"

// testVideoPrefix begins the video id of a test event: no video has it.
const testVideoPrefix = "video_test"

// Test reports whether the attempt is of a test event (SendTest), which names no video.
func (a Attempt) Test() bool { return strings.HasPrefix(a.VideoID, testVideoPrefix) }

// SendTest sends the (enabled) endpoint a sample event of the type, at once, whether or not it receives
// that type: a video.completed or video.failed whose video id begins video_test, which no video
// has. It goes through the outbox like any event, so the deliveries list shows how it went.
func (s *Service) SendTest(ctx context.Context, accountID int64, endpointID, typ string) error {
	if _, err := checkEvents([]string{typ}); err != nil {
		return err
	}
	ep, err := s.Get(ctx, accountID, endpointID)
	if err != nil {
		return err
	}
	if !ep.Enabled {
		return &Invalid{Message: "This endpoint is disabled, so nothing is sent to it. Enable it first, then send the test event."}
	}
	err = s.db.Tx(ctx, func(tx *gorm.DB) error {
		return s.record(tx, accountID, typ, testVideoPrefix+ids.NewToken(20), s.now(), []string{endpointID})
	})
	if err != nil {
		return fmt.Errorf("send a test event: %w", err)
	}
	return nil
}

// Resend sends a delivery of the endpoint again, at once, with the same webhook-id and body; if it
// fails, retries follow the schedule from the attempts it has had.
func (s *Service) Resend(ctx context.Context, accountID int64, endpointID string, deliveryID int64) error {
	if _, err := s.Get(ctx, accountID, endpointID); err != nil {
		return err
	}
	now := s.now()
	err := s.db.Tx(ctx, func(tx *gorm.DB) error {
		var d models.WebhookDelivery
		if err := tx.Where("id = ? AND endpoint_id = ?", deliveryID, endpointID).Take(&d).Error; errors.Is(err, gorm.ErrRecordNotFound) {
			return ErrNoEndpoint
		} else if err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE webhook_deliveries SET next_attempt_at = ?, delivered_at = NULL, failed_at = NULL WHERE id = ?`, now, d.ID).Error; err != nil {
			return err
		}
		// A job still waiting for its retry is brought forward; one running is a resend already.
		job := s.jobFor(d.ID, d.Attempts, priorityFew)
		res, err := s.queue.InsertTx(tx, job.Args, job.InsertOpts)
		if err != nil {
			return err
		}
		if res.UniqueSkippedAsDuplicate && res.Job.State != rivertype.JobStateRunning && res.Job.State != rivertype.JobStateAvailable {
			return s.queue.RetryNowTx(tx, res.Job.ID)
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrNoEndpoint) {
		return fmt.Errorf("resend webhook delivery: %w", err)
	}
	return err
}

// Attempt is one line of an endpoint's deliveries list.
type Attempt struct {
	models.WebhookAttempt
	EventID   string
	EventType string
	VideoID   string // the event's video (a test event's id names no video: Test)
	// Cancelled: the video failed because its customer cancelled it (a video.failed event says only failed).
	Cancelled bool
	// NextAttemptAt is the delivery's next try, shown on its latest attempt (nil: none planned).
	NextAttemptAt *time.Time
	Delivered     bool
	GivenUp       bool
}

// Page is a page of an endpoint's attempts, newest first; Before is the cursor of the next (older)
// page, 0 when there is none.
type Page struct {
	Attempts []Attempt
	// Pending is deliveries not attempted yet (due, or waiting while the endpoint is off).
	Pending []PendingDelivery
	Before  int64
}

// PendingDelivery is a delivery waiting for its first attempt.
type PendingDelivery struct {
	ID            int64
	EventID       string
	EventType     string
	NextAttemptAt *time.Time
}

// Attempts lists an endpoint's attempts, newest first, before the cursor (0: from the newest), at most
// limit of them (keyset pagination, as the deliveries of a busy endpoint grow).
func (s *Service) Attempts(ctx context.Context, endpointID string, before int64, limit int) (Page, error) {
	var p Page
	q := s.db.R.WithContext(ctx).Table("webhook_attempts AS a").
		Select("a.*, d.event_id, e.type AS event_type, e.subject_id AS video_id, d.next_attempt_at, d.attempts, d.delivered_at IS NOT NULL AS delivered, d.failed_at IS NOT NULL AS given_up, "+
			"t.error_code IS NOT NULL AND t.error_code = ? AS cancelled", cancelledTaskCode).
		Joins("JOIN webhook_deliveries d ON d.id = a.delivery_id").Joins("JOIN webhook_events e ON e.id = d.event_id").
		Joins("LEFT JOIN tasks t ON t.id = e.subject_id").
		Where("a.endpoint_id = ?", endpointID)
	if before > 0 {
		q = q.Where("a.id < ?", before)
	}
	var rows []struct {
		models.WebhookAttempt `gorm:"embedded"`
		EventID               string
		EventType             string
		VideoID               string
		NextAttemptAt         *time.Time
		Attempts              int // the delivery's: its latest attempt has this number
		Delivered, GivenUp    bool
		Cancelled             bool
	}
	if err := q.Order("a.id DESC").Limit(limit + 1).Scan(&rows).Error; err != nil {
		return p, fmt.Errorf("list webhook attempts: %w", err)
	}
	for i, r := range rows {
		if i == limit {
			p.Before = rows[i-1].ID
			break
		}
		a := Attempt{WebhookAttempt: r.WebhookAttempt, EventID: r.EventID, EventType: r.EventType, VideoID: r.VideoID, Cancelled: r.Cancelled,
			Delivered: r.Delivered, GivenUp: r.GivenUp}
		if r.Attempt == r.Attempts {
			a.NextAttemptAt = r.NextAttemptAt
		}
		p.Attempts = append(p.Attempts, a)
	}
	if before == 0 {
		err := s.db.R.WithContext(ctx).Table("webhook_deliveries AS d").Select("d.id, d.event_id, e.type AS event_type, d.next_attempt_at").
			Joins("JOIN webhook_events e ON e.id = d.event_id").
			Where("d.endpoint_id = ? AND d.attempts = 0 AND d.next_attempt_at IS NOT NULL", endpointID).
			Order("d.id DESC").Limit(limit).Scan(&p.Pending).Error
		if err != nil {
			return p, fmt.Errorf("list pending webhook deliveries: %w", err)
		}
	}
	return p, nil
}
