package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"videogen/internal/domain/apispec"
)

// The OpenAPI check: every exchange Do makes with the API is held to internal/domain/apispec/openapi.yaml, so
// the document cannot drift from the code. The answer is always checked: its status must be one the
// operation documents, with the documented headers and body. The request is checked only when the
// answer was 2xx: tests send invalid requests on purpose, and a refusal of one is right; an acceptance of
// a request the document calls invalid means the document or the code is wrong.

// openAPI is the document and its router, made once per test binary.
var openAPI = sync.OnceValues(func() (*openAPIChecker, error) {
	doc, err := apispec.Load()
	if err != nil {
		return nil, err
	}
	// Tests call a server on a random port; the document's server is relative anyway. Routing on the path
	// alone keeps the check independent of where the server listens.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi router: %w", err)
	}
	return &openAPIChecker{router: router}, nil
})

type openAPIChecker struct {
	router routers.Router
}

// checkedByOpenAPI reports whether a path is the API's (case-sensitively, as the document spells it).
// The document's own route is left out: it serves the document, it is not described by it.
func checkedByOpenAPI(path string) bool {
	return (strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/uploads/v1/")) && path != "/v1/openapi.json"
}

// checkOpenAPI fails the test when the exchange req → r does not match the document. req is the request
// Do sent; its body is read again through GetBody, which http.NewRequest sets for in-memory bodies.
func checkOpenAPI(t testing.TB, req *http.Request, r *Resp) {
	t.Helper()
	if !checkedByOpenAPI(req.URL.Path) || req.Method == http.MethodHead {
		return
	}
	c, err := openAPI()
	if err != nil {
		t.Errorf("openapi: %v", err)
		return
	}
	if msg := c.check(req, r); msg != "" {
		t.Errorf("openapi: %s %s → %d: %s", req.Method, req.URL.RequestURI(), r.Status, msg)
	}
}

// check returns what is wrong with the exchange, or "".
func (c *openAPIChecker) check(sent *http.Request, r *Resp) string {
	ctx := context.Background()
	req, err := replay(sent)
	if err != nil {
		return err.Error()
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		// A path or method the document does not have: the server's 404 or 405 for it is not the
		// document's business, but an acceptance is an undocumented operation.
		if r.Status/100 == 2 {
			return "answered " + http.StatusText(r.Status) + " but the document has no such operation"
		}
		return ""
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearerPresent}}

	if msg := checkResponse(ctx, in, r); msg != "" {
		return "answer does not match the document: " + msg
	}
	// A body too big to keep (a streamed upload) was not replayed: its answer alone is checked.
	streamed := sent.GetBody == nil && sent.Body != nil && sent.Body != http.NoBody
	if r.Status/100 != 2 || streamed {
		return ""
	}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		return "the request was accepted, but the document says it is invalid: " + clip(err.Error())
	}
	return ""
}

// checkResponse validates the answer: status, headers, content type and — for JSON — the body. A file
// (the video, its images) is checked for its status, headers and content type only.
func checkResponse(ctx context.Context, in *openapi3filter.RequestValidationInput, r *Resp) string {
	ct := r.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: r.Status, Header: r.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: !isJSON}}
	out.SetBodyBytes(r.Body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return clip(err.Error())
	}
	if isJSON {
		return ""
	}
	// ValidateResponse stopped before the content type: check it against the documented ones.
	resp := in.Route.Operation.Responses.Status(r.Status)
	if resp == nil || resp.Value == nil || len(resp.Value.Content) == 0 {
		if len(r.Body) > 0 {
			return fmt.Sprintf("a %d answer has a body (%q) but the document gives it none", r.Status, ct)
		}
		return ""
	}
	if resp.Value.Content.Get(ct) == nil {
		return fmt.Sprintf("content type %q is not one the document gives for %d (%s)", ct, r.Status,
			strings.Join(contentTypes(resp.Value.Content), ", "))
	}
	return contentTypeByParameter(in.Request, resp.Value, mt)
}

// contentTypeByParameter enforces the document's x-content-type-by-parameter: the content type a query
// parameter's value asks for (GET /v1/videos/{id}/content?variant=thumbnail is an image, never the MP4).
func contentTypeByParameter(req *http.Request, resp *openapi3.Response, mt string) string {
	ext, ok := resp.Extensions["x-content-type-by-parameter"].(map[string]any)
	if !ok {
		return ""
	}
	param, _ := ext["parameter"].(string)
	value := req.URL.Query().Get(param)
	if value == "" {
		value, _ = ext["default"].(string)
	}
	types, _ := ext["types"].(map[string]any)
	allowed, _ := types[value].([]any)
	for _, a := range allowed {
		if a == mt {
			return ""
		}
	}
	return fmt.Sprintf("%s=%s was answered with %q; the document gives %v for it", param, value, mt, allowed)
}

// OpenAPITransport is an http.RoundTripper that holds every exchange through it to the document, as Do
// does: for tests that call the API through another client (the OpenAI SDKs, the client package) with
// &http.Client{Transport: testkit.OpenAPITransport(t, nil)}. next is the transport that sends (nil:
// http.DefaultTransport). Bodies are read whole, so it is not for uploads of hundreds of MiB.
func OpenAPITransport(t testing.TB, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &openAPITransport{t: t, next: next}
}

type openAPITransport struct {
	t    testing.TB
	next http.RoundTripper
}

func (o *openAPITransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !checkedByOpenAPI(req.URL.Path) {
		return o.next.RoundTrip(req)
	}
	if req.Body != nil && req.GetBody == nil {
		// Keep the body to validate it after the answer (a RoundTripper may not change the caller's
		// request, so a copy carries it).
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	resp, err := o.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	checkOpenAPI(o.t, req, &Resp{Status: resp.StatusCode, Header: resp.Header, Body: b})
	return resp, nil
}

// replay copies the request Do sent with a fresh body, for the validator to read.
func replay(sent *http.Request) (*http.Request, error) {
	req := sent.Clone(context.Background())
	req.Body = http.NoBody
	if sent.GetBody != nil {
		body, err := sent.GetBody()
		if err != nil {
			return nil, fmt.Errorf("read the request body again: %w", err)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			return nil, fmt.Errorf("read the request body again: %w", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return req, nil
}

// bearerPresent is the document's one security scheme, as far as the document can tell: an API key was
// sent as a Bearer credential (whether it is a valid key is the server's to say, with a 401).
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme == nil || in.SecurityScheme.Type != "http" || !strings.EqualFold(in.SecurityScheme.Scheme, "bearer") {
		return fmt.Errorf("security scheme %q is not checked here", in.SecuritySchemeName)
	}
	scheme, key, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return errors.New("no Bearer API key in the Authorization header")
	}
	return nil
}

func contentTypes(c openapi3.Content) []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// schemaDump is the schema the validator quotes in its messages; the document has it already.
var schemaDump = regexp.MustCompile(`(?s)\n\s*Schema:\n.*?\n\s*Value:\n`)

// clip keeps a validator message readable: without the schema it quotes, and at most 3000 bytes of the
// value (a whole body).
func clip(s string) string {
	s = schemaDump.ReplaceAllString(s, "\nValue:\n")
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}
