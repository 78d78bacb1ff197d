package console

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"slices"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/billing"
	"videogen/handlers/web"
	"videogen/internal/domain/catalog"
	"videogen/internal/domain/media"
	"videogen/internal/domain/videos"
	"videogen/internal/infra/ids"
	"videogen/internal/refusal"
	"videogen/views/customer"
)

// showNewVideo answers GET /console/videos/new: the models some route renders now, the chosen model's
// lengths, sizes and inputs, and the price of the choice (docs/console.md#make-a-video).
func (h *Handler) showNewVideo(c *fiber.Ctx) error {
	p, err := h.newVideoPage(c, c.Query("model"), c.Query("seconds"), c.Query("size"))
	if err != nil {
		return err
	}
	return h.Render(c, customer.NewVideo(h.Viewer(c, "tasks"), p))
}

// newVideoPage reads what the form offers, with the choice made: a model, length or size the model
// does not have falls back to its first (a 16:9 size when there is one).
func (h *Handler) newVideoPage(c *fiber.Ctx, model, seconds, size string) (customer.NewVideoPage, error) {
	ctx := c.UserContext()
	u := web.CurrentUser(c)
	prices, err := h.Prices.All(ctx)
	if err != nil {
		return customer.NewVideoPage{}, err
	}
	acct, err := billing.Balance(ctx, h.DB, u.AccountID)
	if err != nil {
		return customer.NewVideoPage{}, err
	}
	p := customer.NewVideoPage{Verified: u.Verified(), Available: acct.AvailableMicros, Once: "console-" + ids.NewToken(24)}
	for _, m := range catalog.Models {
		offer, ok := h.ModelOffer(m.ID, m.Sizes())
		if !ok || len(offer.Seconds) == 0 || len(offer.Sizes) == 0 {
			continue
		}
		nm := customer.NewVideoModel{ID: m.ID, MicrosPerSecond: int64(prices[m.ID]), Seconds: offer.Seconds, Sizes: offer.Sizes,
			Inputs: offer.Inputs, Audio: offer.Audio, Rules: offer.Rules}
		for _, r := range catalog.Ratios {
			if _, ok := offer.Sizes[r]; ok {
				nm.Ratios = append(nm.Ratios, r)
			}
		}
		p.Models = append(p.Models, nm)
	}
	if len(p.Models) == 0 {
		return p, nil
	}
	p.Model = p.Models[0]
	for _, m := range p.Models {
		if m.ID == model {
			p.Model = m
		}
	}
	p.Seconds = p.Model.Seconds[0]
	if n, err := strconv.Atoi(seconds); err == nil && slices.Contains(p.Model.Seconds, n) {
		p.Seconds = n
	}
	p.Size = p.Model.Sizes[p.Model.Ratios[0]]
	if wide, ok := p.Model.Sizes["16:9"]; ok {
		p.Size = wide
	}
	for _, s := range p.Model.Sizes {
		if s == size {
			p.Size = s
		}
	}
	return p, nil
}

