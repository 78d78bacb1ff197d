package videos

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"time"

	"gorm.io/gorm"

	"videogen/billing"
	"videogen/internal/domain/apikeys"
	"videogen/internal/domain/media"
	"videogen/internal/domain/stills"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/infra/blob"
	"videogen/internal/infra/db"
	"videogen/internal/infra/ids"
	"videogen/internal/money"
	"videogen/internal/refusal"
	"videogen/models"
)

// Service creates and reads tasks.
type Service struct {
	DB     *db.DB
	Tasks  *tasks.Store // every write to a task
	Prices *billing.Prices
	Blobs  blob.Store
	// Media checks and links the files a create request refers to.
	Media *media.Service
	// Polls answers polls of recently read tasks from memory (nil: always the database).
	Polls *PollCache
	// MaxQueued is how many tasks an account may have waiting for an upstream slot.
	MaxQueued int
	// QueueTimeout is how long a task may wait for an upstream slot.
	QueueTimeout time.Duration
	// Pool asks providers to stop tasks their customers cancel (nil: tasks accepted upstream cannot be
	// cancelled).
	Pool *upstream.Pool
	// Admit, when set, refuses a new task no upstream credential could start (upstream.Pool.Admit).
	Admit func(models.VideoRequest) error
	// Notify, when set, is called after a task is created, to wake the worker.
	Notify func()
	// Now is the clock; tests move it.
	Now func() time.Time
	// Log records what a request cannot report to its client.
	Log *slog.Logger
}

func (s *Service) now() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// Caller is who creates a task.
type Caller struct {
	AccountID int64
	KeyID     int64 // 0 for a member's create in the console
	// Member is the e-mail of the console member who made the video (no key): the task log names them.
	Member string
	// Call, when set, is the request's call-log row, which a create that reserves money writes in its own
	// transaction: the reservation and its record commit together, in one commit instead of two
	// (docs/decisions.md, "A create's call-log row commits with its money"). A refused or replayed create
	// writes nothing here; its row is written as every other request's is.
	Call *CallRecord
}

// CallRecord is a create request's call-log row as its handler knows it before the create: the create
// adds the task, the amount reserved and the latency, and answers 200 if it commits.
type CallRecord struct {
	Row     models.CallLog
	Started time.Time // when the request's handling began, for the row's latency
}

// Created is the outcome of Create.
type Created struct {
	Task *models.Task
	// Replayed is true when an Idempotency-Key matched an earlier create: nothing new was reserved.
	Replayed bool
	// CallWritten is true when the request's call-log row (Caller.Call) was committed with the task.
	CallWritten bool
}

// IdempotencyWindow is how long an Idempotency-Key stays bound to its task.
const IdempotencyWindow = 24 * time.Hour

// PruneIdempotencyKeys deletes keys older than the window: they bind nothing any more, only take space.
func PruneIdempotencyKeys(ctx context.Context, d *db.DB, now time.Time) error {
	if err := d.W.WithContext(ctx).Exec("DELETE FROM idempotency_keys WHERE created_at < ?", now.Add(-IdempotencyWindow)).Error; err != nil {
		return fmt.Errorf("delete old idempotency keys: %w", err)
	}
	return nil
}

// MaxIdempotencyKeyLen bounds the header's length.
const MaxIdempotencyKeyLen = 255

