package apispec

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestDocumentIsValid: the document is OpenAPI 3.1 and passes kin-openapi's validation, its JSON form
// says the same and validates too, and JSONFor names the deployment as the server.
func TestDocumentIsValid(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	j, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	fromJSON, err := openapi3.NewLoader().LoadFromData(j)
	if err != nil {
		t.Fatalf("the JSON form does not load: %v", err)
	}
	if err := fromJSON.Validate(t.Context()); err != nil {
		t.Fatalf("the JSON form does not validate: %v", err)
	}
	if got, want := fromJSON.Paths.Len(), doc.Paths.Len(); got != want {
		t.Errorf("the JSON form has %d paths, the YAML %d", got, want)
	}

	j, err = JSONFor("https://api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	var withServer struct {
		Servers []struct{ URL string } `json:"servers"`
	}
	if err := json.Unmarshal(j, &withServer); err != nil {
		t.Fatal(err)
	}
	if len(withServer.Servers) != 1 || withServer.Servers[0].URL != "https://api.example.com" {
		t.Errorf("JSONFor servers: %+v", withServer.Servers)
	}
	// The shared tree is untouched.
	if j, _ := JSON(); strings.Contains(string(j), "api.example.com") {
		t.Error("JSONFor changed what JSON serves")
	}
}

// routePattern finds the API's routes in handlers/api/routes.go: v1.Get("/models", …),
// uploads.Post("/files", …), and app.Get("/v1/…", …) for a route registered outside the groups.
var routePattern = regexp.MustCompile(`\b(v1|uploads|app)\.(Get|Post|Put|Patch|Delete)\("([^"]*)"`)

// TestEveryRouteIsDocumented: each /v1 and /uploads/v1 route of handlers/api/routes.go is an operation of the
// document (":id" is written "{id}" there), and each operation of the document is a route.
func TestEveryRouteIsDocumented(t *testing.T) {
	src, err := os.ReadFile("../../../handlers/api/routes.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`:([A-Za-z_]+)`)
	routes := map[string]bool{}
	for _, m := range routePattern.FindAllStringSubmatch(string(src), -1) {
		group, method, path := m[1], strings.ToUpper(m[2]), m[3]
		switch group {
		case "v1":
			path = "/v1" + path
		case "uploads":
			path = "/uploads/v1" + path
		}
		if !strings.HasPrefix(path, "/v1/") && !strings.HasPrefix(path, "/uploads/v1/") {
			continue
		}
		path = param.ReplaceAllString(path, "{$1}")
		routes[method+" "+path] = true
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("route %s %s is not in openapi.yaml", method, path)
		}
	}
	if len(routes) < 7 {
		t.Fatalf("found only %d API routes in handlers/api/routes.go: %v; has its style changed?", len(routes), routes)
	}
	for _, path := range doc.Paths.Keys() {
		for method := range doc.Paths.Value(path).Operations() {
			if !routes[method+" "+path] {
				t.Errorf("openapi.yaml has %s %s, but handlers/api/routes.go has no such route", method, path)
			}
		}
	}
}

// TestErrorCodes: every error answer names its codes, each code of the catalogue (the ErrorCode schema)
// is answered somewhere, and no answer names a code the catalogue does not explain.
func TestErrorCodes(t *testing.T) {
	ops, err := Operations()
	if err != nil {
		t.Fatal(err)
	}
	catalogue, err := ErrorCodes()
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, op := range ops {
		for _, r := range op.Responses {
			if r.Status < 400 {
				continue
			}
			if len(r.Codes) == 0 {
				t.Errorf("%s %s %d: no error codes", op.Method, op.Path, r.Status)
			}
			for _, c := range r.Codes {
				used[c.Code] = true
				if c.Description == "" {
					t.Errorf("%s %s %d: code %s is not in the ErrorCode catalogue", op.Method, op.Path, r.Status, c.Code)
				}
			}
		}
	}
	// Answered where the document can have no operation: a method a path does not take.
	outsideOperations := map[string]bool{"method_not_allowed": true}
	inCatalogue := map[string]bool{}
	for _, c := range catalogue {
		inCatalogue[c.Code] = true
		if !used[c.Code] && !outsideOperations[c.Code] {
			t.Errorf("catalogue code %s is answered by no operation", c.Code)
		}
	}
	// Every code the API's code can answer is in the catalogue: read from the Go sources that make API
	// errors (refusal.New and refusal.Field calls, and the refusal package's own errors).
	for code, where := range codesInSources(t) {
		if !inCatalogue[code] {
			t.Errorf("%s answers error code %s, which the document's ErrorCode catalogue lacks", where, code)
		}
	}
}

