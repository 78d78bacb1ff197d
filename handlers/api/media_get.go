package api

import (
	"videogen/handlers/web"

	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"videogen/internal/domain/media"
	"videogen/internal/infra/blob"
	"videogen/internal/refusal"
)

// mediaNotFound is every refusal of /media: a tampered, expired or unknown link all look the same, so
// the answer tells a prober nothing.
var mediaNotFound = refusal.New("not_found", "Not found.")

// getMedia answers GET /media/{id}?exp=…&sig=…, the signed URLs uploads and imports hand out. The
// signature is the authorization: no key, no session. From S3 it redirects to a short-lived presigned
// link; from local disk it serves the bytes, inert (nosniff, a sandboxing CSP).
func (h *handler) getMedia(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("Content-Security-Policy", "sandbox")
	// Providers fetch these server-side; customers may also preview them from their own pages.
	c.Set("Cross-Origin-Resource-Policy", "cross-origin")
	id := c.Params("id")
	if !h.Media.Signer.Verify(id, c.Query("exp"), c.Query("sig"), h.Now()) {
		return h.mediaError(c, mediaNotFound)
	}
	m, err := h.Media.Lookup(c.UserContext(), id)
	if errors.Is(err, media.ErrNoFile) {
		return h.mediaError(c, mediaNotFound)
	}
	if err != nil {
		return h.mediaError(c, err)
	}
	exp, _ := strconv.ParseInt(c.Query("exp"), 10, 64)
	left := time.Until(time.Unix(exp, 0))
	if p, ok := h.Media.Store.(blob.Presigner); ok {
		ttl := min(h.PresignTTL, left)
		link, err := p.PresignGet(c.UserContext(), m.StorageKey, max(ttl, time.Second), m.ContentType)
		if err != nil {
			return h.mediaError(c, err)
		}
		return c.Redirect(link, fiber.StatusFound)
	}
	rc, size, err := h.Media.Store.Open(c.UserContext(), m.StorageKey)
	if errors.Is(err, blob.ErrNotFound) {
		return h.mediaError(c, mediaNotFound)
	}
	if err != nil {
		return h.mediaError(c, err)
	}
	c.Set(fiber.HeaderCacheControl, "private, max-age="+strconv.Itoa(int(left.Seconds())))
	c.Set(fiber.HeaderContentType, m.ContentType)
	c.Set(fiber.HeaderContentDisposition, `inline; filename="`+m.ID+`"`)
	return web.ServeRanges(c, rc, size)
}

func (h *handler) mediaError(c *fiber.Ctx, err error) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return h.APIError(c, err)
}