// Create reserves the task's price and records it as queued, in one transaction; it never waits for the
// upstream. With an idempotency key, the same key and body within 24 h return the first task.
func (s *Service) Create(ctx context.Context, who Caller, req *CreateRequest, idemKey string) (*Created, error) {
	if len(idemKey) > MaxIdempotencyKeyLen {
		return nil, refusal.Field("invalid_request", "Idempotency-Key", "Idempotency-Key is longer than %d characters.", MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(idemKey); i++ {
		if idemKey[i] < 0x20 || idemKey[i] > 0x7e {
			return nil, refusal.Field("invalid_request", "Idempotency-Key", "Idempotency-Key must be printable ASCII, such as a UUID.")
		}
	}
	price, err := s.Prices.PerSecond(ctx, req.Model)
	if err != nil {
		return nil, err
	}
	hash := ""
	if idemKey != "" {
		hash = req.Hash()
	}
	// What was found of each file when it was stored: the capability checks (admit) and the routing of
	// the task read it, and it is kept with the task's inputs (docs/upstreams.md#capabilities).
	if len(req.Media) > 0 && s.Media != nil && req.TaskInputs.Media == nil {
		probes, err := s.Media.Probes(ctx, who.AccountID, req.Media)
		if err != nil {
			return nil, err
		}
		req.TaskInputs.Media = probes
	}
	// A concurrent create with the same key may win the insert; the retry then finds its row.
	for attempt := 0; ; attempt++ {
		out, err := s.create(ctx, who, req, price, idemKey, hash)
		if err != nil && idemKey != "" && attempt == 0 && db.IsUniqueViolation(err) {
			continue
		}
		return out, err
	}
}

func (s *Service) create(ctx context.Context, who Caller, req *CreateRequest, price money.Micros, idemKey, hash string) (*Created, error) {
	now := s.now()
	inputs, _ := json.Marshal(req.TaskInputs)
	amount := price * money.Micros(req.Seconds)
	var keyID *int64
	if who.KeyID != 0 {
		keyID = &who.KeyID
	}
	task := &models.Task{
		ID: ids.NewVideoID(), AccountID: who.AccountID, APIKeyID: keyID,
		Model: req.Model, Prompt: req.Prompt, Seconds: req.Seconds, Size: req.Size, AspectRatio: req.AspectRatio,
		GenerateAudio: req.GenerateAudio, Watermark: req.Watermark, Seed: req.Seed, Inputs: string(inputs),
		PriceMicros: int64(price), AmountMicros: int64(amount),
		NextCheckAt: now, QueueDeadline: now.Add(s.QueueTimeout),
		CreatedAt: now, UpdatedAt: now,
	}
	if req.RemixedFromVideoID != "" {
		src := req.RemixedFromVideoID
		task.RemixedFromVideoID = &src
	}
	var out *Created
	err := s.DB.Tx(ctx, func(tx *gorm.DB) error {
		// The key's limits first: a limited key's row stays locked to the commit, so its creates queue
		// here and each sees the spend of those before it (apikeys.GuardCreate).
		var guard *apikeys.Guard
		if who.KeyID != 0 {
			var err error
			if guard, err = apikeys.GuardCreate(tx, s.DB.Postgres, who.KeyID); err != nil {
				return err
			}
		}
		if idemKey != "" {
			var prior models.IdempotencyKey
			err := tx.Where("account_id = ? AND key = ?", who.AccountID, idemKey).Take(&prior).Error
			switch {
			case err == nil && prior.CreatedAt.After(now.Add(-IdempotencyWindow)):
				if prior.RequestHash != hash {
					return refusal.Field("idempotency_conflict", "Idempotency-Key", "This Idempotency-Key was used in the last 24 hours with a different request body. Use a new key for a new video.")
				}
				var first models.Task
				if err := tx.Where("id = ?", prior.TaskID).Take(&first).Error; err != nil {
					return fmt.Errorf("load task %s of idempotency key: %w", prior.TaskID, err)
				}
				out = &Created{Task: &first, Replayed: true}
				return nil
			case err == nil: // older than the window: the key is free again
				if err := tx.Delete(&prior).Error; err != nil {
					return fmt.Errorf("expire idempotency key: %w", err)
				}
			case !errors.Is(err, gorm.ErrRecordNotFound):
				return fmt.Errorf("look up idempotency key: %w", err)
			}
		}
		// After the replay check: a retried create finds its task whatever the key's limits or the
		// upstreams' state now, and a replay counts nothing against the key's limit.
		if guard != nil {
			if err := guard.Check(tx, req.Model, amount, now); err != nil {
				return err
			}
		}
		if err := s.admit(req.VideoRequest); err != nil {
			return err
		}
		detail := fmt.Sprintf("created; %s reserved (%d s at %s/s)", amount.USD(), req.Seconds, price.USD())
		if req.RemixedFromVideoID != "" {
			detail += "; remix of " + req.RemixedFromVideoID
		}
		if who.Member != "" {
			detail += "; made in the console by " + who.Member
		}
		if err := s.Tasks.Enqueue(tx, task, detail); err != nil {
			return err
		}
		if len(req.Media) > 0 {
			if s.Media == nil {
				return errors.New("create with media inputs, but no media service is configured")
			}
			if err := s.Media.Attach(tx, who.AccountID, task.ID, req.Media); err != nil {
				return err
			}
		}
		if idemKey != "" {
			row := &models.IdempotencyKey{AccountID: who.AccountID, Key: idemKey, RequestHash: hash, TaskID: task.ID, CreatedAt: now}
			if err := tx.Create(row).Error; err != nil {
				return err // a unique violation makes Create retry and find the winner's task
			}
		}
		// The account row is touched last, so it stays locked only for the backlog count, the reservation,
		// its entry and the commit: creates of one account queue on that lock. A refusal rolls back
		// everything above, so a 429 or 402 writes nothing.
		if err := s.Tasks.EnterBacklog(tx, who.AccountID, s.MaxQueued); errors.Is(err, tasks.ErrBacklogFull) {
			return refusal.NoCapacity(10, s.MaxQueued)
		} else if err != nil {
			return err
		}
		if err := billing.Reserve(tx, who.AccountID, task.ID, amount, now); err != nil {
			if errors.Is(err, billing.ErrInsufficientBalance) {
				var a models.Account
				if err := tx.Select("available_micros", "disabled_at").Take(&a, who.AccountID).Error; err != nil {
					return fmt.Errorf("read balance: %w", err)
				}
				if a.Disabled() {
					return refusal.AccountDisabled
				}
				return refusal.NoBalance(amount.USD(), money.Micros(a.AvailableMicros).USD())
			}
			return err
		}
		out = &Created{Task: task}
		if who.Call != nil {
			row := who.Call.Row
			row.Status, row.TaskID, row.AmountReservedMicros = http.StatusOK, task.ID, int64(amount)
			row.LatencyMicros = time.Since(who.Call.Started).Microseconds()
			if err := tx.Create(&row).Error; err != nil {
				return fmt.Errorf("record the create's call: %w", err)
			}
			out.CallWritten = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !out.Replayed && s.Notify != nil {
		s.Notify()
	}
	return out, nil
}

// admit asks the upstream pool whether a task for req could start, and words its refusal for the client.
func (s *Service) admit(req models.VideoRequest) error {
	if s.Admit == nil {
		return nil
	}
	err := s.Admit(req)
	var unsupported *upstream.UnsupportedError
	var busy *upstream.NoCapacityError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &unsupported) && unsupported.Code == upstream.CodeUnsupportedValue:
		// No route of the model renders this value: refused before anything is reserved.
		return refusal.Field("unsupported_value", unsupported.Param, "%s", unsupported.Message)
	case errors.As(err, &unsupported):
		return refusal.Field("unsupported_input_combination", unsupported.Param, "%s", unsupported.Message)
	case errors.As(err, &busy):
		return refusal.NoUpstream(int((busy.RetryAfter + time.Second - 1) / time.Second))
	case errors.Is(err, upstream.ErrNotServed):
		return refusal.Field("model_unavailable", "model", "The model %s is not available at the moment. GET /v1/models lists the models you can use now.", req.Model)
	}
	return err
}

// Polled is a task as GET /v1/videos/{id} answers it.
type Polled struct {
	// JSON is the task's video object (ToVideo) as encoding/json writes it. Shared by every poll the
	// cache answers with it: never to be changed.
	JSON []byte
	// CreatedAt is when the task was created, for PollAfter.
	CreatedAt time.Time
	read      time.Time // when it was read from the database (real time, for the cache)
}

// PollAfter is how long the client should wait before polling again (PollAfter).
func (p *Polled) PollAfter(now time.Time) time.Duration { return pollAfter(p.CreatedAt, now) }

// Poll returns a task of the account for GET /v1/videos/{id}, rendered, from the poll cache when it may.
func (s *Service) Poll(ctx context.Context, accountID int64, id string) (*Polled, error) {
	// Real time, not the service's clock: freshness is how long this process has held an answer, and a
	// test holding its clock still must not make a cached poll last for ever.
	now := time.Now()
	// Keyed by account and id: another account's task is never in this account's part of the cache, so
	// refusing it costs the same database read as an unknown id, and timing tells nothing.
	if s.Polls != nil {
		if p, ok := s.Polls.get(accountID, id, now); ok {
			return p, nil
		}
	}
	t, err := s.readPolled(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(ToVideo(t))
	if err != nil {
		return nil, fmt.Errorf("render task %s: %w", t.ID, err)
	}
	p := &Polled{JSON: body, CreatedAt: t.CreatedAt, read: now}
	if s.Polls != nil {
		s.Polls.put(accountID, t.ID, p) // the id as read, not the request's (whose bytes are reused)
	}
	return p, nil
}

// pollQuery reads what a task's API object shows (ToVideo) and nothing else, by the task's primary key:
// the one statement of a poll the cache cannot answer.
const pollQuery = `SELECT id, model, status, progress, created_at, completed_at, expires_at, prompt, size, seconds,
	remixed_from_video_id, error_code, error_message, aspect_ratio, generate_audio, watermark, seed, rendered_seed,
	amount_micros, billing_state
	FROM tasks WHERE id = ? AND account_id = ? AND deleted_at IS NULL`

var pollQueryPostgres = db.NumberPlaceholders(pollQuery)

// readPolled is Get for the poll: the columns ToVideo needs, scanned without GORM's reflection.
func (s *Service) readPolled(ctx context.Context, accountID int64, id string) (*models.Task, error) {
	if !ids.IsVideoID(id) {
		return nil, refusal.NotFound
	}
	q := pollQuery
	if s.DB.Postgres {
		q = pollQueryPostgres
	}
	t := models.Task{AccountID: accountID}
	err := s.DB.ReadRow(ctx, q, []any{id, accountID}, &t.ID, &t.Model, &t.Status, &t.Progress, &t.CreatedAt, &t.CompletedAt,
		&t.ExpiresAt, &t.Prompt, &t.Size, &t.Seconds, &t.RemixedFromVideoID, &t.ErrorCode, &t.ErrorMessage, &t.AspectRatio,
		&t.GenerateAudio, &t.Watermark, &t.Seed, &t.RenderedSeed, &t.AmountMicros, &t.BillingState)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, refusal.NotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read task %s: %w", id, err)
	}
	return &t, nil
}

// Get reads a task of the account from the database, as the API shows it. Another account's task, and
// a task the customer deleted, are reported exactly like a missing one.
func (s *Service) Get(ctx context.Context, accountID int64, id string) (*models.Task, error) {
	return s.get(ctx, accountID, id, false)
}

// GetWithDeleted is Get for the account's records (the console, staff): a deleted task is still there,
// shown as deleted, with its task log and ledger entries.
func (s *Service) GetWithDeleted(ctx context.Context, accountID int64, id string) (*models.Task, error) {
	return s.get(ctx, accountID, id, true)
}

func (s *Service) get(ctx context.Context, accountID int64, id string, withDeleted bool) (*models.Task, error) {
	if !ids.IsVideoID(id) {
		return nil, refusal.NotFound
	}
	q := s.DB.R.WithContext(ctx).Where("id = ? AND account_id = ?", id, accountID)
	if !withDeleted {
		q = q.Where("deleted_at IS NULL")
	}
	var t models.Task
	err := q.Take(&t).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, refusal.NotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read task %s: %w", id, err)
	}
	return &t, nil
}

// ListParams are the query of GET /v1/videos.
type ListParams struct {
	Limit int
	After string // id of the last task of the previous page
	Asc   bool
	// Status keeps only tasks in this state as people read it ("" = any): a status, or StateCancelled —
	// "failed" then leaves out the tasks their customer cancelled, which the API reports as failed.
	Status string
	Model  string // only tasks of this model ("" = any)
	// WithDeleted lists the tasks the customer deleted too (the console's records; the API hides them).
	WithDeleted bool
}

// Page is one page of tasks.
type Page struct {
	Tasks   []models.Task
	HasMore bool
	// Next is the cursor of the next page when HasMore: the last task listed, or, when a filtered page
	// holds less than a page, the last task it searched (see TaskScanWindow).
	Next string
	// SearchedTo is set when a filter matched less than a page among the tasks one page reads: the
	// creation time of the oldest task this page looked at.
	SearchedTo *time.Time
}

// TaskScanWindow bounds what one page of a list filtered by status or model reads: the account's tasks
// after the cursor, in the list's order, at most this many. Without it a filter that matches little (a
// model the account hardly uses) reads every task of the account for one page (docs/performance.md,
// "Figures that hold at a million tasks"). Queued and in-progress tasks need no window: a partial index
// holds only them (migration 00022). A variable only so that tests can make it small.
var TaskScanWindow = 2_000

// List returns the account's tasks, newest first unless Asc, after the cursor task.
func (s *Service) List(ctx context.Context, accountID int64, p ListParams) (*Page, error) {
	if p.After != "" && !ids.IsVideoID(p.After) {
		return nil, refusal.Field("invalid_request", "after", "after must be the id of one of your videos, as returned in last_id.")
	}
	var cur *models.Task
	if p.After != "" {
		// The cursor may name a task deleted since its page was read: it still marks the place, so paging
		// goes on where it was.
		cur = &models.Task{}
		err := s.DB.R.WithContext(ctx).Select("id", "created_at").Where("id = ? AND account_id = ?", p.After, accountID).Take(cur).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, refusal.Field("invalid_request", "after", "after must be the id of one of your videos, as returned in last_id.")
		}
		if err != nil {
			return nil, fmt.Errorf("read cursor task: %w", err)
		}
	}
	order := "created_at DESC, id DESC"
	if p.Asc {
		order = "created_at ASC, id ASC"
	}
	// base is the account's tasks after the cursor: what the index (account_id, created_at, id) reads.
	base := func() *gorm.DB {
		q := s.DB.R.WithContext(ctx).Model(&models.Task{}).Where("account_id = ?", accountID)
		if !p.WithDeleted {
			q = q.Where("deleted_at IS NULL")
		}
		// The bound on created_at alone is redundant, and it is what an index range starts from: without it
		// the database reads every task newer than the cursor and drops them, so a page far back costs as
		// much as all the pages before it.
		switch {
		case cur != nil && p.Asc:
			q = q.Where("created_at >= ? AND ((created_at > ?) OR (created_at = ? AND id > ?))", cur.CreatedAt, cur.CreatedAt, cur.CreatedAt, cur.ID)
		case cur != nil:
			q = q.Where("created_at <= ? AND ((created_at < ?) OR (created_at = ? AND id < ?))", cur.CreatedAt, cur.CreatedAt, cur.CreatedAt, cur.ID)
		}
		return q
	}
	filter := func(q *gorm.DB) *gorm.DB {
		switch p.Status {
		case "":
		case tasks.StateCancelled:
			q = q.Where("status = ? AND error_code = ?", tasks.Failed, tasks.CodeCancelled)
		case tasks.Failed:
			q = q.Where("status = ? AND (error_code IS NULL OR error_code <> ?)", tasks.Failed, tasks.CodeCancelled)
		default:
			q = q.Where("status = ?", p.Status)
		}
		if p.Model != "" {
			q = q.Where("model = ?", p.Model)
		}
		return q
	}
	var rows []models.Task
	var q *gorm.DB
	switch {
	case p.Status == "" && p.Model == "":
		q = base()
	case p.Status == tasks.Queued || p.Status == tasks.InProgress:
		// Named literally, so the partial index of unfinished tasks serves it on both engines.
		q = filter(base().Where("status IN ('queued', 'in_progress')"))
	default:
		q = filter(s.DB.R.WithContext(ctx).Table("(?) AS w", base().Order(order).Limit(TaskScanWindow)))
	}
	if err := q.Order(order).Limit(p.Limit + 1).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	page := &Page{Tasks: rows}
	if len(rows) > p.Limit {
		page.Tasks, page.HasMore, page.Next = rows[:p.Limit], true, rows[p.Limit-1].ID
		return page, nil
	}
	if p.Model == "" && (p.Status == "" || p.Status == tasks.Queued || p.Status == tasks.InProgress) {
		return page, nil
	}
	// Fewer than a page matched among the window: the next page starts after the last task read, if the
	// window was full. (An OFFSET of a constant: this reads the window again, never more.)
	var edge []models.Task
	if err := base().Select("id", "created_at").Order(order).Offset(TaskScanWindow - 1).Limit(1).Find(&edge).Error; err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	if len(edge) > 0 {
		at := edge[0].CreatedAt
		page.HasMore, page.Next, page.SearchedTo = true, edge[0].ID, &at
	}
	return page, nil
}

// Content is an open, completed video.
type Content struct {
	Body        io.ReadCloser
	Size        int64
	ContentType string
	// Ext is the file name extension for Content-Disposition: .mp4, or the still's.
	Ext string
}

// VariantVideo is the default variant of GET /v1/videos/{id}/content, the MP4; internal/domain/stills names the others.
const VariantVideo = "video"

// OpenContent opens a completed task's stored video, or one of the stills stored beside it (variant
// thumbnail or spritesheet; "" means video), for streaming.
func (s *Service) OpenContent(ctx context.Context, accountID int64, id, variant string) (*Content, error) {
	if variant == "" {
		variant = VariantVideo
	}
	if variant != VariantVideo && variant != stills.LastFrame && !slices.Contains(stills.Variants, variant) {
		return nil, refusal.InvalidVariant
	}
	t, err := s.Get(ctx, accountID, id)
	if err != nil {
		return nil, err
	}
	switch t.Status {
	case tasks.Completed:
	case tasks.Failed:
		return nil, refusal.VideoFailed
	default:
		return nil, refusal.VideoNotReady
	}
	if t.OutputKey == nil || (t.ExpiresAt != nil && !s.now().Before(*t.ExpiresAt)) {
		return nil, refusal.VideoExpired
	}
	key, contentType, ext := *t.OutputKey, "video/mp4", ".mp4"
	if variant != VariantVideo {
		still := t.ThumbnailKey
		switch variant {
		case stills.Spritesheet:
			still = t.SpritesheetKey
		case stills.LastFrame:
			still = t.LastFrameKey
		}
		if still == nil {
			return nil, refusal.VariantUnavailable(variant)
		}
		key, contentType, ext = *still, stills.ContentTypeOf(*still), "."+variant+path.Ext(*still)
	}
	body, size, err := s.Blobs.Open(ctx, key)
	switch {
	case errors.Is(err, blob.ErrNotFound) && variant == VariantVideo:
		return nil, refusal.VideoExpired // the retention janitor got there first
	case errors.Is(err, blob.ErrNotFound):
		return nil, refusal.VariantUnavailable(variant) // the video is within its retention: only the still is gone
	case err != nil:
		return nil, fmt.Errorf("open %s of %s: %w", variant, id, err)
	}
	return &Content{Body: body, Size: size, ContentType: contentType, Ext: ext}, nil
}

// Delete answers DELETE /v1/videos/{id} (by names who asks, for the task log): a task that has not
// finished is cancelled (Cancel); a finished one is deleted: from then on the API answers for it as for
// an unknown id, and its stored video is deleted. The task log and the ledger keep it, and the console
// shows it as deleted. Cancelled is nil when the task was deleted rather than cancelled.
func (s *Service) Delete(ctx context.Context, accountID int64, id, by string) (*Cancelled, error) {
	c, err := s.Cancel(ctx, accountID, id, by)
	if !errors.Is(err, ErrFinished) {
		return c, err
	}
	keys, err := s.Tasks.MarkDeleted(ctx, accountID, id, by)
	switch {
	case errors.Is(err, tasks.ErrNoTask):
		return nil, refusal.NotFound
	case errors.Is(err, tasks.ErrUnfinished): // cannot happen: a task never leaves a final status
		return nil, refusal.CannotCancel(msgCancelBusy)
	case err != nil:
		return nil, err
	}
	// The poll cache may hold the task: this instance stops showing it at once, the others within their
	// freshness bound (PollCache).
	s.Polls.Forget(accountID, id)
	// The task is deleted whatever happens to the files now: no row names them since the commit above, so
	// a file left by a failed delete is the orphan sweep's. Not the request's context: a client that goes
	// away must not leave the files to the sweep.
	for _, key := range keys {
		if err := s.Blobs.Delete(context.WithoutCancel(ctx), key); err != nil {
			s.Log.Warn("delete a stored file of a deleted video; the storage sweep will remove it", "task", id, "key", key, "err", err)
		}
	}
	return nil, nil
}
