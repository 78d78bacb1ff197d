package apispec

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// The document as plain data for the /docs/api page, which renders it on the server: no HTML here, and
// nothing a template must dig out of kin-openapi's types.

// Operation is one method on one path.
type Operation struct {
	ID          string // operationId, e.g. "createVideo": a stable anchor for the page
	Method      string // "GET", "POST", "DELETE"
	Path        string // "/v1/videos/{id}"
	Tag         string // the group it is listed under, e.g. "Videos"
	Summary     string
	Description string // Markdown
	// Authenticated is false for the one operation that needs no API key (the document itself).
	Authenticated bool
	Parameters    []Parameter
	// Bodies are the request body's forms, one per content type (JSON first); nil without a body.
	Bodies       []Body
	BodyRequired bool
	Responses    []Response // by status
}

// Parameter is a path, query or header parameter.
type Parameter struct {
	Name        string
	In          string // "path", "query" or "header"
	Required    bool
	Description string // Markdown
	Schema      Schema
}

// Body is a request or response body in one content type.
type Body struct {
	ContentType string // "application/json", "multipart/form-data", "video/mp4", …
	// Schema names the component it is ("CreateVideoRequest"), or is "" for an inline one.
	Schema      string
	Description string  // Markdown: the body schema's own description
	Fields      []Field // the top-level members (object bodies); none for a file
}

// Field is one member of an object body.
type Field struct {
	Name        string
	Required    bool
	Description string // Markdown
	Schema      Schema
}

// Schema is a value's type and limits, in words.
type Schema struct {
	Type     string   // "string", "integer or string", "array of string", "object (Video)", "file"
	Nullable bool     // null is accepted (requests) or may be sent (answers)
	Enum     []string // the allowed values, when there is a fixed set
	Default  string   // "" when none
	// Limits are the constraints in words: "4–15", "at most 9 items", "1–5000 characters",
	// "pattern ^video_[A-Za-z0-9]+$".
	Limits []string
}

// Response is the answer with one status.
type Response struct {
	Status      int
	Description string   // Markdown
	Headers     []Header // by name
	Bodies      []Body
	// Codes are the error codes this answer may carry, with what each means; nil for a success.
	Codes []ErrorCode
}

// Header is a response header.
type Header struct {
	Name        string
	Required    bool // always sent with this status
	Description string
	Schema      Schema
}

// ErrorCode is one value of error.code.
type ErrorCode struct {
	Code        string
	Description string
}

// Operations returns every operation of the document, in the document's order of paths and, on one
// path, GET, POST, DELETE. The result is shared: callers must not change it.
func Operations() ([]Operation, error) { return operations() }

// ErrorCodes returns every error code of the document with its meaning, in the document's order. The
// result is shared: callers must not change it.
func ErrorCodes() ([]ErrorCode, error) { return errorCatalogue() }

var errorCatalogue = sync.OnceValues(func() ([]ErrorCode, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	return codeCatalogue(doc), nil
})

var operations = sync.OnceValues(func() ([]Operation, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	meanings := map[string]string{}
	for _, c := range codeCatalogue(doc) {
		meanings[c.Code] = c.Description
	}
	var out []Operation
	for _, path := range pathOrder(doc) {
		item := doc.Paths.Value(path)
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			o, err := operation(doc, path, method, item, op, meanings)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			out = append(out, o)
		}
	}
	return out, nil
})

func operation(doc *openapi3.T, path, method string, item *openapi3.PathItem, op *openapi3.Operation, meanings map[string]string) (Operation, error) {
	o := Operation{ID: op.OperationID, Method: method, Path: path, Summary: op.Summary, Description: op.Description,
		Authenticated: op.Security == nil || len(*op.Security) > 0}
	if o.Authenticated && op.Security == nil && len(doc.Security) == 0 {
		o.Authenticated = false
	}
	if len(op.Tags) > 0 {
		o.Tag = op.Tags[0]
	}
	// Path-level parameters first, unless the operation overrides one.
	for _, p := range item.Parameters {
		if op.Parameters.GetByInAndName(p.Value.In, p.Value.Name) == nil {
			o.Parameters = append(o.Parameters, parameter(p.Value))
		}
	}
	for _, p := range op.Parameters {
		o.Parameters = append(o.Parameters, parameter(p.Value))
	}
	if rb := op.RequestBody; rb != nil && rb.Value != nil {
		o.BodyRequired = rb.Value.Required
		o.Bodies = bodies(rb.Value.Content)
	}
	for _, key := range op.Responses.Keys() {
		status, err := strconv.Atoi(key)
		if err != nil {
			return o, fmt.Errorf("response %q: only numeric statuses are rendered", key)
		}
		r := op.Responses.Value(key).Value
		resp := Response{Status: status, Bodies: bodies(r.Content)}
		if r.Description != nil {
			resp.Description = *r.Description
		}
		for name, h := range r.Headers {
			resp.Headers = append(resp.Headers, Header{Name: name, Required: h.Value.Required,
				Description: h.Value.Description, Schema: describe(h.Value.Schema)})
		}
		sort.Slice(resp.Headers, func(i, j int) bool { return resp.Headers[i].Name < resp.Headers[j].Name })
		if status >= 400 {
			for _, code := range errorCodes(r) {
				resp.Codes = append(resp.Codes, ErrorCode{Code: code, Description: meanings[code]})
			}
		}
		o.Responses = append(o.Responses, resp)
	}
	sort.Slice(o.Responses, func(i, j int) bool { return o.Responses[i].Status < o.Responses[j].Status })
	return o, nil
}

