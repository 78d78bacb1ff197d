package gemini

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"

	"google.golang.org/genai"

	"videogen/internal/domain/upstream"
)

// veoSizes maps each size Veo renders onto its aspectRatio and resolution (the Gemini API's Veo page,
// ai.google.dev/gemini-api/docs/video, "Veo API parameters", read 2026-11-26: 16:9 or 9:16, 720p or
// 1080p; the SDK's GenerateVideosConfig says the same of aspectRatio and resolution).
var veoSizes = map[string]struct{ ratio, resolution string }{
	"1280x720":  {"16:9", "720p"},
	"720x1280":  {"9:16", "720p"},
	"1920x1080": {"16:9", "1080p"},
	"1080x1920": {"9:16", "1080p"},
}

// Sizes lists the sizes Veo renders, widest first, for the kind's default capabilities.
var Sizes = []string{"1920x1080", "1280x720", "720x1280", "1080x1920"}

// request maps our request onto the SDK's. What is left out, the Gemini API defaults:
//   - seed: the SDK refuses it on the Gemini API ("seed parameter is only supported in Gemini Enterprise
//     Agent Platform mode", models.go, generateVideosConfigToMldev), so a customer's seed is not sent;
//   - generateAudio: refused the same way; Veo 3 models always render sound on the Gemini API;
//   - negativePrompt and personGeneration: not configurable yet (docs/upstreams.md#gemini);
//   - numberOfVideos: one video is the default.
func (c *Client) request(ctx context.Context, req upstream.SubmitRequest) (*genai.GenerateVideosSource, *genai.GenerateVideosConfig, error) {
	size := req.UpstreamSize
	if size == "" {
		size = req.Size
	}
	shape, ok := veoSizes[size]
	if !ok {
		// Admission keeps such requests off gemini routes; one that gets here was sold by mistake, and
		// nothing has been sent or created.
		return nil, nil, &upstream.RejectedError{Status: http.StatusBadRequest, Code: "unsupported_size",
			Message: fmt.Sprintf("Veo renders 1280x720, 720x1280, 1920x1080 or 1080x1920, not %q", size)}
	}
	secs := int32(req.Seconds)
	cfg := &genai.GenerateVideosConfig{AspectRatio: shape.ratio, Resolution: shape.resolution, DurationSeconds: &secs}
	source := &genai.GenerateVideosSource{Prompt: req.Prompt}
	var err error
	if req.StartImageURL != "" {
		if source.Image, err = c.fetchImage(ctx, req.StartImageURL, "first frame"); err != nil {
			return nil, nil, err
		}
	}
	if req.EndImageURL != "" {
		if cfg.LastFrame, err = c.fetchImage(ctx, req.EndImageURL, "last frame"); err != nil {
			return nil, nil, err
		}
	}
	for i, u := range req.ImageURLs {
		img, err := c.fetchImage(ctx, u, fmt.Sprintf("reference image %d", i+1))
		if err != nil {
			return nil, nil, err
		}
		// ASSET: the subject to keep (a person, character or product); Veo 3.1 takes up to three.
		cfg.ReferenceImages = append(cfg.ReferenceImages, &genai.VideoGenerationReferenceImage{Image: img, ReferenceType: genai.VideoGenerationReferenceTypeAsset})
	}
	return source, cfg, nil
}

// fetchImage reads one of our signed media URLs, without any credential, into the bytes the SDK sends
// inline. what names the input in errors; the URL is never put in one (its query is a signature).
func (c *Client) fetchImage(ctx context.Context, raw, what string) (*genai.Image, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, &upstream.RejectedError{Status: http.StatusBadRequest, Code: "invalid_input_url", Message: "the " + what + " URL is not an http(s) URL"}
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("gemini: build %s fetch: %w", what, err)
	}
	resp, err := c.media.Do(r)
	if err != nil {
		return nil, fmt.Errorf("gemini: fetch the %s from %s: %w: %v", what, u.Host, upstream.ErrTransient, cause(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("gemini: fetch the %s from %s: %w: HTTP %d", what, u.Host, upstream.ErrTransient, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		// Expired or unknown: the task's input is gone, and retrying will not bring it back.
		return nil, &upstream.RejectedError{Status: http.StatusBadRequest, Code: "input_unavailable",
			Message: fmt.Sprintf("the %s could not be fetched (HTTP %d)", what, resp.StatusCode)}
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxImage+1))
	if err != nil {
		return nil, fmt.Errorf("gemini: read the %s from %s: %w: %v", what, u.Host, upstream.ErrTransient, err)
	}
	if len(b) > maxImage {
		return nil, &upstream.RejectedError{Status: http.StatusBadRequest, Code: "input_too_large",
			Message: fmt.Sprintf("the %s is larger than the Gemini API's 20 MB inline limit", what)}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "" || mt == "application/octet-stream" {
		mt = http.DetectContentType(b)
	}
	return &genai.Image{ImageBytes: b, MIMEType: mt}, nil
}
