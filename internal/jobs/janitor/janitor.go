// Package janitor keeps the platform's storage to its promises, on every instance whether or not it runs
// task workers: input media and generated videos are deleted when their retention ends, files that no
// row names — what a crash leaves mid-write — are swept, and idempotency keys past their window go.
package janitor

import (
	"context"
	"fmt"
	"log/slog"
	"path"
	"strings"
	"time"

	"videogen/internal/domain/media"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/videos"
	"videogen/internal/infra/blob"
	"videogen/internal/infra/db"
	"videogen/internal/infra/runner"
	"videogen/models"
)

// OrphanGrace is how old an unnamed file must be before it is swept. It is longer than anything that
// writes a file before its row names it may take: an upload (at most 30 minutes, then it is cut off) and
// the copy of an output (its download gives up after 30 minutes), each followed at once by the commit
// that names the file.
const OrphanGrace = time.Hour

// Config tunes the janitor.
type Config struct {
	Owner string // this instance's name, noted on the orphan sweep it runs
	// RetentionEvery is how often files past their retention are looked for (MEDIA_SWEEP_INTERVAL).
	RetentionEvery time.Duration
	// OrphanEvery is how often the whole storage is listed for unnamed files (STORAGE_SWEEP_INTERVAL);
	// one instance does it per interval.
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

// RetentionJob sweeps input media and idempotency keys past their retention: at start, then every
// RetentionEvery.
func (j *Janitor) RetentionJob() runner.Every {
	return runner.Every{Interval: j.cfg.RetentionEvery, AtStart: true, Job: j.sweepRetention}
}

// OrphanJob asks every minute (at most OrphanEvery) whether the storage sweep is due; the database says
// whose turn it is, so one instance sweeps per OrphanEvery.
func (j *Janitor) OrphanJob() runner.Every {
	return runner.Every{Interval: min(j.cfg.OrphanEvery, time.Minute), Job: func(ctx context.Context) {
		if n, err := j.SweepOrphansIfDue(ctx); err != nil && ctx.Err() == nil {
			j.Log.Error("storage sweep", "err", err)
		} else if n > 0 {
			j.Log.Info("storage sweep deleted files no row names", "files", n)
		}
	}}
}

func (j *Janitor) sweepRetention(ctx context.Context) {
	now := j.clock()
	if n, err := j.Media.Sweep(ctx, now); err != nil && ctx.Err() == nil {
		j.Log.Error("media retention", "err", err)
	} else if n > 0 {
		j.Log.Info("deleted input media past their retention", "files", n)
	}
	if err := videos.PruneIdempotencyKeys(ctx, j.DB, now); err != nil && ctx.Err() == nil {
		j.Log.Error("idempotency keys", "err", err)
	}
	if n, err := j.ExpireOutputs(ctx, now); err != nil && ctx.Err() == nil {
		j.Log.Error("output retention", "err", err)
	} else if n > 0 {
		j.Log.Info("deleted videos past their retention", "files", n)
	}
}

// ExpireOutputs deletes generated videos whose expires_at has passed and forgets their key. Several
// instances may do it at once: deleting twice is harmless and the row update is guarded.
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

// SweepOrphansIfDue runs SweepOrphans when no instance has in the last OrphanEvery, and returns how many
// files it deleted.
func (j *Janitor) SweepOrphansIfDue(ctx context.Context) (int, error) {
	now := j.clock()
	claimed, err := j.DB.ClaimRun(ctx, "orphans", j.cfg.Owner, j.cfg.OrphanEvery, now)
	if err != nil || !claimed {
		return 0, err // or another instance swept recently
	}
	return j.SweepOrphans(ctx, now)
}

// SweepOrphans lists both stores and deletes every file older than OrphanGrace that no row names: a
// half-written ".put-*" file, a video copied whose completion never committed, an upload whose row is
// gone. Only the platform's own prefixes are listed.
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
