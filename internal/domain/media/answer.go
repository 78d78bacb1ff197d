package media

import "errors"

// Answer is the reply to an upload or an import: every stored file, and its URLs grouped the way a
// create request takes them, ready to paste.
type Answer struct {
	Object        string   `json:"object"`
	Files         []File   `json:"files"`
	ImageURLs     []string `json:"image_urls"`
	VideoURLs     []string `json:"video_urls"`
	AudioURLs     []string `json:"audio_urls"`
	StartImageURL *string  `json:"start_image_url"`
	// ExpiresAt is when the first of the URLs stops working (unix seconds).
	ExpiresAt int64 `json:"expires_at"`
}

// NewAnswer groups files by the create field they belong in.
func NewAnswer(files []File, kinds map[string]Kind) Answer {
	a := Answer{Object: "media.batch", Files: files, ImageURLs: []string{}, VideoURLs: []string{}, AudioURLs: []string{}}
	for _, f := range files {
		if a.ExpiresAt == 0 || f.ExpiresAt < a.ExpiresAt {
			a.ExpiresAt = f.ExpiresAt
		}
		if f.Part == PartInputReference {
			u := f.URL
			a.StartImageURL = &u
			continue
		}
		switch kinds[f.Part] {
		case Video:
			a.VideoURLs = append(a.VideoURLs, f.URL)
		case Audio:
			a.AudioURLs = append(a.AudioURLs, f.URL)
		default:
			a.ImageURLs = append(a.ImageURLs, f.URL)
		}
	}
	return a
}

// PartInputReference is the upload part of a first-frame image.
const PartInputReference = "input_reference"

// UploadParts are the multipart parts an upload accepts, and the kind each carries.
var UploadParts = map[string]Kind{PartInputReference: Image, "image_files": Image, "video_files": Video, "audio_files": Audio}

// ImportFields are the JSON fields an import accepts, and the kind each carries.
var ImportFields = map[string]Kind{"image_urls": Image, "video_urls": Video, "audio_urls": Audio}

// ReadError is a failure of the reader a file came from (the client's body, a remote server), not of
// storage: the caller words it for the customer.
type ReadError struct{ Err error }

func (e *ReadError) Error() string { return "read file: " + e.Err.Error() }
func (e *ReadError) Unwrap() error { return e.Err }

// AsReadError returns the reader failure inside err, if any.
func AsReadError(err error) (*ReadError, bool) {
	var re *ReadError
	ok := errors.As(err, &re)
	return re, ok
}
