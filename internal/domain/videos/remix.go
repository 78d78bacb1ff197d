package videos

import (
	"context"
	"errors"
	"fmt"

	"videogen/internal/domain/media"
	"videogen/internal/domain/tasks"
	"videogen/internal/domain/upstream"
	"videogen/internal/infra/blob"
	"videogen/internal/refusal"
	"videogen/models"
)

// remixFields are the members a remix body may have: OpenAI's remix takes a prompt and nothing else.
var remixFields = map[string]bool{"prompt": true}

// ParseRemix validates a POST /v1/videos/{id}/remix body, {"prompt": "..."}, by the prompt rule of a
// create (1 to 5000 characters, not only whitespace, no NUL).
func ParseRemix(body []byte) (string, *refusal.Error) {
	fields, aerr := decodeObject(body)
	if aerr != nil {
		return "", aerr
	}
	for _, name := range sortedKeys(fields) {
		if !remixFields[name] {
			return "", refusal.Field("unknown_field", truncate(name, 100), "Unknown field %q. A remix takes only prompt: the model, seconds and size are the source video's.", truncate(name, 100))
		}
	}
	p := &parsing{fields: fields}
	if aerr := readPrompt(p); aerr != nil {
		return "", aerr
	}
	return p.r.Prompt, nil
}

// How a remix hands the source video to the provider.
const (
	remixAsReference  = "reference video"
	remixAsFirstFrame = "first frame"
)

// Remix creates a new task from a completed video of the account (POST /v1/videos/{id}/remix): the
// source's model, seconds, size, aspect ratio and flags with the new prompt, priced and reserved exactly
// as a create of that request (it goes through Create, Idempotency-Key included), remixed_from_video_id
// set. The provider is given the source itself as a reference video where some route of the model takes
// one (Ark's reference_video role), else its first frame (the stored thumbnail) as the first frame; the
// file is a copy in input media, so it is signed, linked, kept and deleted like any input. A model no
// route of which takes either is refused with remix_not_supported.
func (s *Service) Remix(ctx context.Context, who Caller, sourceID string, body []byte, idemKey string) (*Created, error) {
	prompt, aerr := ParseRemix(body)
	if aerr != nil {
		return nil, aerr
	}
	src, err := s.Get(ctx, who.AccountID, sourceID)
	if err != nil {
		return nil, err
	}
	switch src.Status {
	case tasks.Completed:
	case tasks.Failed:
		return nil, errRemixFailed
	default:
		return nil, errRemixNotReady
	}
	if src.OutputKey == nil || (src.ExpiresAt != nil && !s.now().Before(*src.ExpiresAt)) {
		return nil, errRemixExpired
	}
	req := models.VideoRequest{Model: src.Model, Prompt: prompt, Seconds: src.Seconds, Size: src.Size, AspectRatio: src.AspectRatio,
		GenerateAudio: src.GenerateAudio, Watermark: src.Watermark}
	// What create would refuse for the request itself (model unavailable, seconds or size no longer
	// rendered, no capacity) is told as create tells it, before any file is copied.
	if err := s.admit(req); err != nil {
		return nil, err
	}
	how, err := s.remixInput(req, renderedSize(src))
	if err != nil {
		return nil, err
	}
	key, kind, field := *src.OutputKey, media.Video, "video_urls"
	if how == remixAsFirstFrame {
		if src.ThumbnailKey == nil {
			return nil, refusal.New("remix_not_supported", "This video cannot be remixed: the providers of %s take no reference video, only a first frame, and no first frame of this video could be stored.", src.Model)
		}
		key, kind, field = *src.ThumbnailKey, media.Image, "start_image_url"
	}
	batch, file, err := s.copyForRemix(ctx, who.AccountID, src, key, kind)
	// The copy is deleted unless the new task links it: a refused (402, 429) or replayed remix keeps
	// nothing.
	defer batch.Discard(ctx)
	if err != nil {
		return nil, err
	}
	if field == "video_urls" {
		req.VideoURLs = []string{file.URL}
	} else {
		req.StartImageURL = file.URL
	}
	m := batch.Files()[0]
	cr := &CreateRequest{VideoRequest: req, RemixedFromVideoID: src.ID,
		Media: []media.FieldRef{{Field: field, Param: "remix", Kind: kind, ID: m.ID, SHA256: m.SHA256}}}
	return s.Create(ctx, who, cr, idemKey)
}

// sourceFile is what the source's video file holds: the size and duration its provider reported
// rendering, else what was sold (a provider may render 1920x1088 for 1080p, or a few frames more).
type sourceFile struct {
	width, height int
	durationMs    int64
}

