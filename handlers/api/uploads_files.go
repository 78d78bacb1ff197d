package api

import (
	"videogen/handlers/web"

	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/catalog"
	"videogen/internal/domain/media"
	"videogen/internal/refusal"
)

// uploadFiles answers POST /uploads/v1/files: it streams each multipart part to storage as it arrives,
// checking counts, sizes and file types on the way, and stores all the files or none.
func (h *handler) uploadFiles(c *fiber.Ctx) error {
	if model := c.Query("model"); model != "" {
		// Files are not bound to a model: the parameter is checked so a typo shows before a long upload.
		if _, ok := catalog.Lookup(model); !ok {
			return refusal.Field("invalid_model", "model", "Unknown model %q. GET /v1/models lists the model ids; the parameter is optional.", model)
		}
	}
	mt, params, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || mt != fiber.MIMEMultipartForm || params["boundary"] == "" {
		return refusal.New("unsupported_content_type", "Send the files as multipart/form-data, in parts named input_reference, image_files, video_files or audio_files (for example curl -F image_files=@cat.png).")
	}
	if n := c.Request().Header.ContentLength(); n > media.MaxRequestBytes+web.MultipartAllowance {
		c.Locals(web.LocalBytesIn, int64(n))
		return tooLargeUpload()
	}
	body := &web.UploadBody{R: c.Context().RequestBodyStream(), Conn: c.Context().Conn(), Start: time.Now(),
		Limit: media.MaxRequestBytes + web.MultipartAllowance, Stopping: h.Stopping}
	if body.R == nil { // no body stream (a request with neither a length nor chunks): read what there is
		body.R = bytes.NewReader(c.Request().Body())
	}
	ctx := c.UserContext()
	batch := h.Media.NewBatch(web.Principal(c).AccountID, media.SourceUpload)
	defer batch.Abort(ctx)
	defer func() { c.Locals(web.LocalBytesIn, body.N) }()

	mr := multipart.NewReader(body, params["boundary"])
	seen := map[string]int{}
	for {
		part, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return uploadReadError(body.Cause(err))
		}
		name := part.FormName()
		kind, ok := media.UploadParts[name]
		if !ok {
			return refusal.Field("unknown_field", web.LogText(name, 100), "Unknown part %q. Files go in parts named input_reference (one first-frame image), image_files, video_files or audio_files.", web.LogText(name, 100))
		}
		i := seen[name]
		seen[name]++
		param := fmt.Sprintf("%s[%d]", name, i)
		if name == media.PartInputReference {
			if i > 0 {
				return refusal.Field("invalid_request", name, "Send at most one input_reference: it is the video's first frame. Further images go in image_files.")
			}
			param = name
		}
		err = batch.Add(ctx, media.Input{Part: name, Param: param, Kind: kind, Filename: part.FileName(), Body: part})
		if re, ok := media.AsReadError(err); ok {
			return uploadReadError(body.Cause(re.Err))
		}
		if err != nil {
			return err
		}
	}
	if batch.Len() == 0 {
		return refusal.New("missing_field", "The upload holds no files. Send at least one part named input_reference, image_files, video_files or audio_files.")
	}
	files, err := batch.Commit(ctx)
	if err != nil {
		return err
	}
	c.Locals(web.LocalFiles, len(files))
	return c.JSON(media.NewAnswer(files, media.UploadParts))
}

func tooLargeUpload() *refusal.Error {
	return refusal.New("request_too_large", "One upload may carry at most %d MiB of files; send them in several requests.", media.MaxRequestBytes/media.MiB)
}

// uploadReadError words a failure to read the client's body.
func uploadReadError(err error) error {
	var ne net.Error
	switch {
	case errors.Is(err, web.ErrUploadTooLarge):
		return tooLargeUpload()
	case errors.Is(err, web.ErrShuttingDown):
		return refusal.ShuttingDown
	case errors.As(err, &ne) && ne.Timeout():
		return refusal.New("invalid_request", "The upload stopped arriving (nothing for %s, or longer than %s in all); send it again.", web.UploadIdle, web.UploadMax)
	}
	return refusal.New("invalid_request", "The multipart body could not be read; check that it is well-formed multipart/form-data and that it was sent whole.")
}
