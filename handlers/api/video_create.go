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

	"videogen/internal/domain/videos"
	"videogen/internal/refusal"
)

// createVideo answers POST /v1/videos: validate, reserve, queue; never waits for the upstream. The body
// is JSON (the documented form) or multipart/form-data text fields (what OpenAI's SDKs send); both go
// through the same validation.
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
		form, err := h.readCreateForm(c, params["boundary"])
		if err != nil {
			return err
		}
		req, aerr = videos.ParseCreateForm(form, h.MediaPolicy)
	default:
		return errCreateContentType
	}
	if aerr != nil {
		return aerr
	}
	p := web.Principal(c)
	out, err := h.Videos.Create(c.UserContext(), videos.Caller{AccountID: p.AccountID, KeyID: p.KeyID}, req, c.Get("Idempotency-Key"))
	if err != nil {
		return err
	}
	c.Locals(web.LocalTaskID, out.Task.ID)
	if out.Replayed {
		c.Set("Idempotent-Replayed", "true")
	} else {
		c.Locals(web.LocalAmount, out.Task.AmountMicros)
	}
	return c.JSON(videos.ToVideo(out.Task))
}

var errCreateContentType = refusal.New("unsupported_content_type",
	"Send the request body as JSON with 'Content-Type: application/json' (or as multipart/form-data text fields, as OpenAI's SDKs do).")

// readCreateForm reads a multipart create body's text fields, holding the whole body to web.MaxJSONBody as
// the JSON body is held. A file part is refused as soon as its headers are read: multipart upload inside
// create is out of this version, and the message says where files go. What is left of the body then is
// drained or the connection closed gracefully after the answer (closeIfBodyUnread), so the refusal
// reaches the client either way.
func (h *handler) readCreateForm(c *fiber.Ctx, boundary string) ([]videos.FormValue, error) {
	if boundary == "" {
		return nil, refusal.New("unsupported_content_type", "The multipart/form-data Content-Type has no boundary parameter; let your HTTP client set the Content-Type of a form.")
	}
	// The limit counts every byte read, framing included, as limitBody counts the JSON body's.
	body := &uploadBody{r: c.Context().RequestBodyStream(), start: time.Now(), limit: web.MaxJSONBody, stopping: h.Stopping}
	if body.r == nil { // the body was read whole already (no stream): read it from memory
		body.r = bytes.NewReader(c.Request().Body())
	}
	defer func() { c.Locals(web.LocalBytesIn, body.n) }()
	mr := multipart.NewReader(body, boundary)
	var form []videos.FormValue
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return form, nil
		}
		if err != nil {
			return nil, h.createFormReadError(c, body.cause(err))
		}
		name := part.FormName()
		if isFilePart(part) {
			return nil, refusal.Field("file_upload_not_supported", web.LogText(name, 100),
				"The part %q is a file; files are not accepted inside POST /v1/videos. Upload it first with POST /uploads/v1/files (multipart, parts input_reference, image_files, video_files, audio_files) and send the url it returns in start_image_url, image_urls, video_urls or audio_urls.", web.LogText(name, 100))
		}
		value, err := io.ReadAll(part)
		if err != nil {
			return nil, h.createFormReadError(c, body.cause(err))
		}
		form = append(form, videos.FormValue{Name: name, Value: string(value)})
	}
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
	case errors.Is(err, errUploadTooLarge):
		web.CloseUnread(c) // the rest may be any size: never read it
		return refusal.RequestTooBig
	case errors.Is(err, errShuttingDown):
		web.CloseUnread(c)
		return refusal.ShuttingDown
	}
	return refusal.New("invalid_request", "The multipart body could not be read: check that it is well-formed multipart/form-data and that it was sent whole.")
}
