// Package janitor keeps the platform's storage to its promises: input media and generated videos are
// deleted when their retention ends, files that no row names — what a crash leaves mid-write — are
// swept, and idempotency keys past their window go. Both sweeps are periodic jobs of the chores queue
// (docs/jobs.md, "Periodic chores"): River's elected leader inserts them, any instance works them, task
// workers or not.
package janitor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"videogen/internal/domain/media"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/videos"
	"videogen/internal/infra/blob"
	"videogen/internal/infra/db"
	"videogen/internal/infra/queue"
	"videogen/models"
)

// OrphanGrace is how old an unnamed file must be before it is swept. It is longer than anything that
// writes a file before its row names it may take: an upload (at most 30 minutes, then it is cut off) and
// the copy of an output (its download gives up after 30 minutes), each followed at once by the commit
// that names the file.
const OrphanGrace = time.Hour

// Config tunes the janitor.
type Config struct {
	// RetentionEvery is how often files past their retention are looked for (MEDIA_SWEEP_INTERVAL).
	RetentionEvery time.Duration
	// OrphanEvery is how often the whole storage is listed for unnamed files (STORAGE_SWEEP_INTERVAL).
	OrphanEvery time.Duration
}

// Deps are what the janitor sweeps and with what.
type Deps struct {
	DB      *db.DB
	Tasks   *tasks.Store   // forgets a deleted video's key
	Media   *media.Service // input media: its retention sweep and its store
	Outputs blob.Store     // generated videos
	Log     *slog.Logger
	Now     func() time.Time // the clock
}

// Janitor sweeps the two stores.
type Janitor struct {
	Deps
	cfg Config
}

// New returns a janitor.
func New(cfg Config, d Deps) *Janitor {
	return &Janitor{Deps: d, cfg: cfg}
}

func (j *Janitor) clock() time.Time { return j.Now().UTC().Truncate(time.Microsecond) }

// RetentionArgs is the job of the retention sweep: input media, generated videos and idempotency keys
// past their time.
type RetentionArgs struct{}

// Kind implements river.JobArgs.
func (RetentionArgs) Kind() string { return "media_retention" }

// InsertOpts: a chore is not retried; its next run is (docs/jobs.md).
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Chores, MaxAttempts: 1}
}

// OrphanArgs is the job of the storage sweep: files no row names.
type OrphanArgs struct{}

// Kind implements river.JobArgs.
func (OrphanArgs) Kind() string { return "storage_sweep" }

// InsertOpts: a chore is not retried; its next run is (docs/jobs.md).
func (OrphanArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: queue.Chores, MaxAttempts: 1}
}

// Schedule registers both sweeps' workers with q and runs them on the leader: the retention sweep every
// RetentionEvery, the storage sweep every OrphanEvery, each also when a leader starts.
func (j *Janitor) Schedule(q *queue.Queue) {
	queue.Add(q, &retentionWorker{j: j})
	queue.Add(q, &orphanWorker{j: j})
	q.Every(j.cfg.RetentionEvery, func() river.JobArgs { return RetentionArgs{} })
	q.Every(j.cfg.OrphanEvery, func() river.JobArgs { return OrphanArgs{} })
}

// runFor bounds a run of a chore repeated every `every`: until the next is due, and at least a minute,
// so a backlog is worked in slices and a run never outlasts its turn by much.
func runFor(every time.Duration) time.Duration { return max(every, time.Minute) }

type retentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	j *Janitor
}

func (w *retentionWorker) Timeout(*river.Job[RetentionArgs]) time.Duration {
	return runFor(w.j.cfg.RetentionEvery)
}

func (w *retentionWorker) Work(ctx context.Context, _ *river.Job[RetentionArgs]) error {
	return w.j.SweepRetention(ctx)
}

type orphanWorker struct {
	river.WorkerDefaults[OrphanArgs]
	j *Janitor
}

func (w *orphanWorker) Timeout(*river.Job[OrphanArgs]) time.Duration {
	return runFor(w.j.cfg.OrphanEvery)
}

func (w *orphanWorker) Work(ctx context.Context, _ *river.Job[OrphanArgs]) error {
	n, err := w.j.SweepOrphans(ctx, w.j.clock())
	if n > 0 {
		w.j.Log.Info("storage sweep deleted files no row names", "files", n)
	}
	if err != nil && ctx.Err() == nil {
		w.j.Log.Error("storage sweep", "err", err)
	}
	return err
}

