package mail

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/resend/resend-go/v2"
)

// sendTimeout bounds one HTTP exchange with Resend even when the caller's ctx has no deadline; the
// library's own default is a minute, too long for a request handler waiting on a verification mail.
const sendTimeout = 15 * time.Second

// Resend sends through Resend's HTTP API with the official client.
type Resend struct {
	client *resend.Client
	from   string
	apiKey string // kept only to scrub it from errors
}

// NewResend returns a sender using apiKey and the From address from. baseURL "" keeps the library's
// default (https://api.resend.com/); otherwise requests go to baseURL (RESEND_API_BASE, for tests).
func NewResend(apiKey, from, baseURL string) (*Resend, error) {
	apiKey = strings.TrimSpace(apiKey)
	if apiKey == "" {
		return nil, errors.New("resend: API key is empty")
	}
	if strings.TrimSpace(from) == "" {
		return nil, errors.New("resend: from address is empty")
	}
	client := resend.NewCustomClient(&http.Client{Timeout: sendTimeout}, apiKey)
	if baseURL != "" {
		u, err := url.Parse(baseURL)
		if err != nil {
			return nil, fmt.Errorf("resend: parse base URL %q: %w", baseURL, err)
		}
		if u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("resend: base URL %q needs a scheme and a host", baseURL)
		}
		// The client resolves "emails" against BaseURL, so without a trailing slash a path prefix such as
		// "/resend" would be replaced rather than extended.
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		client.BaseURL = u
	}
	return &Resend{client: client, from: from, apiKey: apiKey}, nil
}

// Send posts m to Resend's /emails endpoint. ctx bounds the whole exchange.
func (r *Resend) Send(ctx context.Context, m Message) error {
	if m.To == "" {
		return fmt.Errorf("send e-mail %q: no recipient", m.Subject)
	}
	req := &resend.SendEmailRequest{
		From:    r.from,
		To:      []string{m.To},
		Subject: m.Subject,
		Text:    m.Text,
		Html:    m.HTML,
		Tags:    tags(m.Tags),
	}
	// The options must be non-nil: the client calls a method on them through an interface.
	opts := &resend.SendEmailOptions{IdempotencyKey: m.IdempotencyKey}
	if _, err := r.client.Emails.SendWithOptions(ctx, req, opts); err != nil {
		return r.scrub(fmt.Errorf("send e-mail %q to %s through Resend: %w", m.Subject, m.To, err))
	}
	return nil
}

// tags orders the pairs by name: Resend rejects a retry whose body differs from the first attempt under
// the same idempotency key, and Go's map order would make the bodies differ.
func tags(m map[string]string) []resend.Tag {
	if len(m) == 0 {
		return nil
	}
	out := make([]resend.Tag, 0, len(m))
	for name, value := range m {
		out = append(out, resend.Tag{Name: name, Value: value})
	}
	slices.SortFunc(out, func(a, b resend.Tag) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// scrub removes the API key from err's text. The client puts the server's message into its errors, and a
// proxy or mock that echoes the request would otherwise leak the key into our logs.
func (r *Resend) scrub(err error) error {
	if !strings.Contains(err.Error(), r.apiKey) {
		return err
	}
	return &scrubbedError{msg: strings.ReplaceAll(err.Error(), r.apiKey, "[redacted]"), err: err}
}

// scrubbedError keeps the cause for errors.Is (context.DeadlineExceeded, resend.ErrRateLimit) while
// printing the redacted text.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
