package media

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"time"

	"gorm.io/gorm"

	"videogen/internal/infra/blob"
	"videogen/internal/infra/db"
	"videogen/internal/infra/ids"
	"videogen/internal/infra/mediaprobe"
	"videogen/internal/infra/storetext"
	"videogen/internal/refusal"
	"videogen/models"
)

// Service stores input media and hands them out.
type Service struct {
	DB     *db.DB
	Store  blob.Store
	Signer *Signer
	Log    *slog.Logger
	// URLTTL is how long a signed URL stays valid (MEDIA_URL_TTL).
	URLTTL time.Duration
	// Retention is how long a file is kept after its upload (MEDIA_RETENTION).
	Retention time.Duration
	// Now is the clock; tests move it.
	Now func() time.Time
}

func (s *Service) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// Sources of a file.
const (
	SourceUpload = "upload"
	SourceImport = "import"
)

// PartRemix is the part of the file a remix sends upstream: a copy of the source video (or of its first
// frame), recorded as an upload made for the customer (source upload, part remix), so that it is signed,
// linked, kept and deleted as any input file. The input_reference file part of a multipart create is an
// upload too, with the part input_reference, exactly as POST /uploads/v1/files records it.
const PartRemix = "remix"

// File is one stored file as the upload and import answers list it.
type File struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Part        string  `json:"part"`
	Filename    *string `json:"filename"`
	SourceURL   *string `json:"source_url"`
	URL         string  `json:"url"`
	ContentType string  `json:"content_type"`
	Bytes       int64   `json:"bytes"`
	SHA256      string  `json:"sha256"`
	ExpiresAt   int64   `json:"expires_at"` // when url stops working (unix seconds)
}

// Input is one file arriving in a request.
type Input struct {
	Part     string // the multipart part or import field it came in
	Param    string // how errors name it: "image_files[2]", "image_urls[0]"
	Kind     Kind
	Declared string // imports: the Content-Type the remote server declared; "" for uploads
	Filename string // uploads: the client's file name, shown back
	Origin   string // imports: the fetched URL without query or user-info
	Body     io.Reader
}

// Batch stores the files of one upload or import request: all of them, or — on any error — none.
type Batch struct {
	s         *Service
	accountID int64
	source    string
	counts    map[Kind]int
	total     int64
	files     []*models.Media
	names     map[string]string // media id → client file name
	done      bool
}

// NewBatch starts storing the files of one request for an account.
func (s *Service) NewBatch(accountID int64, source string) *Batch {
	return &Batch{s: s, accountID: accountID, source: source, counts: map[Kind]int{}, names: map[string]string{}}
}

// Bytes is how many file bytes the batch has stored so far.
func (b *Batch) Bytes() int64 { return b.total }

// Len is how many files the batch has stored so far.
func (b *Batch) Len() int { return len(b.files) }