// SweepRetention deletes input media and generated videos past their retention, and idempotency keys
// past their window, batch after batch until none is left or ctx ends: one instance does it for the
// whole platform. A step that fails is logged and the others still run; the errors are returned.
func (j *Janitor) SweepRetention(ctx context.Context) error {
	now := j.clock()
	var errs []error
	fail := func(what string, err error) {
		if ctx.Err() == nil {
			j.Log.Error(what, "err", err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", what, err))
	}
	if n, err := drain(ctx, func() (int, error) { return j.Media.Sweep(ctx, now) }); err != nil {
		fail("media retention", err)
	} else if n > 0 {
		j.Log.Info("deleted input media past their retention", "files", n)
	}
	if err := videos.PruneIdempotencyKeys(ctx, j.DB, now); err != nil {
		fail("idempotency keys", err)
	}
	if n, err := drain(ctx, func() (int, error) { return j.ExpireOutputs(ctx, now) }); err != nil {
		fail("output retention", err)
	} else if n > 0 {
		j.Log.Info("deleted videos past their retention", "files", n)
	}
	return errors.Join(errs...)
}

// drain repeats a batch step while it does something, until ctx ends, and returns what it did in all.
func drain(ctx context.Context, step func() (int, error)) (int, error) {
	total := 0
	for {
		n, err := step()
		total += n
		if err != nil || n == 0 {
			return total, err
		}
		if err := ctx.Err(); err != nil {
			return total, err
		}
	}
}

// ExpireOutputs deletes up to a hundred generated videos whose expires_at has passed and forgets their
// keys, and returns how many. Two runs may overlap (a leader's change, a run past its turn): deleting
// twice is harmless and the row update is guarded.
func (j *Janitor) ExpireOutputs(ctx context.Context, now time.Time) (int, error) {
	var expired []models.Task
	if err := j.DB.R.WithContext(ctx).Select("id", "output_key", "thumbnail_key", "spritesheet_key", "last_frame_key").
		Where("output_key IS NOT NULL AND expires_at < ?", now).Limit(100).Find(&expired).Error; err != nil {
		return 0, fmt.Errorf("find expired outputs: %w", err)
	}
	n := 0
expired:
	for _, t := range expired {
		// The stills go with the video, under the same retention; the row forgets them all at once.
		for _, key := range tasks.StoredKeys(&t) {
			if err := j.Outputs.Delete(ctx, key); err != nil {
				j.Log.Warn("delete expired output; retrying next sweep", "task", t.ID, "key", key, "err", err)
				continue expired
			}
		}
		if err := j.Tasks.ForgetOutput(ctx, t.ID, *t.OutputKey); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// SweepOrphans lists both stores and deletes every file older than OrphanGrace that no row names: a
// half-written ".put-*" file, a video copied whose completion never committed, an upload whose row is
// gone. Only the platform's own prefixes are listed. It stops when ctx ends; the next run starts over.
func (j *Janitor) SweepOrphans(ctx context.Context, now time.Time) (int, error) {
	outputs, err := j.sweepStore(ctx, j.Outputs, "outputs/", now, j.namedOutputs)
	if err != nil {
		return outputs, err
	}
	inputs, err := j.sweepStore(ctx, j.Media.Store, "media/", now, j.namedMedia)
	return outputs + inputs, err
}

// namer returns which of keys a row names.
type namer func(ctx context.Context, keys []string) (map[string]bool, error)

const listBatch = 500

func (j *Janitor) sweepStore(ctx context.Context, store blob.Store, prefix string, now time.Time, named namer) (int, error) {
	deleted := 0
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		names, err := named(ctx, batch)
		if err != nil {
			return err
		}
		for _, key := range batch {
			if names[key] {
				continue
			}
			if err := ctx.Err(); err != nil {
				return err // the run's time is up: the next run lists again
			}
			if err := store.Delete(ctx, key); err != nil {
				j.Log.Warn("delete an unnamed file; retrying next sweep", "key", key, "err", err)
				continue
			}
			j.Log.Info("deleted a file no row names", "key", key)
			deleted++
		}
		batch = batch[:0]
		return nil
	}
	// Listing and deleting are apart: deleting while a folder is walked would disturb the walk.
	var old []string
	err := store.List(ctx, prefix, func(o blob.Object) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if now.Sub(o.ModTime) >= OrphanGrace {
			old = append(old, o.Key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	for _, key := range old {
		batch = append(batch, key)
		if len(batch) == listBatch {
			if err := flush(); err != nil {
				return deleted, err
			}
		}
	}
	return deleted, flush()
}

// namedOutputs: outputs/<task>/<copy>.mp4 is named when it is its task's output_key, and the stills
// beside it (<copy>.thumbnail.jpg, ...) when they are its thumbnail_key, spritesheet_key or last_frame_key.
func (j *Janitor) namedOutputs(ctx context.Context, keys []string) (map[string]bool, error) {
	var taskIDs []string
	for _, k := range keys {
		if parts := strings.Split(k, "/"); len(parts) >= 3 {
			taskIDs = append(taskIDs, parts[1])
		}
	}
	out := map[string]bool{}
	if len(taskIDs) == 0 {
		return out, nil
	}
	var named []models.Task
	if err := j.DB.R.WithContext(ctx).Select("output_key", "thumbnail_key", "spritesheet_key", "last_frame_key").
		Where("id IN ? AND output_key IS NOT NULL", taskIDs).Find(&named).Error; err != nil {
		return nil, fmt.Errorf("read output keys: %w", err)
	}
	for _, t := range named {
		for _, k := range tasks.StoredKeys(&t) {
			out[k] = true
		}
	}
	return out, nil
}

// namedMedia: media/<account>/<file id> is named when a media row (in any state) has it as storage_key.
func (j *Janitor) namedMedia(ctx context.Context, keys []string) (map[string]bool, error) {
	var mediaIDs []string
	for _, k := range keys {
		mediaIDs = append(mediaIDs, path.Base(k))
	}
	var named []string
	if err := j.DB.R.WithContext(ctx).Model(&models.Media{}).Where("id IN ?", mediaIDs).Pluck("storage_key", &named).Error; err != nil {
		return nil, fmt.Errorf("read media keys: %w", err)
	}
	out := map[string]bool{}
	for _, k := range named {
		out[k] = true
	}
	return out, nil
}
