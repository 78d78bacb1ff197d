package openai_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// spec is OpenAI's Videos API as published (testdata/openapi-videos.yaml; its README gives the source
// commit and date), loaded and validated once.
var spec = sync.OnceValues(func() (*specChecker, error) {
	doc, err := openapi3.NewLoader().LoadFromFile("testdata/openapi-videos.yaml")
	if err != nil {
		return nil, fmt.Errorf("load the spec: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("validate the spec: %w", err)
	}
	// The create bodies list their properties without saying additionalProperties: false, but OpenAI
	// refuses any other field (400 unknown_parameter, "Unknown parameter: 'aspect_ratio'."). Closing
	// them here makes a field we must never send fail the check.
	closed := false
	for _, name := range []string{"CreateVideoJsonBody", "CreateVideoMultipartBody"} {
		doc.Components.Schemas[name].Value.AdditionalProperties = openapi3.AdditionalProperties{Has: &closed}
	}
	// kin-openapi's form decoder cannot read a text part against an anyOf schema (it yields null), and
	// VideoModel is anyOf [string, enum of strings] — any string. The form's model is checked as that
	// string; nothing is loosened.
	doc.Components.Schemas["CreateVideoMultipartBody"].Value.Properties["model"] = openapi3.NewStringSchema().NewRef()
	// Routed on the path alone: the spec's server is https://api.openai.com/v1, the recorder's is local.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route the spec: %w", err)
	}
	// input_reference is a file part whose Content-Type is the image's; kin-openapi decodes only the
	// types it knows, so the image types OpenAI takes are read as the binary strings the schema has.
	for _, t := range []string{"image/png", "image/jpeg", "image/webp"} {
		openapi3filter.RegisterBodyDecoder(t, openapi3filter.FileBodyDecoder)
	}
	return &specChecker{doc: doc, router: router}, nil
})

type specChecker struct {
	doc    *openapi3.T
	router routers.Router
}

// checkRequest validates one request as the adapter sent it (path with /v1, which the spec's server
// holds) against the operation the spec routes it to, body included; it returns what is wrong, or "".
func (c *specChecker) checkRequest(method, path, rawQuery string, header http.Header, body []byte) string {
	u := strings.TrimPrefix(path, "/v1")
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	req, err := http.NewRequest(method, "http://recorder"+u, bytes.NewReader(body))
	if err != nil {
		return err.Error()
	}
	req.Header = header.Clone()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return fmt.Sprintf("%s %s is no operation of the spec: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: bearer}}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return err.Error()
	}
	return ""
}

// bearer is the spec's ApiKeyAuth (http, bearer): a request must carry a Bearer key.
func bearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
		return fmt.Errorf("no Bearer credential")
	}
	return nil
}

// checkSchema validates a JSON value against a schema of the spec by name.
func (c *specChecker) checkSchema(name string, v any) error {
	s, ok := c.doc.Components.Schemas[name]
	if !ok {
		return fmt.Errorf("no schema %s in the spec", name)
	}
	return s.Value.VisitJSON(v, openapi3.MultiErrors())
}

func mustSpec(t *testing.T) *specChecker {
	t.Helper()
	c, err := spec()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readAll reads r whole; for test bodies only.
func readAll(t *testing.T, r io.Reader) []byte {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