// Add streams one file to storage, checking its count, its type (from its bytes) and its size on the
// way. The file is recorded as pending until Commit.
func (b *Batch) Add(ctx context.Context, in Input) error {
	if b.counts[in.Kind] >= in.Kind.MaxFiles() {
		return refusal.Field(in.Kind.TooManyCode(), in.Part, "More than %d %s files in one request; at most %d are allowed (input_reference counts among the images).", in.Kind.MaxFiles(), in.Kind, in.Kind.MaxFiles())
	}
	head := make([]byte, SniffLen)
	n, err := io.ReadFull(in.Body, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return &ReadError{Err: err}
	}
	head = head[:n]
	if n == 0 {
		return refusal.Field("invalid_request", in.Param, "%s is empty.", in.Param)
	}
	sniffed := Sniff(head)
	if err := checkType(in, sniffed); err != nil {
		return err
	}

	now := b.s.now()
	m := &models.Media{
		ID: ids.NewMediaID(), AccountID: b.accountID, State: models.MediaPending, Source: b.source,
		Part: in.Part, Kind: string(in.Kind), ContentType: sniffed, CreatedAt: now, ExpiresAt: now.Add(b.s.Retention),
	}
	m.StorageKey = fmt.Sprintf("media/%d/%s", b.accountID, m.ID)
	m.Origin, _ = storetext.Clip(in.Origin, 1024)
	// The row comes first: if this process dies while writing, the janitor finds the pending row and
	// deletes its file, instead of the file lingering unreferenced.
	if err := b.s.DB.W.WithContext(ctx).Create(m).Error; err != nil {
		return fmt.Errorf("record pending media %s: %w", m.ID, err)
	}
	counter := &limitedHash{r: io.MultiReader(bytes.NewReader(head), in.Body), h: sha256.New(),
		fileLimit: in.Kind.MaxBytes(), requestLeft: MaxRequestBytes - b.total}
	var stream io.Reader = counter
	probe := mediaprobe.Start(sniffed) // read beside the upload, as it streams (docs/api.md#media-probing)
	if probe != nil {
		stream = io.TeeReader(counter, probe)
	}
	size, err := b.s.Store.Put(ctx, m.StorageKey, stream)
	found := probe.Finish()
	if err != nil {
		b.forget(ctx, m)
		switch {
		case errors.Is(err, errFileTooLarge):
			return refusal.Field("file_too_large", in.Param, "%s is larger than %d MiB, the limit for a %s file.", in.Param, in.Kind.MaxBytes()/MiB, in.Kind)
		case errors.Is(err, errRequestTooLarge):
			return refusal.Field("request_too_large", in.Param, "The files of one request add up to more than %d MiB; send them in several requests.", MaxRequestBytes/MiB)
		}
		// A reader's own error (a client that went away, a remote that stalled) is the caller's to word.
		if under := counter.readErr; under != nil {
			return &ReadError{Err: under}
		}
		return fmt.Errorf("store media %s: %w", m.ID, err)
	}
	m.Bytes, m.SHA256 = size, hex.EncodeToString(counter.h.Sum(nil))
	m.Width, m.Height, m.DurationMs = found.Width, found.Height, found.DurationMs
	b.total += size
	b.counts[in.Kind]++
	b.files = append(b.files, m)
	if in.Filename != "" {
		b.names[m.ID], _ = storetext.Clip(in.Filename, 255)
	}
	return nil
}

func checkType(in Input, sniffed string) error {
	if in.Declared == "" {
		if !in.Kind.Accepts(sniffed) {
			return refusal.Field("unsupported_media_type", in.Param, "%s is %s; %s files must be %s.", in.Param, describe(sniffed), in.Kind, in.Kind.Formats())
		}
		return nil
	}
	declared := Canonical(in.Declared)
	if !in.Kind.Accepts(declared) {
		return refusal.Field("import_failed", in.Param, "%s: the server says the file is %s; %s links must serve %s.", in.Param, describe(declared), in.Kind, in.Kind.Formats())
	}
	if !in.Kind.Accepts(sniffed) || !compatible(declared, sniffed) {
		return refusal.Field("import_failed", in.Param, "%s: the server says the file is %s, but its bytes are %s. Check that the link serves the file itself, not a page about it.", in.Param, declared, describe(sniffed))
	}
	return nil
}

