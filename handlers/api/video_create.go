package api

import (
	"videogen/handlers/web"

	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/media"
	"videogen/internal/domain/videos"
	"videogen/internal/refusal"
)

// createVideo answers POST /v1/videos: validate, reserve, queue; never waits for the upstream. The body
// is JSON (the documented form) or multipart/form-data (what OpenAI's SDKs send): text fields, and at
// most one file part, input_reference, the first frame; both forms go through the same validation.
func (h *handler) createVideo(c *fiber.Ctx) error {
	var req *videos.CreateRequest
	var aerr *refusal.Error
	mt, params, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil {
		return errCreateContentType
	}
	switch mt {
	case fiber.MIMEApplicationJSON:
		req, aerr = videos.ParseCreate(c.Request().Body(), h.MediaPolicy)
	case fiber.MIMEMultipartForm:
		form, batch, err := h.readCreateForm(c, params["boundary"])
		// The file stored from the body, if any, is deleted unless the task below links it: a refused or
		// replayed create leaves nothing behind (media.Batch.Discard).
		defer batch.Discard(c.UserContext())
		if err != nil {
			return err
		}
		var file *videos.FormFile
		if batch.Len() > 0 {
			files, err := batch.Commit(c.UserContext())
			if err != nil {
				return err
			}
			c.Locals(web.LocalFiles, len(files))
			file = &videos.FormFile{URL: files[0].URL, SHA256: files[0].SHA256}
		}
		req, aerr = videos.ParseCreateForm(form, file, h.MediaPolicy)
	default:
		return errCreateContentType
	}
	if aerr != nil {
		return aerr
	}
	p := web.Principal(c)
	out, err := h.Videos.Create(c.UserContext(), videos.Caller{AccountID: p.AccountID, KeyID: p.KeyID, Call: h.CallRecord(c)}, req, c.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	return h.renderCreated(c, out)
}

// renderCreated answers a create or a remix: the queued video, or the first one an Idempotency-Key
// replays.
func (h *handler) renderCreated(c *fiber.Ctx, out *videos.Created) error {
	c.Locals(web.LocalTaskID, out.Task.ID)
	if out.CallWritten {
		web.CallWritten(c)
	}
	if out.Replayed {
		c.Set("Idempotent-Replayed", "true")
	} else {
		c.Locals(web.LocalAmount, out.Task.AmountMicros)
	}
	return c.JSON(videos.ToVideo(out.Task))
}

var errCreateContentType = refusal.New("unsupported_content_type",
	"Send the request body as JSON with 'Content-Type: application/json' (or as multipart/form-data text fields, as OpenAI's SDKs do).")

// createFormLimit bounds a multipart create body: its text fields to web.MaxJSONBody, as a JSON body,
// plus one first-frame image (media.MaxImageBytes) and the framing around it.
const createFormLimit = web.MaxJSONBody + media.MaxImageBytes + web.MultipartAllowance

// readCreateForm reads a multipart create body: its text fields, held together to web.MaxJSONBody as the
// JSON body is held, and at most one file part, input_reference, the first frame, streamed into storage
// through the very code of POST /uploads/v1/files (media.Batch: the same type and size checks and
// errors, never whole in memory) and returned uncommitted in the batch, which the caller commits or
// discards. Any other file part is refused as soon as its headers are read, saying where files go. What
// is left of the body after a refusal is drained or the connection closed gracefully after the answer
// (closeIfBodyUnread), so the refusal reaches the client either way.
func (h *handler) readCreateForm(c *fiber.Ctx, boundary string) ([]videos.FormValue, *media.Batch, error) {
	batch := h.Media.NewBatch(web.Principal(c).AccountID, media.SourceUpload)
	if boundary == "" {
		return nil, batch, refusal.New("unsupported_content_type", "The multipart/form-data Content-Type has no boundary parameter; let your HTTP client set the Content-Type of a form.")
	}
	if n := c.Request().Header.ContentLength(); n > createFormLimit {
		c.Locals(web.LocalBytesIn, int64(n))
		web.CloseUnread(c)
		return nil, batch, refusal.New("request_too_large", "A multipart create may carry at most %d MiB: its text fields (1 MiB) and one input_reference image (%d MiB). Upload larger media with POST /uploads/v1/files.", createFormLimit/media.MiB, media.MaxImageBytes/media.MiB)
	}
	// The limit counts every byte read, framing included, as limitBody counts the JSON body's: all but the
	// file's are held to web.MaxJSONBody; while the file streams, the limit is the batch's (20 MiB).
	body := &web.UploadBody{R: c.Context().RequestBodyStream(), Conn: c.Context().Conn(), Start: time.Now(), Limit: web.MaxJSONBody, Stopping: h.Stopping}
	if body.R == nil { // the body was read whole already (no stream): read it from memory
		body.R = bytes.NewReader(c.Request().Body())
	}
	defer func() { c.Locals(web.LocalBytesIn, body.N) }()
	ctx := c.UserContext()
	mr := multipart.NewReader(body, boundary)
	var form []videos.FormValue
	var fileBytes int64
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return form, batch, nil
		}
		if err != nil {
			return nil, batch, h.createFormReadError(c, body.Cause(err))
		}
		name := part.FormName()
		if isFilePart(part) {
			if name != media.PartInputReference {
				return nil, batch, refusal.Field("file_upload_not_supported", web.LogText(name, 100),
					"The part %q is a file; the only file POST /v1/videos takes is input_reference, the first frame. Upload other files first with POST /uploads/v1/files (multipart, parts input_reference, image_files, video_files, audio_files) and send the urls it returns in image_urls, video_urls or audio_urls.", web.LogText(name, 100))
			}
			if batch.Len() > 0 {
				return nil, batch, refusal.Field("invalid_request", name, "Send at most one input_reference: it is the video's first frame. Further images go in image_urls.")
			}
			release, err := h.acquireTransfer(c)
			if err != nil {
				return nil, batch, err
			}
			start := body.N
			body.Limit = createFormLimit
			err = batch.Add(ctx, media.Input{Part: name, Param: name, Kind: media.Image, Filename: part.FileName(), Body: part})
			release()
			fileBytes += body.N - start
			body.Limit = fileBytes + web.MaxJSONBody
			if re, ok := media.AsReadError(err); ok {
				return nil, batch, h.createFormReadError(c, body.Cause(re.Err))
			}
			if err != nil {
				return nil, batch, err
			}
			continue
		}
		value, err := io.ReadAll(part)
		if err != nil {
			return nil, batch, h.createFormReadError(c, body.Cause(err))
		}
		form = append(form, videos.FormValue{Name: name, Value: string(value)})
	}
}