// codesInSources finds the error codes the handlers and domain packages can answer, with a file that
// answers each.
func codesInSources(t *testing.T) map[string]string {
	t.Helper()
	made := regexp.MustCompile(`refusal\.(?:New|Field)\(\s*"([a-z_]+)"`)
	literal := regexp.MustCompile(`Code:\s*"([a-z_]+)"`)
	codes := map[string]string{}
	for _, dir := range []string{"../../../handlers", "../../../internal"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			src := string(b)
			var found [][]string
			found = append(found, made.FindAllStringSubmatch(src, -1)...)
			if strings.Contains(path, "refusal") {
				found = append(found, literal.FindAllStringSubmatch(src, -1)...)
			}
			for _, m := range found {
				codes[m[1]] = path
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(codes) < 20 {
		t.Fatalf("found only %d error codes in the sources: the patterns no longer match how errors are made", len(codes))
	}
	return codes
}

// TestOperations: the plain data the /docs/api page renders has what the page needs.
func TestOperations(t *testing.T) {
	ops, err := Operations()
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]Operation{}
	for _, op := range ops {
		if op.ID == "" || op.Summary == "" || op.Tag == "" || len(op.Responses) == 0 {
			t.Errorf("%s %s: missing id, summary, tag or responses: %+v", op.Method, op.Path, op)
		}
		byID[op.ID] = op
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	want := []string{"createVideo", "createWebhookEndpoint", "deleteVideo", "deleteWebhookEndpoint", "downloadVideoContent",
		"getOpenAPIDocument", "importFiles", "listModels", "listVideos", "listWebhookEndpoints", "remixVideo", "retrieveVideo",
		"retrieveWebhookEndpoint", "rotateWebhookEndpointSecret", "testWebhookEndpoint", "updateWebhookEndpoint", "uploadFiles"}
	if !slices.Equal(ids, want) {
		t.Fatalf("operations %v, want %v", ids, want)
	}
	if ops[0].Path != "/v1/models" {
		t.Errorf("first operation %s %s: not in the document's order", ops[0].Method, ops[0].Path)
	}

	create := byID["createVideo"]
	if !create.Authenticated || !create.BodyRequired || len(create.Bodies) != 2 ||
		create.Bodies[0].ContentType != "application/json" || create.Bodies[1].ContentType != "multipart/form-data" {
		t.Fatalf("createVideo: %+v", create)
	}
	fields := map[string]Field{}
	for _, f := range create.Bodies[0].Fields {
		fields[f.Name] = f
	}
	if f := fields["model"]; !f.Required || len(f.Schema.Enum) != 8 || create.Bodies[0].Fields[0].Name != "model" {
		t.Errorf("model field: %+v", f)
	}
	if f := fields["seconds"]; f.Required || f.Schema.Type != "integer or string" || !f.Schema.Nullable || !slices.Contains(f.Schema.Limits, "4–15") {
		t.Errorf("seconds field: %+v", f)
	}
	if f := fields["start_image_url"]; f.Schema.Type != "string" || !f.Schema.Nullable {
		t.Errorf("start_image_url field: %+v", f)
	}
	if f := fields["image_urls"]; f.Schema.Type != "array of string" || !slices.Contains(f.Schema.Limits, "at most 9 items") {
		t.Errorf("image_urls field: %+v", f)
	}
	if byID["getOpenAPIDocument"].Authenticated {
		t.Error("the document itself needs no key")
	}

	content := byID["downloadVideoContent"]
	if p := content.Parameters; len(p) != 2 || p[0].Name != "id" || p[0].In != "path" || p[1].Name != "variant" ||
		!slices.Equal(p[1].Schema.Enum, []string{"video", "thumbnail", "spritesheet", "last_frame"}) || p[1].Schema.Default != "video" {
		t.Errorf("content parameters: %+v", p)
	}
	for _, r := range content.Responses {
		switch r.Status {
		case 200:
			var types []string
			for _, b := range r.Bodies {
				types = append(types, b.ContentType)
			}
			if !slices.Contains(types, "video/mp4") || slices.Contains(types, "application/json") {
				t.Errorf("content 200 types: %v", types)
			}
		case 409:
			if len(r.Codes) != 1 || r.Codes[0].Code != "video_not_ready" || r.Codes[0].Description == "" {
				t.Errorf("content 409 codes: %+v", r.Codes)
			}
			if len(r.Headers) != 2 || r.Headers[1].Name != "x-should-retry" || !r.Headers[1].Required {
				t.Errorf("content 409 headers: %+v", r.Headers)
			}
		}
	}
	info, err := DocumentInfo()
	if err != nil || info.Title == "" || info.Description == "" {
		t.Errorf("info %+v, %v", info, err)
	}
}

// TestComponents: the named schemas are listed with their members, for the page's object reference.
func TestComponents(t *testing.T) {
	comps, err := Components()
	if err != nil {
		t.Fatal(err)
	}
	var video *Component
	for i := range comps {
		if comps[i].Name == "Video" {
			video = &comps[i]
		}
	}
	if video == nil {
		t.Fatal("no Video component")
	}
	fields := map[string]Field{}
	for _, f := range video.Fields {
		fields[f.Name] = f
	}
	if f := fields["billing"]; !f.Required || f.Schema.Type != "object (Billing)" {
		t.Errorf("billing: %+v", f)
	}
	if f := fields["error"]; !f.Required || f.Schema.Type != "object (VideoError)" || !f.Schema.Nullable {
		t.Errorf("error: %+v", f)
	}
	if f := fields["seed"]; !f.Required || f.Schema.Type != "integer" || !f.Schema.Nullable {
		t.Errorf("seed: %+v", f)
	}
	if f := fields["status"]; !slices.Equal(f.Schema.Enum, []string{"queued", "in_progress", "completed", "failed"}) {
		t.Errorf("status: %+v", f)
	}
}

// TestContentTypeByParameter: the extension that ties a file's content type to a query parameter names
// that parameter's every value and no other, and only content types the answer lists.
func TestContentTypeByParameter(t *testing.T) {
	doc, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for status, resp := range op.Responses.Map() {
				ext, ok := resp.Value.Extensions["x-content-type-by-parameter"].(map[string]any)
				if !ok {
					continue
				}
				found++
				where := method + " " + path + " " + status
				name, _ := ext["parameter"].(string)
				p := op.Parameters.GetByInAndName("query", name)
				if p == nil || p.Schema == nil || p.Schema.Value == nil {
					t.Errorf("%s: no query parameter %q", where, name)
					continue
				}
				if ext["default"] != p.Schema.Value.Default {
					t.Errorf("%s: default %v, the parameter's is %v", where, ext["default"], p.Schema.Value.Default)
				}
				types, _ := ext["types"].(map[string]any)
				var values []string
				for v, list := range types {
					values = append(values, v)
					for _, ct := range list.([]any) {
						if resp.Value.Content.Get(ct.(string)) == nil {
							t.Errorf("%s: %s=%s gives %v, which the answer does not list", where, name, v, ct)
						}
					}
				}
				var enum []string
				for _, v := range p.Schema.Value.Enum {
					enum = append(enum, v.(string))
				}
				sort.Strings(values)
				sort.Strings(enum)
				if !slices.Equal(values, enum) {
					t.Errorf("%s: types for %v, the parameter takes %v", where, values, enum)
				}
			}
		}
	}
	if found == 0 {
		t.Error("no x-content-type-by-parameter in the document")
	}
}
