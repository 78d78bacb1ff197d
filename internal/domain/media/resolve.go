package media

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"videogen/internal/refusal"
	"videogen/models"
)

// FieldRef is one media URL of a create request, verified by its signature.
type FieldRef struct {
	Field    string // image_urls, video_urls, audio_urls, start_image_url, end_image_url
	Position int
	Param    string // "image_urls[1]" or "start_image_url"
	Kind     Kind
	ID       string
	// SHA256, set for a file the request carried in its own body (a multipart create's input_reference)
	// or a remix's copy, makes the request's Idempotency-Key hash count the file by its bytes, not by
	// its id: a retry stores the same bytes under a new id and must still be the same request.
	SHA256 string `json:",omitempty"`
}

// FieldKind is the kind of file a create request's media field takes.
func FieldKind(field string) Kind {
	switch field {
	case "video_urls":
		return Video
	case "audio_urls":
		return Audio
	}
	return Image
}

// Attach checks, inside the create transaction, that every referenced file belongs to the account, is
// live and is of its field's kind, and records which files the task uses. On PostgreSQL the files are
// share-locked until the transaction ends, so the janitor (which skips locked rows) cannot delete one
// between this check and the task's commit.
func (s *Service) Attach(tx *gorm.DB, accountID int64, taskID string, refs []FieldRef) error {
	if len(refs) == 0 {
		return nil
	}
	idSet := map[string]bool{}
	for _, r := range refs {
		idSet[r.ID] = true
	}
	want := make([]string, 0, len(idSet))
	for id := range idSet {
		want = append(want, id)
	}
	sort.Strings(want) // one lock order for every transaction
	q := tx.Where("id IN ?", want).Order("id")
	if s.DB.Postgres {
		q = q.Clauses(clause.Locking{Strength: "SHARE"})
	}
	var rows []models.Media
	if err := q.Find(&rows).Error; err != nil {
		return fmt.Errorf("load media of task %s: %w", taskID, err)
	}
	byID := make(map[string]*models.Media, len(rows))
	for i := range rows {
		byID[rows[i].ID] = &rows[i]
	}
	links := make([]models.TaskMedia, 0, len(refs))
	for _, r := range refs {
		m := byID[r.ID]
		if m == nil || m.AccountID != accountID || m.State != models.MediaReady || m.DeletedAt != nil {
			return refusal.Field("invalid_media_url", r.Param, "%s refers to a file that this account does not have (it may have been deleted after its retention). Upload or import the file again and use the new URL.", r.Param)
		}
		if Kind(m.Kind) != r.Kind {
			return refusal.Field("invalid_media_url", r.Param, "%s is %s file; %s takes %s files.", r.Param, article(m.Kind), r.Field, r.Kind)
		}
		links = append(links, models.TaskMedia{TaskID: taskID, Field: r.Field, Position: r.Position, MediaID: r.ID})
	}
	if err := tx.Create(&links).Error; err != nil {
		return fmt.Errorf("link media to task %s: %w", taskID, err)
	}
	return nil
}

func article(kind string) string {
	if kind == string(Image) || kind == string(Audio) {
		return "an " + kind
	}
	return "a " + kind
}

// SignedInputs returns a task's media as URLs signed now, for its submission upstream: a task that
// waited in the queue never hands out a URL that expired meanwhile.
func (s *Service) SignedInputs(ctx context.Context, taskID string) (models.TaskInputs, error) {
	var links []models.TaskMedia
	err := s.DB.W.WithContext(ctx).Where("task_id = ?", taskID).Order("field, position").Find(&links).Error
	if err != nil {
		return models.TaskInputs{}, fmt.Errorf("load media of task %s: %w", taskID, err)
	}
	var in models.TaskInputs
	for _, l := range links {
		// The file outlives the URL: the janitor keeps it while the task is unfinished.
		u := s.Signer.URL(l.MediaID, s.now().Add(s.URLTTL))
		switch l.Field {
		case "image_urls":
			in.ImageURLs = append(in.ImageURLs, u)
		case "video_urls":
			in.VideoURLs = append(in.VideoURLs, u)
		case "audio_urls":
			in.AudioURLs = append(in.AudioURLs, u)
		case "start_image_url":
			in.StartImageURL = u
		case "end_image_url":
			in.EndImageURL = u
		}
	}
	return in, nil
}

// ErrNoFile is returned by Lookup for a file that is not (or no longer) stored.
var ErrNoFile = errors.New("no such media file")

// Lookup returns a live, ready file by id, for serving it.
func (s *Service) Lookup(ctx context.Context, id string) (*models.Media, error) {
	var m models.Media
	err := s.DB.R.WithContext(ctx).Where("id = ? AND state = ? AND deleted_at IS NULL", id, models.MediaReady).Take(&m).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNoFile
	}
	if err != nil {
		return nil, fmt.Errorf("read media %s: %w", id, err)
	}
	return &m, nil
}

// Probes returns what was found of each referenced file of the account as it was stored, in the order
// of refs, for the capability checks of a create (docs/upstreams.md#capabilities). A file that is not
// the account's is left out here; Attach refuses it in the create transaction.
func (s *Service) Probes(ctx context.Context, accountID int64, refs []FieldRef) ([]models.MediaProbe, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	want := make([]string, 0, len(refs))
	for _, r := range refs {
		want = append(want, r.ID)
	}
	var rows []models.Media
	err := s.DB.W.WithContext(ctx).Select("id", "account_id", "content_type", "bytes", "width", "height", "duration_ms").
		Where("id IN ? AND account_id = ?", want, accountID).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read what was found of the request's media: %w", err)
	}
	byID := make(map[string]models.Media, len(rows))
	for _, m := range rows {
		byID[m.ID] = m
	}
	out := make([]models.MediaProbe, 0, len(refs))
	for _, r := range refs {
		m, ok := byID[r.ID]
		if !ok {
			continue
		}
		out = append(out, models.MediaProbe{Field: r.Field, Position: r.Position, ContentType: m.ContentType, Bytes: m.Bytes,
			Width: m.Width, Height: m.Height, DurationMs: m.DurationMs})
	}
	return out, nil
}