func renderedSize(src *models.Task) sourceFile {
	f := sourceFile{durationMs: int64(src.Seconds) * 1000}
	f.width, f.height = sizeOf(src.Size)
	if src.RenderedSize != nil {
		if w, h := sizeOf(*src.RenderedSize); w > 0 && h > 0 {
			f.width, f.height = w, h
		}
	}
	if src.RenderedSeconds != nil && *src.RenderedSeconds > 0 {
		f.durationMs = int64(*src.RenderedSeconds * 1000)
	}
	return f
}

// remixInput decides how the source reaches the provider for req: as a reference video where some
// route of the model takes it — the source file's size and duration within the route's limits for a
// reference video (Seedance takes 640x640 to 834x1112 pixels, so a 1080p source is not) — else as its
// first frame; neither is remix_not_supported, before anything is copied or reserved. The copy is
// probed as it is stored and create checks that probe again, so a file that differs from what its
// provider reported is still judged by what it holds.
func (s *Service) remixInput(req models.VideoRequest, src sourceFile) (string, error) {
	if s.Admit == nil {
		return remixAsReference, nil
	}
	w, h := src.width, src.height
	var unsupported *upstream.UnsupportedError
	withVideo := req
	withVideo.VideoURLs = []string{"remix-source"}
	withVideo.Media = []models.MediaProbe{{Field: "video_urls", ContentType: "video/mp4", Width: w, Height: h, DurationMs: src.durationMs}}
	err := s.Admit(withVideo)
	if !errors.As(err, &unsupported) {
		return remixAsReference, nil // taken (a busy route is create's to answer, as for any create)
	}
	asReference := unsupported.Message
	withFrame := req
	withFrame.StartImageURL = "remix-source"
	withFrame.Media = []models.MediaProbe{{Field: "start_image_url", ContentType: "image/jpeg", Width: w, Height: h}}
	if err := s.Admit(withFrame); !errors.As(err, &unsupported) {
		return remixAsFirstFrame, nil
	}
	return "", refusal.New("remix_not_supported", "Videos of %s cannot be remixed now: a remix sends the source video to the provider as a reference video, or its first frame as the first frame, and no provider serving %s takes either (as a reference video: %s). Create a new video with POST /v1/videos instead.", req.Model, req.Model, asReference)
}

// sizeOf reads "WxH"; zero for anything else.
func sizeOf(size string) (w, h int) {
	if _, err := fmt.Sscanf(size, "%dx%d", &w, &h); err != nil {
		return 0, 0
	}
	return w, h
}

// copyForRemix copies the source's stored file (its video or first frame) into the account's input
// media, through the upload's own code (type from the bytes, size limits), committed, so the new task
// can link it like any input URL.
func (s *Service) copyForRemix(ctx context.Context, accountID int64, src *models.Task, key string, kind media.Kind) (*media.Batch, *media.File, error) {
	batch := s.Media.NewBatch(accountID, media.SourceUpload)
	body, _, err := s.Blobs.Open(ctx, key)
	if errors.Is(err, blob.ErrNotFound) {
		return batch, nil, errRemixExpired // the retention janitor got there first
	}
	if err != nil {
		return batch, nil, fmt.Errorf("open %s of %s for a remix: %w", kind, src.ID, err)
	}
	defer body.Close()
	err = batch.Add(ctx, media.Input{Part: media.PartRemix, Param: "remix", Kind: kind, Body: body})
	if re, ok := media.AsReadError(err); ok {
		return batch, nil, fmt.Errorf("copy %s of %s for a remix: %w", kind, src.ID, re.Err)
	}
	if r, ok := refusal.As(err); ok {
		// The upload's limits, met by our own file (a video over 100 MiB): the customer can do nothing
		// but create anew.
		return batch, nil, refusal.New("remix_not_supported", "This video cannot be remixed: its %s is not one a provider can be sent (%s). Create a new video with POST /v1/videos instead.", kind, r.Message)
	}
	if err != nil {
		return batch, nil, fmt.Errorf("copy %s of %s for a remix: %w", kind, src.ID, err)
	}
	files, err := batch.Commit(ctx)
	if err != nil {
		return batch, nil, err
	}
	return batch, &files[0], nil
}

// The refusals of a remix's source. Remixing a video that is not completed is 409 video_not_ready, as a
// download of it is (x-should-retry: false: poll, do not retry); one whose file is gone is 404
// video_expired, as its download is.
var (
	errRemixNotReady = &refusal.Error{Code: "video_not_ready",
		Message: "Only a completed video can be remixed, and this one is still queued or in progress. Poll GET /v1/videos/{id} until it is completed, then remix it."}
	errRemixFailed = &refusal.Error{Code: "video_not_ready",
		Message: "This video failed, so there is nothing to remix. Create a new video with POST /v1/videos."}
	errRemixExpired = &refusal.Error{Code: "video_expired",
		Message: "This video's retention period has ended and its file was deleted, so it cannot be remixed. Create a new video with POST /v1/videos."}
)