func parameter(p *openapi3.Parameter) Parameter {
	return Parameter{Name: p.Name, In: p.In, Required: p.Required, Description: p.Description, Schema: describe(p.Schema)}
}

// bodies lists a content map, JSON first, then by content type.
func bodies(c openapi3.Content) []Body {
	types := make([]string, 0, len(c))
	for ct := range c {
		types = append(types, ct)
	}
	sort.Slice(types, func(i, j int) bool {
		if (types[i] == "application/json") != (types[j] == "application/json") {
			return types[i] == "application/json"
		}
		return types[i] < types[j]
	})
	var out []Body
	for _, ct := range types {
		mt := c[ct]
		b := Body{ContentType: ct}
		if s := mt.Schema; s != nil && s.Value != nil {
			b.Schema = refName(s.Ref)
			if b.Schema == "" && len(s.Value.AllOf) > 0 {
				// An error answer: the Error schema narrowed to the answer's codes.
				b.Schema = refName(s.Value.AllOf[0].Ref)
			}
			b.Description = s.Value.Description
			b.Fields = fields(s.Value)
		}
		out = append(out, b)
	}
	return out
}

// fields lists an object schema's members: required ones first, as a reader wants them, then by name.
func fields(s *openapi3.Schema) []Field {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	sort.SliceStable(names, func(i, j int) bool { return isRequired(s, names[i]) && !isRequired(s, names[j]) })
	var out []Field
	for _, name := range names {
		p := s.Properties[name]
		out = append(out, Field{Name: name, Required: isRequired(s, name), Description: p.Value.Description, Schema: describe(p)})
	}
	return out
}

func isRequired(s *openapi3.Schema, name string) bool {
	for _, r := range s.Required {
		if r == name {
			return true
		}
	}
	return false
}

// errorCodes reads the codes an error answer enumerates: the enum on error.code that each answer
// narrows the Error schema with (allOf: [Error, {properties: {error: {properties: {code: {enum}}}}}]).
func errorCodes(r *openapi3.Response) []string {
	mt := r.Content.Get("application/json")
	if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
		return nil
	}
	var codes []string
	for _, part := range mt.Schema.Value.AllOf {
		e := part.Value.Properties["error"]
		if e == nil || e.Value == nil {
			continue
		}
		if c := e.Value.Properties["code"]; c != nil && c.Value != nil {
			for _, v := range c.Value.Enum {
				codes = append(codes, fmt.Sprint(v))
			}
		}
	}
	return codes
}

// codeCatalogue is the ErrorCode schema's one-of list: every code with its meaning.
func codeCatalogue(doc *openapi3.T) []ErrorCode {
	s := doc.Components.Schemas["ErrorCode"]
	if s == nil || s.Value == nil {
		return nil
	}
	var out []ErrorCode
	for _, alt := range s.Value.OneOf {
		out = append(out, ErrorCode{Code: fmt.Sprint(alt.Value.Const), Description: alt.Value.Description})
	}
	return out
}

