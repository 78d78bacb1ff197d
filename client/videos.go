package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The statuses of a video: queued → in_progress → completed | failed.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
)

// Video is a generation task as the API shows it: OpenAI's video object plus videogen's aspect ratio,
// audio, watermark, seed and billing. Times are unix seconds.
type Video struct {
	ID                 string      `json:"id"`
	Object             string      `json:"object"`
	Model              string      `json:"model"`
	Status             string      `json:"status"`
	Progress           int         `json:"progress"` // 0–100
	CreatedAt          int64       `json:"created_at"`
	CompletedAt        *int64      `json:"completed_at"`
	ExpiresAt          *int64      `json:"expires_at"` // the MP4 is deleted then
	Prompt             string      `json:"prompt"`
	Size               string      `json:"size"`    // "1280x720"
	Seconds            string      `json:"seconds"` // a string, as in OpenAI's object
	RemixedFromVideoID *string     `json:"remixed_from_video_id"`
	Error              *VideoError `json:"error"` // set when Status is failed
	AspectRatio        string      `json:"aspect_ratio"`
	GenerateAudio      bool        `json:"generate_audio"`
	Watermark          bool        `json:"watermark"`
	Seed               *int64      `json:"seed,omitempty"`
	Billing            Billing     `json:"billing"`
}

// Done reports whether the video reached a final status (completed or failed).
func (v *Video) Done() bool { return v.Status == StatusCompleted || v.Status == StatusFailed }

// VideoError says why a video failed.
type VideoError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Billing is the video's price and where its reservation stands: "reserved" while it is made,
// "settled" (charged) when it completed, "released" (refunded in full) when it failed.
type Billing struct {
	Amount   string `json:"amount"` // dollars as a decimal string, "1.500000"; never parse it as a float
	Currency string `json:"currency"`
	State    string `json:"state"`
}

// CreateParams is a create request. Model and Prompt are required; zero values leave the server's
// defaults (4 seconds, 16:9, no audio, no watermark).
type CreateParams struct {
	Model         string
	Prompt        string
	Seconds       int    // 4–15
	AspectRatio   string // "21:9", "16:9", "4:3", "1:1", "3:4", "9:16"
	Size          string // "1280x720"; one of the model's sizes
	GenerateAudio bool
	Watermark     bool
	Seed          *int64
	// Media go in as URLs this server issued to the same account: Upload's answer lists them.
	StartImageURL string
	EndImageURL   string
	ImageURLs     []string
	VideoURLs     []string
	AudioURLs     []string
	// IdempotencyKey makes repeats of this create return the first task (within 24 hours) instead of
	// paying again. Empty: Create generates one, so its own retries are safe; set it to make a repeat
	// by your program safe too, such as after a crash.
	IdempotencyKey string
}

type createBody struct {
	Model         string   `json:"model"`
	Prompt        string   `json:"prompt"`
	Seconds       int      `json:"seconds,omitempty"`
	AspectRatio   string   `json:"aspect_ratio,omitempty"`
	Size          string   `json:"size,omitempty"`
	GenerateAudio bool     `json:"generate_audio,omitempty"`
	Watermark     bool     `json:"watermark,omitempty"`
	Seed          *int64   `json:"seed,omitempty"`
	StartImageURL string   `json:"start_image_url,omitempty"`
	EndImageURL   string   `json:"end_image_url,omitempty"`
	ImageURLs     []string `json:"image_urls,omitempty"`
	VideoURLs     []string `json:"video_urls,omitempty"`
	AudioURLs     []string `json:"audio_urls,omitempty"`
}

