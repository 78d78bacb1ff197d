package web

import (
	"context"
	"errors"
	"io"
	"net"
	"time"
)

// MultipartAllowance is room for the multipart framing (boundaries, part headers) on top of the file
// bytes a request may carry, so 300 MiB of files fit in one request.
const MultipartAllowance = 1 << 20

// Upload pacing: a body that stops arriving for UploadIdle ends the upload; none may run past
// UploadMax. Slow links still get through; a stalled client does not hold a connection forever.
const (
	UploadIdle = 60 * time.Second
	UploadMax  = 30 * time.Minute
)

var (
	ErrUploadTooLarge = errors.New("upload body over its limit")
	ErrShuttingDown   = errors.New("the server is stopping")
)

// UploadBody counts and limits the raw request body and keeps the connection's read deadline moving
// while bytes arrive — until the server stops, when the read ends with ErrShuttingDown. The API's
// uploads and multipart creates, and the console's new-video form, read their files through it.
type UploadBody struct {
	R        io.Reader
	Conn     net.Conn
	Start    time.Time
	extended time.Time
	N, Limit int64
	Stopping context.Context
	// failed is the body's own refusal once met (over the limit, or the shutdown), kept because a parser
	// reading through the body may reword it (textproto turns a read error inside a part's headers into
	// "malformed MIME header").
	failed error
}

// Cause is the error to answer for err, met while reading through b: the body's own refusal when there
// was one, whatever the parser made of it.
func (b *UploadBody) Cause(err error) error {
	if b.failed != nil {
		return b.failed
	}
	return err
}

func (b *UploadBody) Read(p []byte) (int, error) {
	if b.Stopping.Err() != nil {
		b.failed = ErrShuttingDown
		return 0, ErrShuttingDown
	}
	if now := time.Now(); b.Conn != nil && now.Sub(b.extended) > time.Second {
		deadline := now.Add(UploadIdle)
		if end := b.Start.Add(UploadMax); deadline.After(end) {
			deadline = end
		}
		_ = b.Conn.SetReadDeadline(deadline)
		b.extended = now
	}
	n, err := b.R.Read(p)
	b.N += int64(n)
	if b.N > b.Limit {
		b.failed = ErrUploadTooLarge
		return n, ErrUploadTooLarge
	}
	if err != nil && b.Stopping.Err() != nil {
		b.failed = ErrShuttingDown
		return n, ErrShuttingDown // the shutdown interrupted the read
	}
	return n, err
}