// createVideo answers POST /console/videos/new: the form's files are stored as an upload's are (the
// same checks, streamed), then the video is created by the very service POST /v1/videos calls, with the
// same refusals and ledger rows, in the member's name; the answer is the new task's live page. A
// refusal shows the form again (422) with the API's message beside the field it names.
func (h *Handler) createVideo(c *fiber.Ctx) error {
	u := web.CurrentUser(c)
	ctx := c.UserContext()
	posted, batch, err := h.readVideoForm(c)
	// The files stored are deleted unless the task links them: a refused create keeps nothing.
	defer batch.Discard(ctx)
	if errors.Is(err, errFormExpired) {
		return h.FormExpired(c)
	}
	form := posted.text
	var file *videos.FormFile
	if err == nil {
		var linked []videos.FormValue
		if linked, file, err = h.linkFormFiles(c, batch, posted); err == nil {
			form = linked
		}
	}
	var req *videos.CreateRequest
	if err == nil {
		var aerr *refusal.Error
		if req, aerr = videos.ParseCreateForm(form, file, h.MediaPolicy); aerr != nil {
			err = aerr
		}
	}
	if err == nil {
		// The files came in this body: a second post of the form stores them anew, under new ids, so
		// they count for its idempotency key by their bytes, as a multipart create's first frame does.
		sums := map[string]string{}
		for _, m := range batch.Files() {
			sums[m.ID] = m.SHA256
		}
		for i := range req.Media {
			if req.Media[i].SHA256 == "" {
				req.Media[i].SHA256 = sums[req.Media[i].ID]
			}
		}
	}
	var out *videos.Created
	if err == nil {
		out, err = h.Videos.Create(ctx, videos.Caller{AccountID: u.AccountID, Member: u.Email}, req, posted.once)
	}
	if r, ok := refusal.As(err); ok {
		p, perr := h.newVideoPage(c, formValue(form, "model"), formValue(form, "seconds"), formValue(form, "size"))
		if perr != nil {
			return perr
		}
		p.Prompt, p.Audio, p.Error, p.Param = formValue(form, "prompt"), formValue(form, "generate_audio") == "true", r.Message, r.Param
		// The API's status where it is a refusal of the request (402 no balance, 429 busy), else 422.
		status, _, _ := web.StatusOf(r)
		if status < 400 || status >= 500 || status == fiber.StatusBadRequest {
			status = fiber.StatusUnprocessableEntity
		}
		c.Status(status)
		return h.Render(c, customer.NewVideo(h.Viewer(c, "tasks"), p))
	}
	if err != nil {
		return err
	}
	return web.Redirect(c, "/console/tasks/"+out.Task.ID+"?notice=video-created")
}

var errFormExpired = errors.New("the form's CSRF token is missing or stale")

// videoFormLimit bounds the form's body: its text fields as a JSON body is bounded, and the images an
// upload may carry.
const videoFormLimit = web.MaxJSONBody + media.MaxRequestBytes + web.MultipartAllowance

// videoFormFiles are the form's file fields: the create field each becomes, and the upload part it is
// stored as.
var videoFormFiles = map[string]struct{ field, part string }{
	"start_image":      {"input_reference", media.PartInputReference},
	"end_image":        {"end_image_url", "image_files"},
	"reference_images": {"image_urls[]", "image_files"},
}

