package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"videogen/internal/domain/stills"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/models"
)

// copyStills stores the thumbnail and spritesheet of a copied output beside it (out.Key with
// .<variant>.<ext> for .mp4): fetched from the provider when it serves them, else (or when that fails)
// made with ffmpeg from the stored video. A still that cannot be had is noted in the task log and left out — the video is what
// was paid for, and the content endpoint answers 404 variant_unavailable for the missing still
// (docs/api.md#variants).
func (w *Worker) copyStills(ctx context.Context, t *models.Task, cred upstream.Credential, out *tasks.Output) {
	base := strings.TrimSuffix(out.Key, ".mp4")
	var missing []string
	var made *videoFile // the stored video as a local file, for ffmpeg; made once for both stills
	defer func() { made.remove() }()
	for _, variant := range stills.Variants {
		// Each still has its own bound: the task, its video already stored, waits on it with its slot held.
		sctx, cancel := context.WithTimeout(ctx, stillTimeout)
		key, err := w.fetchStill(sctx, t, cred, base, variant)
		if err != nil && !errors.Is(err, errNoStills) {
			w.Log.Warn("the provider's still failed; making it from the stored video", "task", t.ID, "variant", variant, "err", err)
		}
		if err != nil {
			// The provider serves none, or failed to: make it from our copy of the video.
			if made == nil {
				made, err = w.localCopy(sctx, out.Key)
			}
			if made != nil {
				key, err = w.makeStill(sctx, t, made, base, variant)
			}
		}
		cancel()
		if err != nil {
			w.Log.Warn("still of a finished video", "task", t.ID, "variant", variant, "err", err)
			missing = append(missing, variant)
			continue
		}
		if variant == stills.Thumbnail {
			out.ThumbnailKey = key
		} else {
			out.SpritesheetKey = key
		}
	}
	if len(missing) > 0 {
		note := "no " + strings.Join(missing, " or ") + " could be stored for this video; the video itself is complete"
		if err := w.Tasks.Note(ctx, t, note); err != nil {
			w.Log.Error("note missing stills", "task", t.ID, "err", err)
		}
	}
}

// copyLastFrame stores the provider's last frame of the video beside it (content?variant=last_frame),
// where the provider returns one. Like a still, one that cannot be had is noted and left out: the video
// is what was paid for.
func (w *Worker) copyLastFrame(ctx context.Context, t *models.Task, cred upstream.Credential, out *tasks.Output) {
	ctx, cancel := context.WithTimeout(ctx, stillTimeout)
	defer cancel()
	body, contentType, size, ok, err := w.Pool.DownloadLastFrame(ctx, cred, *t.UpstreamTaskID)
	if !ok {
		return
	}
	key := ""
	if err == nil {
		key, err = w.storeLastFrame(ctx, strings.TrimSuffix(out.Key, ".mp4"), body, contentType, size)
		_ = body.Close()
	}
	if err != nil {
		w.Log.Warn("last frame of a finished video", "task", t.ID, "err", err)
		if err := w.Tasks.Note(ctx, t, "the provider's last frame could not be stored ("+clip(err.Error(), 200)+"); the video itself is complete"); err != nil {
			w.Log.Error("note missing last frame", "task", t.ID, "err", err)
		}
		return
	}
	out.LastFrameKey, out.LastFrameType = key, stills.ContentTypeOf(key)
}

func (w *Worker) storeLastFrame(ctx context.Context, base string, body io.Reader, contentType string, size int64) (string, error) {
	ext, err := stills.ExtensionFor(contentType)
	if err != nil {
		return "", err
	}
	if size > stills.MaxBytes {
		return "", fmt.Errorf("last frame of %d bytes is over the %d-byte limit", size, stills.MaxBytes)
	}
	return w.putStill(ctx, base+"."+stills.LastFrame+ext, io.LimitReader(body, stills.MaxBytes+1))
}

// stillTimeout bounds the making of one still, fetched or made with ffmpeg.
const stillTimeout = 2 * time.Minute

// errNoStills: the provider serves no stills; the worker makes its own.
var errNoStills = errors.New("the provider serves no stills")

// fetchStill copies the provider's still of the variant into storage and returns its key.
func (w *Worker) fetchStill(ctx context.Context, t *models.Task, cred upstream.Credential, base, variant string) (string, error) {
	body, contentType, size, ok, err := w.Pool.DownloadStill(ctx, cred, *t.UpstreamTaskID, variant)
	if !ok {
		return "", errNoStills
	}
	if err != nil {
		return "", fmt.Errorf("download %s: %w", variant, err)
	}
	defer body.Close()
	ext, err := stills.ExtensionFor(contentType)
	if err != nil {
		return "", err
	}
	if size > stills.MaxBytes {
		return "", fmt.Errorf("%s of %d bytes is over the %d-byte limit", variant, size, stills.MaxBytes)
	}
	return w.putStill(ctx, base+"."+variant+ext, io.LimitReader(body, stills.MaxBytes+1))
}

// makeStill makes the variant from the local copy of the video with ffmpeg and stores it as a JPEG.
func (w *Worker) makeStill(ctx context.Context, t *models.Task, video *videoFile, base, variant string) (string, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(w.FFmpeg.Make(ctx, video.path, variant, t.Seconds, pw)) }()
	key, err := w.putStill(ctx, base+"."+variant+".jpg", io.LimitReader(pr, stills.MaxBytes+1))
	_ = pr.CloseWithError(io.ErrClosedPipe) // stops ffmpeg's writes if the store gave up early
	return key, err
}

// putStill stores one still and checks it is neither empty nor over the limit.
func (w *Worker) putStill(ctx context.Context, key string, body io.Reader) (string, error) {
	n, err := w.Blobs.Put(ctx, key, body)
	if err == nil && (n == 0 || n > stills.MaxBytes) {
		err = fmt.Errorf("%d bytes is not a still we keep", n)
	}
	if err != nil {
		_ = w.Blobs.Delete(ctx, key)
		return "", fmt.Errorf("store %s: %w", key, err)
	}
	return key, nil
}

// videoFile is a stored output copied to a local temporary file, for ffmpeg to read (it needs to seek:
// a video's index may come last).
type videoFile struct{ path string }

func (w *Worker) localCopy(ctx context.Context, key string) (*videoFile, error) {
	if w.FFmpeg.Path == "" {
		return nil, fmt.Errorf("the provider serves no stills and ffmpeg is not available (FFMPEG_PATH)")
	}
	body, _, err := w.Blobs.Open(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("open the stored video: %w", err)
	}
	defer body.Close()
	f, err := os.CreateTemp("", "videogen-stills-*.mp4")
	if err != nil {
		return nil, fmt.Errorf("copy the stored video for ffmpeg: %w", err)
	}
	_, err = io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return nil, fmt.Errorf("copy the stored video for ffmpeg: %w", err)
	}
	return &videoFile{path: f.Name()}, nil
}

func (v *videoFile) remove() {
	if v != nil {
		_ = os.Remove(v.path)
	}
}
