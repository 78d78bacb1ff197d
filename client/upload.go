package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"path/filepath"
	"strings"
)

// The parts of an upload, and where their URLs go in a create request.
const (
	PartFirstFrame = "input_reference" // one first-frame image → CreateParams.StartImageURL
	PartImage      = "image_files"     // reference images → ImageURLs
	PartVideo      = "video_files"     // reference videos → VideoURLs
	PartAudio      = "audio_files"     // audio → AudioURLs
)

// File is one file to upload. Body is read once, as the request is sent, and is not closed.
type File struct {
	Part string    // one of the Part constants
	Name string    // the file name, shown back in the answer
	Body io.Reader // the bytes; the server decides the format from them, not from Name
}

// Uploaded is the answer to Upload: the stored files and their signed URLs, grouped the way
// CreateParams takes them.
type Uploaded struct {
	Object        string         `json:"object"` // "media.batch"
	Files         []UploadedFile `json:"files"`
	ImageURLs     []string       `json:"image_urls"`
	VideoURLs     []string       `json:"video_urls"`
	AudioURLs     []string       `json:"audio_urls"`
	StartImageURL string         `json:"start_image_url"` // "" without a PartFirstFrame file
	ExpiresAt     int64          `json:"expires_at"`      // unix seconds when the first URL stops working
}

// UploadedFile is one stored file.
type UploadedFile struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Part        string `json:"part"`
	Filename    string `json:"filename"`
	URL         string `json:"url"`
	ContentType string `json:"content_type"` // as detected from the bytes
	Bytes       int64  `json:"bytes"`
	SHA256      string `json:"sha256"`
	ExpiresAt   int64  `json:"expires_at"`
}

// errAnswered stops the part writer once the server has answered: the transport reads no more.
var errAnswered = errors.New("the server answered before the upload ended")

// Upload sends files to POST /uploads/v1/files as one multipart request, streamed from their readers
// as it goes out, so a large video is never held in memory. The server stores all of them or none.
//
// Upload is never retried: the readers cannot be read a second time. On a network error or a 5xx
// (such as 503 shutting_down), open the files again and call Upload again; nothing of the failed
// request was kept.
func (c *Client) Upload(ctx context.Context, files ...File) (*Uploaded, error) {
	if len(files) == 0 {
		return nil, errors.New("upload: no files")
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	written := make(chan error, 1)
	go func() {
		err := writeParts(mw, files)
		_ = pw.CloseWithError(err) // nil: the reader sees EOF
		written <- err
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/uploads/v1/files", pr)
	if err != nil {
		_ = pr.CloseWithError(errAnswered)
		<-written
		return nil, fmt.Errorf("upload: %w", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	c.authorize(req)
	resp, err := c.http.Do(req)
	// The server may answer before reading everything (a refused file): let the writer stop, and wait
	// for it so no goroutine outlives the call.
	_ = pr.CloseWithError(errAnswered)
	werr := <-written
	var rerr *readError
	if errors.As(werr, &rerr) {
		// A file that could not be read explains the failure better than what the transport saw.
		if resp != nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("upload: %w", werr)
	}
	if err != nil {
		return nil, &callError{err: fmt.Errorf("upload: %w", err), last: mayHaveReached(err)}
	}
	if resp.StatusCode >= 300 {
		e := readAPIError(resp)
		return nil, &callError{err: e, last: e.Status >= 500}
	}
	defer resp.Body.Close()
	var u Uploaded
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
		return nil, &callError{err: fmt.Errorf("upload: decode answer (request %s): %w", resp.Header.Get("X-Request-Id"), err), last: true}
	}
	return &u, nil
}

func writeParts(mw *multipart.Writer, files []File) error {
	for i, f := range files {
		if f.Body == nil {
			return &readError{name: f.Name, err: fmt.Errorf("file %d has no Body", i)}
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%s"; filename="%s"`, quote(f.Part), quote(f.Name)))
		ctype := mime.TypeByExtension(strings.ToLower(filepath.Ext(f.Name)))
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		h.Set("Content-Type", ctype)
		part, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		src := &recordingReader{r: f.Body}
		if _, err := io.Copy(part, src); err != nil {
			if src.err != nil {
				return &readError{name: f.Name, err: src.err}
			}
			return err
		}
	}
	return mw.Close()
}

// quote escapes a multipart header value as mime/multipart's CreateFormFile does.
var quote = strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace

// readError is a failure of a caller's reader, as opposed to the connection.
type readError struct {
	name string
	err  error
}

func (e *readError) Error() string { return "read " + e.name + ": " + e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// recordingReader remembers its reader's error, so a failed copy can be blamed on the right side.
type recordingReader struct {
	r   io.Reader
	err error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF {
		r.err = err
	}
	return n, err
}