// readVideoForm reads the posted multipart form part by part: its CSRF token first (a form without it is refused
// before anything else is read), then text fields, held together to web.MaxJSONBody, and image files,
// each streamed into storage through the upload's code (media.Batch), uncommitted. A browser sends an
// empty part for a file field left empty; it is skipped.
func (h *Handler) readVideoForm(c *fiber.Ctx) (videoForm, *media.Batch, error) {
	u := web.CurrentUser(c)
	batch := h.Media.NewBatch(u.AccountID, media.SourceUpload)
	if !web.ReadsConsoleVideoForm(c) {
		// A form without files, url-encoded (its token checked by web.Page already).
		var f videoForm
		c.Request().PostArgs().VisitAll(func(k, v []byte) {
			switch string(k) {
			case "_csrf":
			case "_once":
				f.once = string(v)
			default:
				f.text = append(f.text, videos.FormValue{Name: string(k), Value: string(v)})
			}
		})
		return f, batch, nil
	}
	_, params, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || params["boundary"] == "" {
		return videoForm{}, batch, refusal.New("invalid_request", "The form could not be read; reload the page and send it again.")
	}
	if n := c.Request().Header.ContentLength(); n > videoFormLimit {
		web.CloseUnread(c)
		return videoForm{}, batch, refusal.Field("request_too_large", "upload", "The files add up to more than %d MiB; choose smaller images.", media.MaxRequestBytes/media.MiB)
	}
	body := &web.UploadBody{R: c.Context().RequestBodyStream(), Conn: c.Context().Conn(), Start: time.Now(), Limit: web.MaxJSONBody, Stopping: h.Stopping}
	if body.R == nil {
		body.R = bytes.NewReader(c.Request().Body())
	}
	mr := multipart.NewReader(body, params["boundary"])
	var form []videos.FormValue
	var fields []string // the create field of each stored file, in order
	var once string
	var fileBytes int64
	for first := true; ; first = false {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			if first {
				return videoForm{}, batch, errFormExpired
			}
			return videoForm{text: form, files: fields, once: once}, batch, nil
		}
		if err != nil {
			web.CloseUnread(c)
			return videoForm{}, batch, formReadError(body.Cause(err))
		}
		name := part.FormName()
		if first {
			token, err := io.ReadAll(io.LimitReader(part, 256))
			if name != "_csrf" || err != nil || !h.CheckFormCSRF(c, string(token)) {
				web.CloseUnread(c)
				return videoForm{}, batch, errFormExpired
			}
			continue
		}
		if _, isFile := videoFormFiles[name]; isFile {
			if part.FileName() == "" {
				_, _ = io.Copy(io.Discard, part) // a file field left empty
				continue
			}
			start := body.N
			body.Limit = videoFormLimit
			to := videoFormFiles[name]
			err := batch.Add(c.UserContext(), media.Input{Part: to.part, Param: to.field, Kind: media.Image, Filename: part.FileName(), Body: part})
			fields = append(fields, to.field)
			fileBytes += body.N - start
			body.Limit = fileBytes + web.MaxJSONBody
			if re, ok := media.AsReadError(err); ok {
				web.CloseUnread(c)
				return videoForm{}, batch, formReadError(body.Cause(re.Err))
			}
			if err != nil {
				web.CloseUnread(c)
				return videoForm{}, batch, err
			}
			continue
		}
		value, err := io.ReadAll(part)
		if err != nil {
			web.CloseUnread(c)
			return videoForm{}, batch, formReadError(body.Cause(err))
		}
		if name == "_once" {
			once = string(value)
			continue
		}
		form = append(form, videos.FormValue{Name: name, Value: string(value)})
	}
}

// videoForm is the posted form: its text fields, the create field of each file stored, in order, and
// the form's idempotency key (_once: the same form posted twice makes one video).
type videoForm struct {
	text  []videos.FormValue
	files []string
	once  string
}

// linkFormFiles commits the stored files and puts each in the create field it is: the first frame as
// the multipart create's input_reference file, the others by their signed URLs.
func (h *Handler) linkFormFiles(c *fiber.Ctx, batch *media.Batch, form videoForm) ([]videos.FormValue, *videos.FormFile, error) {
	text, fields := slices.Clone(form.text), form.files
	if batch.Len() == 0 {
		return text, nil, nil
	}
	files, err := batch.Commit(c.UserContext())
	if err != nil {
		return nil, nil, err
	}
	var first *videos.FormFile
	for i, f := range files {
		if fields[i] == "input_reference" {
			first = &videos.FormFile{URL: f.URL, SHA256: f.SHA256}
			continue
		}
		text = append(text, videos.FormValue{Name: fields[i], Value: f.URL})
	}
	return text, first, nil
}

// formValue is the first value of a text field of the form.
func formValue(form []videos.FormValue, name string) string {
	for _, f := range form {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// formReadError words a failure to read the form's body.
func formReadError(err error) error {
	switch {
	case errors.Is(err, web.ErrUploadTooLarge):
		return refusal.Field("request_too_large", "upload", "The files add up to more than %d MiB; choose smaller images.", media.MaxRequestBytes/media.MiB)
	case errors.Is(err, web.ErrShuttingDown):
		return refusal.ShuttingDown
	}
	return refusal.New("invalid_request", "The form could not be read whole; send it again.")
}