// describe puts a schema into words. A one-of or any-of of a type and null is that type, nullable.
func describe(ref *openapi3.SchemaRef) Schema {
	if ref == nil || ref.Value == nil {
		return Schema{}
	}
	s := ref.Value
	alts := s.AnyOf
	if len(alts) == 0 {
		alts = s.OneOf
	}
	if len(alts) == 2 && s.Type.IsEmpty() {
		for i, alt := range alts {
			if alt.Value != nil && alt.Value.Type.Is("null") {
				out := describe(alts[1-i])
				out.Nullable = true
				return out
			}
		}
	}
	var out Schema
	var types []string
	for _, t := range s.Type.Slice() {
		if t == "null" {
			out.Nullable = true
			continue
		}
		types = append(types, t)
	}
	switch {
	case len(types) == 1 && types[0] == "string" && (s.Format == "binary" || s.ContentMediaType != ""):
		out.Type = "file"
	case len(types) == 1 && types[0] == "array" && s.Items != nil:
		item := describe(s.Items)
		out.Type = "array of " + item.Type
		out.Limits = append(out.Limits, item.Limits...)
	case len(types) == 1 && types[0] == "object" && refName(ref.Ref) != "":
		out.Type = "object (" + refName(ref.Ref) + ")"
	case len(types) > 0:
		out.Type = strings.Join(types, " or ")
	case refName(ref.Ref) != "":
		out.Type = refName(ref.Ref)
	}
	if s.Const != nil {
		out.Enum = []string{fmt.Sprint(s.Const)}
	}
	for _, v := range s.Enum {
		if v == nil {
			continue // null, already said by Nullable
		}
		out.Enum = append(out.Enum, fmt.Sprint(v))
	}
	if s.Default != nil {
		out.Default = fmt.Sprint(s.Default)
	}
	out.Limits = append(out.Limits, limits(s)...)
	return out
}

func limits(s *openapi3.Schema) []string {
	var out []string
	num := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
	switch {
	case s.Min != nil && s.Max != nil:
		out = append(out, num(*s.Min)+"–"+num(*s.Max))
	case s.Min != nil:
		out = append(out, "at least "+num(*s.Min))
	case s.Max != nil:
		out = append(out, "at most "+num(*s.Max))
	}
	switch {
	case s.MinLength > 0 && s.MaxLength != nil:
		out = append(out, fmt.Sprintf("%d–%d characters", s.MinLength, *s.MaxLength))
	case s.MaxLength != nil:
		out = append(out, fmt.Sprintf("at most %d characters", *s.MaxLength))
	case s.MinLength > 0:
		out = append(out, fmt.Sprintf("at least %d characters", s.MinLength))
	}
	if s.MaxItems != nil {
		out = append(out, fmt.Sprintf("at most %d items", *s.MaxItems))
	}
	if s.MinItems > 0 {
		out = append(out, fmt.Sprintf("at least %d items", s.MinItems))
	}
	if s.Pattern != "" {
		out = append(out, "pattern "+s.Pattern)
	}
	return out
}

// refName is the component name a $ref points to ("#/components/schemas/Video" → "Video").
func refName(ref string) string {
	if i := strings.LastIndex(ref, "/"); i >= 0 && strings.HasPrefix(ref, "#/components/") {
		return ref[i+1:]
	}
	return ""
}

// pathOrder is the order of paths in the YAML source, which is the order a reader should meet them in;
// kin-openapi keeps paths in a map.
func pathOrder(doc *openapi3.T) []string {
	keys := doc.Paths.Keys()
	at := func(p string) int {
		if i := strings.Index(string(source), "\n  "+p+":\n"); i >= 0 {
			return i
		}
		return len(source)
	}
	sort.SliceStable(keys, func(i, j int) bool { return at(keys[i]) < at(keys[j]) })
	return keys
}

// Component is a named schema of the document (Video, Billing, MediaFile, ModelId, …), for the page's
// reference of objects that operations point to by name.
type Component struct {
	Name        string
	Description string // Markdown
	Schema      Schema
	Fields      []Field // the members of an object; none for a scalar
}

// Components returns the document's named schemas, by name. The result is shared: callers must not
// change it.
func Components() ([]Component, error) { return components() }

var components = sync.OnceValues(func() ([]Component, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(doc.Components.Schemas))
	for name := range doc.Components.Schemas {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]Component, 0, len(names))
	for _, name := range names {
		ref := doc.Components.Schemas[name]
		out = append(out, Component{Name: name, Description: ref.Value.Description, Schema: describe(ref),
			Fields: fields(ref.Value)})
	}
	return out, nil
})

// Info is the document's title and introduction, for the top of the page.
type Info struct {
	Title       string
	Version     string
	Summary     string
	Description string // Markdown
}

// DocumentInfo returns the document's info.
func DocumentInfo() (Info, error) { return documentInfo() }

var documentInfo = sync.OnceValues(func() (Info, error) {
	doc, err := Load()
	if err != nil {
		return Info{}, err
	}
	return Info{Title: doc.Info.Title, Version: doc.Info.Version, Summary: doc.Info.Summary, Description: doc.Info.Description}, nil
})
