// Package media keeps the files customers upload or import: it decides a file's type from its bytes,
// streams it to storage within the limits of docs/api.md, hands it out as signed, expiring URLs, resolves
// those URLs in create requests, and deletes files when their retention ends.
package media

import (
	"strings"

	"github.com/gabriel-vasile/mimetype"
)

// Kind is what a file is for: an image, a video or an audio track.
type Kind string

// The kinds of input media.
const (
	Image Kind = "image"
	Video Kind = "video"
	Audio Kind = "audio"
)

// MiB is the unit of the size limits of docs/api.md: "20 MB" is read as 20 MiB, the more generous reading.
const MiB = 1 << 20

// Limits of one upload or import request (docs/api.md, Limits).
const (
	MaxImages       = 9 // input_reference counts among them
	MaxVideos       = 3
	MaxAudios       = 3
	MaxImageBytes   = 20 * MiB
	MaxVideoBytes   = 100 * MiB
	MaxAudioBytes   = 50 * MiB
	MaxRequestBytes = 300 * MiB // of file bytes in one request
)

// MaxFiles is how many files of k one request may carry.
func (k Kind) MaxFiles() int {
	switch k {
	case Video:
		return MaxVideos
	case Audio:
		return MaxAudios
	}
	return MaxImages
}

// MaxBytes is the largest file of k.
func (k Kind) MaxBytes() int64 {
	switch k {
	case Video:
		return MaxVideoBytes
	case Audio:
		return MaxAudioBytes
	}
	return MaxImageBytes
}

// TooManyCode is the error code for more than MaxFiles files of k.
func (k Kind) TooManyCode() string {
	switch k {
	case Video:
		return "too_many_videos"
	case Audio:
		return "too_many_audios"
	}
	return "too_many_images"
}

// accepted lists, per kind, the formats a file may have (canonical type → what customers call it).
// Everything else — SVG, HTML, PDF, archives, executables — is refused, so a file we serve can never be
// active content.
var accepted = map[Kind][]struct{ Type, Name string }{
	Image: {{"image/jpeg", "JPEG"}, {"image/png", "PNG"}, {"image/webp", "WebP"}},
	Video: {{"video/mp4", "MP4"}, {"video/quicktime", "QuickTime (MOV)"}, {"video/webm", "WebM"}},
	Audio: {{"audio/mpeg", "MP3"}, {"audio/wav", "WAV"}, {"audio/aac", "AAC"}, {"audio/mp4", "M4A"},
		{"audio/ogg", "Ogg"}, {"audio/flac", "FLAC"}},
}

// aliases maps other names of the accepted types (declared by servers, or reported by the detector for
// a subtype) to the canonical one.
var aliases = map[string]string{
	"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/apng": "image/png",
	"video/x-m4v": "video/mp4", "video/mpeg4": "video/mp4",
	"audio/mp3": "audio/mpeg", "audio/x-mpeg": "audio/mpeg", "audio/x-mp3": "audio/mpeg",
	"audio/x-wav": "audio/wav", "audio/wave": "audio/wav", "audio/vnd.wave": "audio/wav",
	"audio/x-m4a": "audio/mp4", "audio/m4a": "audio/mp4", "audio/x-mp4a": "audio/mp4",
	"audio/x-aac": "audio/aac", "audio/aacp": "audio/aac", "audio/x-flac": "audio/flac",
	"application/ogg": "audio/ogg", "audio/x-ogg": "audio/ogg",
}

// Canonical returns the canonical name of a content type: lower case, parameters dropped, aliases
// resolved.
func Canonical(contentType string) string {
	t, _, _ := strings.Cut(contentType, ";")
	t = strings.ToLower(strings.TrimSpace(t))
	if c, ok := aliases[t]; ok {
		return c
	}
	return t
}

// Accepts reports whether contentType (canonical) is a format of k.
func (k Kind) Accepts(contentType string) bool {
	for _, a := range accepted[k] {
		if a.Type == contentType {
			return true
		}
	}
	return false
}

// Formats names the accepted formats of k for messages: "JPEG, PNG or WebP".
func (k Kind) Formats() string {
	names := make([]string, 0, len(accepted[k]))
	for _, a := range accepted[k] {
		names = append(names, a.Name)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// SniffLen is how much of a file's start decides its type.
const SniffLen = 3072

// Sniff returns the canonical content type the bytes of a file's start show.
func Sniff(head []byte) string {
	return Canonical(mimetype.Detect(head).String())
}

// compatible reports whether a server's declared type and the type the bytes show describe the same
// format. The ISO media family is often labelled loosely (MOV served as video/mp4), so those agree.
func compatible(declared, sniffed string) bool {
	if declared == sniffed {
		return true
	}
	iso := map[string]bool{"video/mp4": true, "video/quicktime": true}
	return iso[declared] && iso[sniffed]
}

func describe(contentType string) string {
	if contentType == "" || contentType == "application/octet-stream" {
		return "not a recognised media format"
	}
	return contentType
}
