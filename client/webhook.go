package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// WebhookEvent is a verified event from a videogen webhook: {"id":"evt_…","object":"event",
// "created_at":…,"type":"video.completed","data":{"id":"video_…"}}. Fetch the video with Get.
type WebhookEvent struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
	Type      string `json:"type"` // "video.completed" or "video.failed"
	Data      struct {
		ID string `json:"id"` // the video
	} `json:"data"`
}

// WebhookTolerance is how old (or how far ahead) a delivery's webhook-timestamp may be: Standard
// Webhooks' and OpenAI's 5 minutes, which bounds how long a captured delivery can be replayed.
const WebhookTolerance = 5 * time.Minute

// ErrWebhookSignature is returned (wrapped) by VerifyWebhook for every delivery it does not accept.
var ErrWebhookSignature = errors.New("webhook not verified")

// VerifyWebhook checks a delivery as received — its raw body, untouched, and its headers — against the
// endpoint's signing secret (whsec_…, from the console) and returns the event. It accepts the delivery
// when the webhook-timestamp is within WebhookTolerance of now and one of the webhook-signature's v1
// signatures is the HMAC-SHA256 of "webhook-id.webhook-timestamp.body" under the secret (the Standard
// Webhooks scheme; during a rotation the header carries a signature under each secret). Deduplicate
// accepted events by their ID: a retried delivery carries the same one.
func VerifyWebhook(body []byte, header http.Header, secret string, now time.Time) (*WebhookEvent, error) {
	key, err := base64.StdEncoding.Strict().DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || !strings.HasPrefix(secret, "whsec_") {
		return nil, fmt.Errorf("%w: the secret is not a whsec_ signing secret", ErrWebhookSignature)
	}
	id, ts, sigs := header.Get("webhook-id"), header.Get("webhook-timestamp"), header.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return nil, fmt.Errorf("%w: webhook-id, webhook-timestamp or webhook-signature missing", ErrWebhookSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: webhook-timestamp %q is not a number", ErrWebhookSignature, ts)
	}
	if age := now.Sub(time.Unix(sec, 0)); age > WebhookTolerance || age < -WebhookTolerance {
		return nil, fmt.Errorf("%w: webhook-timestamp is %s away from now", ErrWebhookSignature, age.Round(time.Second))
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	ok := false
	for _, s := range strings.Fields(sigs) {
		version, sig, found := strings.Cut(s, ",")
		if !found || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		return nil, fmt.Errorf("%w: no signature matches the secret", ErrWebhookSignature)
	}
	var ev WebhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("decode webhook event: %w", err)
	}
	if ev.ID != id {
		return nil, fmt.Errorf("%w: the event's id is not the webhook-id", ErrWebhookSignature)
	}
	return &ev, nil
}