// Create starts a video: the server validates the request, reserves price × seconds from the wallet
// and answers with the queued video. It never waits for the generation; see Wait.
func (c *Client) Create(ctx context.Context, p CreateParams) (*Video, error) {
	body, err := json.Marshal(createBody{
		Model: p.Model, Prompt: p.Prompt, Seconds: p.Seconds, AspectRatio: p.AspectRatio, Size: p.Size,
		GenerateAudio: p.GenerateAudio, Watermark: p.Watermark, Seed: p.Seed, StartImageURL: p.StartImageURL,
		EndImageURL: p.EndImageURL, ImageURLs: p.ImageURLs, VideoURLs: p.VideoURLs, AudioURLs: p.AudioURLs,
	})
	if err != nil {
		return nil, fmt.Errorf("encode create request: %w", err)
	}
	key := p.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	}
	// Retrying is safe only because every attempt carries the same key and the same bytes: the server
	// answers a repeat with the task the first attempt made, if it made one.
	var v Video
	r := request{method: http.MethodPost, path: "/v1/videos", body: body, header: http.Header{"Idempotency-Key": {key}}, retry: true}
	if _, err := c.callJSON(ctx, r, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Get returns the video with this id.
func (c *Client) Get(ctx context.Context, id string) (*Video, error) {
	v, _, err := c.get(ctx, id)
	return v, err
}

// get is Get with the server's advice on when to poll again.
func (c *Client) get(ctx context.Context, id string) (*Video, time.Duration, error) {
	var v Video
	h, err := c.callJSON(ctx, request{method: http.MethodGet, path: "/v1/videos/" + url.PathEscape(id), retry: true}, &v)
	if err != nil {
		return nil, 0, err
	}
	return &v, pollAfter(h.Get("openai-poll-after-ms")), nil
}

// Poll bounds. The server asks for 1–15 s; whatever the header says, Wait neither hammers the server nor
// stalls for minutes on one answer.
const (
	defaultPoll = time.Second            // no header, or not a whole number of milliseconds
	minPoll     = 100 * time.Millisecond // floor for 0, negative and tiny values
	maxPoll     = 30 * time.Second       // cap for large values, however large
)

// pollAfter turns openai-poll-after-ms into the wait before the next poll, within minPoll–maxPoll.
func pollAfter(h string) time.Duration {
	ms, err := strconv.ParseInt(strings.TrimSpace(h), 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return defaultPoll
	}
	// Bounded in milliseconds, before the conversion: a huge value (ParseInt gives MaxInt64 for one out
	// of range) would overflow time.Duration and wrap to a negative wait.
	ms = min(max(ms, minPoll.Milliseconds()), maxPoll.Milliseconds())
	return time.Duration(ms) * time.Millisecond
}

// Wait polls the video until it completes or fails, sleeping between polls as long as the server's
// openai-poll-after-ms header asks. The header is bounded: a missing one or one that is not a whole
// number of milliseconds waits 1 s, 0 and negative values 100 ms, and anything above 30 s (an absurd
// value, however large) 30 s. onUpdate, when not nil, sees every answer, the first one included. A
// failed video is returned with a *VideoFailedError; when ctx ends or a poll fails, Wait returns the
// last video it saw (nil if none) with the error. The video keeps generating on the server whatever
// happens to Wait.
func (c *Client) Wait(ctx context.Context, id string, onUpdate func(*Video)) (*Video, error) {
	var last *Video
	for {
		v, after, err := c.get(ctx, id)
		if err != nil {
			return last, fmt.Errorf("wait for %s: %w", id, err)
		}
		last = v
		if onUpdate != nil {
			onUpdate(v)
		}
		switch v.Status {
		case StatusCompleted:
			return v, nil
		case StatusFailed:
			return v, &VideoFailedError{Video: v}
		}
		t := time.NewTimer(after)
		select {
		case <-ctx.Done():
			t.Stop()
			return last, fmt.Errorf("wait for %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// ListParams selects a page of videos. Zero values take the server's defaults (20, newest first).
type ListParams struct {
	Limit int    // 1–100
	After string // the LastID of the previous page
	Order string // "desc" (newest first) or "asc"
}

// VideoList is one page of videos.
type VideoList struct {
	Object  string  `json:"object"`
	Data    []Video `json:"data"`
	FirstID string  `json:"first_id"` // "" on an empty page
	LastID  string  `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// List returns one page of the account's videos.
func (c *Client) List(ctx context.Context, p ListParams) (*VideoList, error) {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.After != "" {
		q.Set("after", p.After)
	}
	if p.Order != "" {
		q.Set("order", p.Order)
	}
	var l VideoList
	if _, err := c.callJSON(ctx, request{method: http.MethodGet, path: "/v1/videos", query: q, retry: true}, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// ListAll iterates over every video from p on, fetching page after page (p.Limit per page) as the loop
// asks for more. An error is yielded once, with a nil video, and ends the iteration.
func (c *Client) ListAll(ctx context.Context, p ListParams) iter.Seq2[*Video, error] {
	return func(yield func(*Video, error) bool) {
		for {
			page, err := c.List(ctx, p)
			if err != nil {
				yield(nil, err)
				return
			}
			for i := range page.Data {
				if !yield(&page.Data[i], nil) {
					return
				}
			}
			if !page.HasMore || page.LastID == "" {
				return
			}
			p.After = page.LastID
		}
	}
}

// Variant is which file of a completed video to download.
type Variant string

// The variants of GET /v1/videos/{id}/content, as OpenAI defines them.
const (
	VariantVideo       Variant = "video"       // the MP4
	VariantThumbnail   Variant = "thumbnail"   // a still image of the first frame
	VariantSpritesheet Variant = "spritesheet" // a grid of frames
)

// Download writes the completed video's MP4 to w as it arrives, without holding it in memory, and
// returns the number of bytes written. Before completion the error's code is "video_not_ready".
func (c *Client) Download(ctx context.Context, id string, w io.Writer) (int64, error) {
	return c.DownloadVariant(ctx, id, VariantVideo, w)
}

// DownloadVariant is Download of another file of the video, such as its thumbnail.
func (c *Client) DownloadVariant(ctx context.Context, id string, variant Variant, w io.Writer) (int64, error) {
	r := request{method: http.MethodGet, path: "/v1/videos/" + url.PathEscape(id) + "/content", retry: true}
	// The plain video goes without the parameter, so servers that predate variants serve it too.
	if variant != "" && variant != VariantVideo {
		r.query = url.Values{"variant": {string(variant)}}
	}
	// Retries cover only getting the answer: once bytes reached w, a repeat would write them twice.
	resp, err := c.call(ctx, r)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("download %s: after %d bytes: %w", id, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("download %s: %d of %d bytes: %w", id, n, resp.ContentLength, io.ErrUnexpectedEOF)
	}
	return n, nil
}

// Deleted is the answer to Delete.
type Deleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "video.deleted"
	Deleted bool   `json:"deleted"`
}

// Delete deletes a finished video's files and hides it from Get and List (the bill stays). A queued or
// in-progress video is cancelled where it can be stopped (it then shows as failed, code cancelled, its
// reservation released), else refused (409 video_not_finished). A repeat after a lost answer to a
// cancel deletes the cancelled video, as it would any failed one.
//
// Delete is retried like a GET, which raises one case of its own: when an attempt went through but its
// answer was lost (a network error after the request was sent, or a 5xx), the repeat finds no video and
// the server answers 404 not_found. Reporting that would make a successful delete look like a failure,
// so a 404 not_found that follows such an attempt of the same call is returned as the deletion it
// stands for. The price of this: when the lost attempt had in fact not reached the server and the video
// was already gone (deleted by another program meanwhile, or never there), it is reported deleted too;
// either way it is gone, which is what Delete asks for. A 404 on a first attempt, or after attempts
// that could not connect or were refused with a 4xx, is returned as *APIError.
func (c *Client) Delete(ctx context.Context, id string) (*Deleted, error) {
	var d Deleted
	_, err := c.callJSON(ctx, request{method: http.MethodDelete, path: "/v1/videos/" + url.PathEscape(id), retry: true}, &d)
	if err != nil {
		var ce *callError
		if e, ok := AsAPIError(err); ok && e.Status == http.StatusNotFound && e.Code == "not_found" && errors.As(err, &ce) && ce.earlier {
			return &Deleted{ID: id, Object: "video.deleted", Deleted: true}, nil
		}
		return nil, err
	}
	return &d, nil
}

// Model is a model the server offers now, with its price.
type Model struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Series         string            `json:"series"`
	Resolution     string            `json:"resolution"`
	Sizes          map[string]string `json:"sizes"`            // aspect ratio → size
	PricePerSecond string            `json:"price_per_second"` // dollars, "0.300000"
	OwnedBy        string            `json:"owned_by"`
}

// Models lists the models the server can generate with now.
func (c *Client) Models(ctx context.Context) ([]Model, error) {
	var l struct {
		Data []Model `json:"data"`
	}
	if _, err := c.callJSON(ctx, request{method: http.MethodGet, path: "/v1/models", retry: true}, &l); err != nil {
		return nil, err
	}
	return l.Data, nil
}