// acquireTransfer takes one of the account's (and this instance's) transfer slots for the file a
// create streams in, as POST /uploads/v1/files takes one for its request (LimitTransfers).
func (h *handler) acquireTransfer(c *fiber.Ctx) (func(), error) {
	if h.Transfers == nil {
		return func() {}, nil
	}
	release, ok := h.Transfers.Acquire(web.Principal(c).AccountID)
	if !ok {
		return nil, &refusal.Error{Code: "rate_limited", RetryAfter: 5,
			Message: "Too many uploads and imports are running at once for your account (or on this server). Wait for one to finish, then send this again."}
	}
	return release, nil
}

// isFilePart: a part with a filename parameter, even an empty one (a browser's file field left empty),
// is a file, whatever its name.
func isFilePart(part *multipart.Part) bool {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return part.FileName() != ""
	}
	_, named := params["filename"]
	return named
}

// createFormReadError words a failure to read a multipart create body.
func (h *handler) createFormReadError(c *fiber.Ctx, err error) error {
	switch {
	case errors.Is(err, web.ErrUploadTooLarge):
		web.CloseUnread(c) // the rest may be any size: never read it
		return refusal.New("request_too_large", "A multipart create may carry at most %d MiB: its text fields (1 MiB) and one input_reference image (%d MiB). Upload larger media with POST /uploads/v1/files.", createFormLimit/media.MiB, media.MaxImageBytes/media.MiB)
	case errors.Is(err, web.ErrShuttingDown):
		web.CloseUnread(c)
		return refusal.ShuttingDown
	}
	return refusal.New("invalid_request", "The multipart body could not be read: check that it is well-formed multipart/form-data and that it was sent whole.")
}
