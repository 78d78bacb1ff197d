package ark

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"

	"videogen/internal/domain/upstream"
)

// Download reads the task for its video URL and streams the video from it. The URL is presigned on
// another host (object storage): it is fetched without the credential, which must never go there.
func (c *Client) Download(ctx context.Context, cred upstream.Credential, id string) (io.ReadCloser, int64, error) {
	st, t, err := c.get(ctx, cred, id)
	if err != nil {
		return nil, 0, err
	}
	if st.State != upstream.StateCompleted || t.Content.VideoURL == "" {
		return nil, 0, fmt.Errorf("ark download %s: %w: the task is %s and has no video yet", id, upstream.ErrTransient, st.State)
	}
	resp, err := c.fetch(ctx, "video", id, t.Content.VideoURL)
	if err != nil {
		return nil, 0, err
	}
	return resp.Body, resp.ContentLength, nil
}

// Image types a last frame may come as (Ark returns PNG or JPEG).
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/webp": true}

// DownloadLastFrame streams the video's last frame, which Ark renders when the task asked
// return_last_frame (every task this adapter creates does), from content.last_frame_url: presigned on
// object storage like the video, and fetched the same way, without the credential. contentType is
// the image's type: the one object storage gave when it is an image type, else the one its first
// bytes show (object storage may answer application/octet-stream).
func (c *Client) DownloadLastFrame(ctx context.Context, cred upstream.Credential, id string) (io.ReadCloser, string, int64, error) {
	st, t, err := c.get(ctx, cred, id)
	if err != nil {
		return nil, "", 0, err
	}
	switch {
	case st.State != upstream.StateCompleted:
		return nil, "", 0, fmt.Errorf("ark last frame %s: %w: the task is %s and has no last frame yet", id, upstream.ErrTransient, st.State)
	case t.Content.LastFrameURL == "":
		// Created without return_last_frame (before this adapter asked for it), or a model that
		// does not return one: there is none to fetch, now or later.
		return nil, "", 0, fmt.Errorf("ark last frame %s: %w: the task has no last frame", id, upstream.ErrUnknownTask)
	}
	resp, err := c.fetch(ctx, "last frame", id, t.Content.LastFrameURL)
	if err != nil {
		return nil, "", 0, err
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if imageTypes[ct] {
		return resp.Body, ct, resp.ContentLength, nil
	}
	br := bufio.NewReaderSize(resp.Body, 512)
	head, _ := br.Peek(512)
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	if !imageTypes[sniffed] {
		_ = resp.Body.Close()
		return nil, "", 0, fmt.Errorf("ark last frame %s: %w: the last frame is %q, not an image", id, upstream.ErrTransient, ct)
	}
	return readCloser{br, resp.Body}, sniffed, resp.ContentLength, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// fetch GETs a presigned object-storage URL of task id on the files client. Errors name the host only:
// the URL's query is its signature.
func (c *Client) fetch(ctx context.Context, what, id, rawURL string) (*http.Response, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("ark %s %s: %w: the task's URL is not an http(s) URL", what, id, upstream.ErrTransient)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("ark: build %s download: %w", what, cause(err))
	}
	resp, err := c.files.Do(r)
	if err != nil {
		return nil, fmt.Errorf("ark %s %s from %s: %w: %v", what, id, u.Host, upstream.ErrTransient, cause(err))
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxError))
	detail := fmt.Sprintf("ark %s %s from %s: HTTP %d", what, id, u.Host, resp.StatusCode)
	switch resp.StatusCode {
	case http.StatusForbidden, http.StatusNotFound, http.StatusGone:
		// The presigned URL expired (Ark keeps outputs 24 hours) or the object is gone. This 403 is
		// object storage refusing a stale signature, not Ark refusing our credential.
		return nil, fmt.Errorf("%s: %w: the URL expired or the file is gone", detail, upstream.ErrUnknownTask)
	default:
		return nil, fmt.Errorf("%s: %w", detail, upstream.ErrTransient)
	}
}

// cause is a failed request's reason without its URL, which for a presigned URL holds the signature.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