// Commit marks every stored file ready and returns them with signed URLs.
func (b *Batch) Commit(ctx context.Context) ([]File, error) {
	err := b.s.DB.Tx(ctx, func(tx *gorm.DB) error {
		for _, m := range b.files {
			res := tx.Model(&models.Media{}).Where("id = ? AND state = ? AND deleted_at IS NULL", m.ID, models.MediaPending).
				Updates(map[string]any{"state": models.MediaReady, "bytes": m.Bytes, "sha256": m.SHA256,
					"width": m.Width, "height": m.Height, "duration_ms": m.DurationMs})
			if res.Error != nil {
				return fmt.Errorf("mark media %s ready: %w", m.ID, res.Error)
			}
			if res.RowsAffected != 1 { // the janitor took it for a dead upload (an upload over 2 h)
				return refusal.New("invalid_request", "The upload took too long and its files were removed; send it again.")
			}
			m.State = models.MediaReady
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	b.done = true
	out := make([]File, 0, len(b.files))
	for _, m := range b.files {
		f := b.s.file(m)
		if name, ok := b.names[m.ID]; ok {
			f.Filename = &name
		}
		out = append(out, f)
	}
	return out, nil
}

// Abort deletes whatever the batch stored; it is a no-op after Commit. Deferred by every caller.
func (b *Batch) Abort(ctx context.Context) {
	if b.done {
		return
	}
	b.done = true
	for _, m := range b.files {
		b.forget(ctx, m)
	}
}

// Discard deletes the files of a committed batch that no task uses: those a create stored from its own
// body (or a remix copied) and then did not attach, because the create was refused (validation, 402,
// 429) or replayed an earlier task under its Idempotency-Key. A file some task links to stays, for the
// janitor. It never fails: a file it could not delete is left, marked or ready, to the janitor, under
// the same retention as any upload.
func (b *Batch) Discard(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if !b.done {
		b.Abort(ctx)
		return
	}
	for _, m := range b.files {
		now := b.s.now()
		// Marked deleted only when no task links it, in one statement: a create that attached it has
		// committed its link before this runs (Discard follows the create), so nothing in use is taken.
		res := b.s.DB.W.WithContext(ctx).Exec("UPDATE media SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL"+
			" AND NOT EXISTS (SELECT 1 FROM task_media tm WHERE tm.media_id = media.id)", now, m.ID)
		if res.Error != nil {
			b.s.Log.Warn("discard an unused media file; the janitor removes it after its retention", "media", m.ID, "err", res.Error)
			continue
		}
		if res.RowsAffected == 0 {
			continue // in use (or already gone)
		}
		if err := b.s.Store.Delete(ctx, m.StorageKey); err != nil {
			b.s.Log.Warn("delete a discarded media file; the janitor retries", "media", m.ID, "err", err)
			continue // the marked row stays, so the janitor's next sweep finishes it
		}
		if err := b.s.DB.W.WithContext(ctx).Delete(&models.Media{}, "id = ?", m.ID).Error; err != nil {
			b.s.Log.Warn("delete a discarded media row; the janitor retries", "media", m.ID, "err", err)
		}
	}
}

// Files are the batch's stored files (after Commit, ready), in the order they were added.
func (b *Batch) Files() []*models.Media { return b.files }

// forget deletes a pending file and its row, even when the request's context has ended.
func (b *Batch) forget(ctx context.Context, m *models.Media) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := b.s.Store.Delete(ctx, m.StorageKey); err != nil {
		b.s.Log.Warn("delete aborted media file; the janitor retries", "media", m.ID, "err", err)
		return // the pending row stays, so the janitor finds the file later
	}
	if err := b.s.DB.W.WithContext(ctx).Delete(&models.Media{}, "id = ?", m.ID).Error; err != nil {
		b.s.Log.Warn("delete aborted media row; the janitor retries", "media", m.ID, "err", err)
	}
}

// file is m as the API shows it, with a URL signed now.
func (s *Service) file(m *models.Media) File {
	exp := s.urlExpiry(m)
	f := File{ID: m.ID, Object: "file", Part: m.Part, URL: s.Signer.URL(m.ID, exp), ContentType: m.ContentType,
		Bytes: m.Bytes, SHA256: m.SHA256, ExpiresAt: exp.Unix()}
	if m.Origin != "" {
		o := m.Origin
		f.SourceURL = &o
	}
	return f
}

// urlExpiry is when a URL signed now for m stops working: after URLTTL, and never after the file is
// deleted.
func (s *Service) urlExpiry(m *models.Media) time.Time {
	exp := s.now().Add(s.URLTTL)
	if m.ExpiresAt.Before(exp) {
		exp = m.ExpiresAt
	}
	return exp.Truncate(time.Second)
}

var (
	errFileTooLarge    = errors.New("file over its size limit")
	errRequestTooLarge = errors.New("request over its size limit")
)

// limitedHash passes a file through to storage, hashing it and stopping it at the file's and the
// request's limits.
type limitedHash struct {
	r           io.Reader
	h           hash.Hash
	n           int64
	fileLimit   int64
	requestLeft int64
	readErr     error // the underlying reader's failure, kept so the caller can word it
}

func (l *limitedHash) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.n += int64(n)
	l.h.Write(p[:n])
	switch {
	case l.n > l.fileLimit:
		return 0, errFileTooLarge
	case l.n > l.requestLeft:
		return 0, errRequestTooLarge
	}
	if err != nil && !errors.Is(err, io.EOF) {
		l.readErr = err
	}
	return n, err
}
