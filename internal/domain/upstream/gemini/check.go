package gemini

import (
	"videogen/internal/domain/upstream"
	"videogen/models"
)

// maxReferenceImages is how many reference images Veo 3.1 takes (the Gemini API's Veo page: "up to
// three reference images").
const maxReferenceImages = 3

// Check refuses, before a task is created, the requests our API accepts but Veo on the Gemini API
// cannot serve. The SDK's GenerateVideosConfig documents both combinations (types.go): lastFrame is
// "only supported for image to video use cases" (it needs a first frame), and with referenceImages
// "the image, video, or last_frame field are not supported".
func Check(req models.VideoRequest) error {
	switch {
	case len(req.ImageURLs) > 0 && (req.StartImageURL != "" || req.EndImageURL != ""):
		param := "start_image_url"
		if req.StartImageURL == "" {
			param = "end_image_url"
		}
		return &upstream.UnsupportedError{Param: param,
			Message: "This model cannot combine a first or last frame (start_image_url, end_image_url) with reference images (image_urls). Send either the frames or the references."}
	case req.EndImageURL != "" && req.StartImageURL == "":
		return &upstream.UnsupportedError{Param: "end_image_url",
			Message: "This model needs a first frame (start_image_url) with a last frame (end_image_url)."}
	case len(req.ImageURLs) > maxReferenceImages:
		return &upstream.UnsupportedError{Param: "image_urls",
			Message: "This model takes at most 3 reference images (image_urls)."}
	}
	return nil
}
