package media

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"videogen/internal/infra/ids"
	"videogen/models"
)

// PreviewTTL is how long the links a task's page shows its inputs with stay valid: long enough to watch
// a reference video from an open page, short enough that a copied link soon stops working.
const PreviewTTL = time.Hour

// TaskFile is one media input of a task as its page shows it: what it was for, and a link to it while it
// is stored.
type TaskFile struct {
	Label       string // "First frame", "Last frame", "Reference image 2", "Reference video 1", "Audio 1"
	Kind        Kind
	ID          string // the media id ("" when the stored URL names none)
	ContentType string // "" once deleted
	Bytes       int64
	// Path is a same-origin signed link to the file (/media/{id}?exp=…&sig=…, valid PreviewTTL), ""
	// when the file has been deleted after its retention or when no link was asked for.
	Path string
	// Until is when the file's retention ends (zero once it has: a file an unfinished task still uses is
	// kept past it, until the task ends).
	Until time.Time
	Kept  bool // the file is still stored
}

// TaskFiles lists the media a task was created with (its stored inputs, in = t.StoredInputs()), in
// the request's order — first frame, last frame, reference images, videos, audio — each labelled and,
// while the file is stored, with a link signed now when sign is true (customers; staff pages show what
// there was without showing it). Only the account's files are looked up.
func (s *Service) TaskFiles(ctx context.Context, accountID int64, in models.TaskInputs, sign bool) ([]TaskFile, error) {
	var files []TaskFile
	add := func(label string, kind Kind, raw string) {
		files = append(files, TaskFile{Label: label, Kind: kind, ID: mediaID(raw)})
	}
	if in.StartImageURL != "" {
		add("First frame", Image, in.StartImageURL)
	}
	if in.EndImageURL != "" {
		add("Last frame", Image, in.EndImageURL)
	}
	for i, u := range in.ImageURLs {
		add(fmt.Sprintf("Reference image %d", i+1), Image, u)
	}
	for i, u := range in.VideoURLs {
		add(fmt.Sprintf("Reference video %d", i+1), Video, u)
	}
	for i, u := range in.AudioURLs {
		add(fmt.Sprintf("Audio %d", i+1), Audio, u)
	}
	var want []string
	for _, f := range files {
		if f.ID != "" {
			want = append(want, f.ID)
		}
	}
	if len(want) == 0 {
		return files, nil
	}
	var rows []models.Media
	err := s.DB.R.WithContext(ctx).Where("id IN ? AND account_id = ? AND state = ? AND deleted_at IS NULL", want, accountID, models.MediaReady).
		Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("read the inputs' files: %w", err)
	}
	stored := make(map[string]*models.Media, len(rows))
	for i := range rows {
		stored[rows[i].ID] = &rows[i]
	}
	exp := s.now().Add(PreviewTTL)
	for i := range files {
		m := stored[files[i].ID]
		if m == nil {
			continue
		}
		files[i].Kept, files[i].ContentType, files[i].Bytes = true, m.ContentType, m.Bytes
		if m.ExpiresAt.After(s.now()) {
			files[i].Until = m.ExpiresAt
		}
		if sign {
			files[i].Path = s.Signer.Path(m.ID, exp)
		}
	}
	return files, nil
}

// mediaID is the media id a stored input URL names (…/media/{id}?exp=…&sig=…), whatever its host and
// whether or not it has expired: a task's inputs are recorded as the URLs it was created with, and the
// file is looked up by id in the account's own media. "" when it names none.
func mediaID(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	i := strings.LastIndex(u.Path, "/media/")
	if i < 0 || !ids.IsMediaID(u.Path[i+len("/media/"):]) {
		return ""
	}
	return u.Path[i+len("/media/"):]
}
