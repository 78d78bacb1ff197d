// Package apispec is the OpenAPI 3.1 document of videogen's /v1 and /uploads/v1 APIs: the YAML source,
// embedded, and what the server needs to serve it as JSON and render it as a page. The handler test suite
// validates every request and answer against it (internal/testkit/openapi.go), so it cannot drift from
// the code.
package apispec

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"
)

//go:embed openapi.yaml
var source []byte

// YAML returns the document's source.
func YAML() []byte { return append([]byte(nil), source...) }

// Load parses the document, resolves its references and validates it (schemas, examples, defaults and
// patterns included). Every call returns a new document, which the caller may change.
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(source)
	if err != nil {
		return nil, fmt.Errorf("load openapi.yaml: %w", err)
	}
	err = doc.Validate(context.Background(), openapi3.EnableExamplesValidation(),
		openapi3.EnableSchemaDefaultsValidation(), openapi3.EnableSchemaPatternValidation())
	if err != nil {
		return nil, fmt.Errorf("validate openapi.yaml: %w", err)
	}
	return doc, nil
}

// JSON returns the document as JSON, for GET /v1/openapi.json. Its server is relative ("/"): the API is
// on the host that serves the document. JSONFor names the deployment's base URL instead.
func JSON() ([]byte, error) { return JSONFor("") }

// JSONFor returns the document as JSON with baseURL (PUBLIC_BASE_URL) as its only server, so that a
// client generated from the downloaded file calls the right host; "" keeps the relative server.
func JSONFor(baseURL string) ([]byte, error) {
	tree, err := jsonTree()
	if err != nil {
		return nil, err
	}
	if baseURL != "" {
		// A shallow copy: the cached tree is shared by every caller.
		top := make(map[string]any, len(tree))
		for k, v := range tree {
			top[k] = v
		}
		top["servers"] = []any{map[string]any{"url": baseURL, "description": "This deployment"}}
		tree = top
	}
	return json.Marshal(tree)
}

// jsonTree is the YAML read as plain JSON values. It is converted directly rather than through
// openapi3.T so that the JSON says exactly what the YAML says, whatever kin-openapi models. Loaded and
// validated first, so JSON never serves a broken document.
var jsonTree = sync.OnceValues(func() (map[string]any, error) {
	if _, err := Load(); err != nil {
		return nil, err
	}
	var tree map[string]any
	if err := yaml.Unmarshal(source, &tree); err != nil {
		return nil, fmt.Errorf("read openapi.yaml: %w", err)
	}
	return tree, nil
})
