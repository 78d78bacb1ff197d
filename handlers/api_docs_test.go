package handlers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"videogen/internal/domain/apispec"
	"videogen/internal/testkit"
)

// TestAPIDocuments: GET /v1/openapi.json serves the OpenAPI 3.1 document without a key, naming this
// deployment as its server; /docs/api renders every operation and error code of the same document.
func TestAPIDocuments(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), nil)
	resp, err := http.Get(s.URL + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var doc struct {
		OpenAPI string           `json:"openapi"`
		Servers []map[string]any `json:"servers"`
		Paths   map[string]any   `json:"paths"`
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || json.Unmarshal(body, &doc) != nil {
		t.Fatalf("openapi.json: %d %s", resp.StatusCode, body[:min(len(body), 200)])
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") || len(doc.Servers) == 0 || doc.Servers[0]["url"] != s.Cfg.PublicBaseURL || doc.Paths["/v1/videos/{id}"] == nil {
		t.Fatalf("document: openapi %q, servers %v, %d paths", doc.OpenAPI, doc.Servers, len(doc.Paths))
	}

	resp, err = http.Get(s.URL + "/docs/api")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || strings.Contains(string(page), "<script src=\"http") {
		t.Fatalf("/docs/api: %d", resp.StatusCode)
	}
	ops, _ := apispec.Operations()
	codes, _ := apispec.ErrorCodes()
	if len(ops) < 9 || len(codes) < 20 {
		t.Fatalf("%d operations, %d codes", len(ops), len(codes))
	}
	for _, op := range ops {
		if !strings.Contains(string(page), `id="`+op.ID+`"`) || !strings.Contains(string(page), op.Method+" "+op.Path) {
			t.Errorf("/docs/api lacks %s %s", op.Method, op.Path)
		}
	}
	for _, c := range codes {
		if !strings.Contains(string(page), "<code>"+c.Code+"</code>") {
			t.Errorf("/docs/api lacks error code %s", c.Code)
		}
	}
	// No template call is printed as text (a templ call inside a line of markup is not one).
	if strings.Contains(string(page), "@inlineMarkdown") {
		t.Error("/docs/api prints a template call as text")
	}
	// The descriptions' Markdown is rendered, not shown as source: code spans and emphasis become markup.
	if !strings.Contains(string(page), "<code>openai-poll-after-ms</code>") || !strings.Contains(string(page), "<strong>") {
		t.Error("/docs/api shows no rendered code span or emphasis")
	}
	if i := strings.Index(string(page), "`"); i >= 0 {
		t.Errorf("/docs/api shows Markdown source: %q", string(page)[max(0, i-80):min(len(page), i+80)])
	}
	if strings.Contains(string(page), "**") {
		t.Error("/docs/api shows Markdown emphasis marks")
	}
	// The heading is the title alone: the document's version after it read as a stray "1".
	if h1 := regexp.MustCompile(`(?s)<h1>(.*?)</h1>`).FindStringSubmatch(string(page)); h1 == nil || h1[1] != "videogen API" {
		t.Errorf("/docs/api's heading: %q, want the title alone", h1)
	}
}
