package ark

import (
	"videogen/internal/domain/upstream"
	"videogen/models"
)

// Check refuses, before a task is created, the requests our API accepts but Ark's Seedance 2.0-class
// models cannot serve (docs/upstreams.md#ark): a first or last frame fixes the video's ends, so it
// cannot be mixed with reference media; a last frame needs a first frame; and reference audio has to
// accompany a reference image or video.
func Check(req models.VideoRequest) error {
	refs := len(req.ImageURLs) + len(req.VideoURLs) + len(req.AudioURLs)
	switch {
	case (req.StartImageURL != "" || req.EndImageURL != "") && refs > 0:
		param := "start_image_url"
		if req.StartImageURL == "" {
			param = "end_image_url"
		}
		return &upstream.UnsupportedError{Param: param,
			Message: "This model cannot combine a first or last frame (start_image_url, end_image_url) with reference media (image_urls, video_urls, audio_urls). Send either the frames or the references."}
	case req.EndImageURL != "" && req.StartImageURL == "":
		return &upstream.UnsupportedError{Param: "end_image_url",
			Message: "This model needs a first frame (start_image_url) with a last frame (end_image_url)."}
	case len(req.AudioURLs) > 0 && len(req.ImageURLs)+len(req.VideoURLs) == 0:
		return &upstream.UnsupportedError{Param: "audio_urls",
			Message: "This model needs at least one reference image (image_urls) or video (video_urls) with reference audio (audio_urls)."}
	}
	return nil
}
