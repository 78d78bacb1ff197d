// Package ids makes the random public identifiers and secrets of videogen, one function per kind.
package ids

import (
	"crypto/rand"
	"strings"
	"time"
)

// alphabet is URL-safe and unambiguous to copy; 62 symbols give 5.95 bits each.
const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// random returns n characters drawn uniformly from alphabet using crypto/rand.
func random(n int) string { return string(appendRandom(make([]byte, 0, n), n)) }

// appendRandom appends n characters drawn uniformly from alphabet using crypto/rand. Its draws are read
// into a buffer on the stack (crypto/rand's own reader does not keep it): a short id costs no allocation
// beyond what it is appended to.
func appendRandom(dst []byte, n int) []byte {
	var stack [64]byte
	buf := stack[:min(n+n/2, len(stack))]
	for n > 0 {
		if _, err := rand.Read(buf); err != nil {
			panic("crypto/rand failed: " + err.Error()) // the OS random source does not fail on Linux
		}
		for _, b := range buf {
			// 248 = 4*62: rejecting larger bytes keeps the draw uniform.
			if b < 248 && n > 0 {
				dst = append(dst, alphabet[b%62])
				n--
			}
		}
	}
	return dst
}

// NewVideoID returns a public task id: "video_" and 24 random characters (~143 bits).
func NewVideoID() string { return "video_" + random(24) }

// IsVideoID reports whether s has the shape of a video id ("video_" and 1–64 letters or digits), so
// malformed ids are refused before any lookup.
func IsVideoID(s string) bool { return hasShape(s, "video_") }

// NewAPIKey returns a new API key secret: "vg_" and 40 random characters (~238 bits).
func NewAPIKey() string { return "vg_" + random(40) }

// NewRequestID returns an id for one HTTP request.
func NewRequestID() string {
	var b [RequestIDLen]byte
	return string(AppendRequestID(b[:0]))
}

// RequestIDLen is the length of a request id: "req_", 9 characters of the time and 11 random ones.
const RequestIDLen = 4 + requestTimeLen + 11

// requestTimeLen characters of base 62 count the microseconds since 1970 until the year 2398.
const requestTimeLen = 9

// AppendRequestID appends a new request id to dst — for a request's header, without an allocation: "req_",
// the time in microseconds as 9 characters of the alphabet (whose order is the bytes' order, so later ids
// sort after earlier ones), then 11 random characters (~65 bits: ids of one microsecond never meet). Ids in
// time order go into the call log's index on request_id at its end, as the rows of a batch do into the
// table: random ones each dirtied a page of their own, which SQLite writes twice (log and file) and
// PostgreSQL once more after each checkpoint (docs/decisions.md, "Request ids are in time order").
func AppendRequestID(dst []byte) []byte {
	return appendRandom(appendTime(append(dst, "req_"...), time.Now()), RequestIDLen-4-requestTimeLen)
}

// appendTime appends t's microseconds since 1970 in requestTimeLen characters of base 62, most significant
// first.
func appendTime(dst []byte, t time.Time) []byte {
	us := uint64(max(t.UnixMicro(), 0))
	var b [requestTimeLen]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = alphabet[us%62]
		us /= 62
	}
	return append(dst, b[:]...)
}

// NewUpstreamIdempotencyKey returns the key a submission carries upstream, kept with the task.
func NewUpstreamIdempotencyKey() string { return "vgsub_" + random(32) }

// NewSimTaskID returns the id the upstream simulator gives a task.
func NewSimTaskID() string { return "simtask_" + random(24) }

// NewToken returns an opaque random token of n characters (sessions, e-mail links).
func NewToken(n int) string { return random(n) }

// NewMediaID returns the id of an uploaded or imported file: "file_" and 24 random characters.
func NewMediaID() string { return "file_" + random(24) }

// IsMediaID reports whether s has the shape of a media id, so malformed ids are refused before any
// lookup.
func IsMediaID(s string) bool { return hasShape(s, "file_") }

// hasShape reports whether s is prefix and 1–64 characters of the id alphabet.
func hasShape(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) == 0 || len(rest) > 64 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if strings.IndexByte(alphabet, rest[i]) < 0 {
			return false
		}
	}
	return true
}

// NewTopupID returns the id of a new Stripe top-up.
func NewTopupID() string { return "topup_" + random(24) }

// IsTopupID reports whether s has the shape of a top-up id.
func IsTopupID(s string) bool { return hasShape(s, "topup_") }

// NewWebhookEndpointID returns a webhook endpoint's id.
func NewWebhookEndpointID() string { return "we_" + random(24) }

// IsWebhookEndpointID reports whether s has the shape of a webhook endpoint id.
func IsWebhookEndpointID(s string) bool { return hasShape(s, "we_") }

// NewEventID returns a webhook event's id, which is also every delivery's webhook-id.
func NewEventID() string { return "evt_" + random(24) }
