package media

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"videogen/internal/infra/mediafetch"
	"videogen/internal/refusal"
)

// ImportRequest is a validated POST /uploads/v1/import body.
type ImportRequest struct {
	ImageURLs []string `json:"image_urls"`
	VideoURLs []string `json:"video_urls"`
	AudioURLs []string `json:"audio_urls"`
}

const maxImportURLBytes = 8192

// ParseImport decodes and checks an import body: known fields only, arrays of URL strings, the same
// per-kind counts as an upload, at least one URL.
func ParseImport(body []byte) (*ImportRequest, *refusal.Error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil || fields == nil || dec.More() {
		return nil, refusal.New("invalid_json", `The body must be one JSON object, such as {"image_urls": ["https://example.com/cat.png"]}.`)
	}
	r := &ImportRequest{}
	lists := map[string]*[]string{"image_urls": &r.ImageURLs, "video_urls": &r.VideoURLs, "audio_urls": &r.AudioURLs}
	total := 0
	for _, name := range []string{"audio_urls", "image_urls", "video_urls"} {
		raw, ok := fields[name]
		delete(fields, name)
		if !ok || string(raw) == "null" {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, refusal.Field("invalid_request", name, "%s must be an array of https:// URL strings.", name)
		}
		kind := ImportFields[name]
		if len(items) > kind.MaxFiles() {
			return nil, refusal.Field(kind.TooManyCode(), name, "%d %s URLs were given; at most %d are allowed in one import.", len(items), kind, kind.MaxFiles())
		}
		for i, item := range items {
			param := fmt.Sprintf("%s[%d]", name, i)
			var s string
			if err := json.Unmarshal(item, &s); err != nil {
				return nil, refusal.Field("invalid_request", param, "%s must be a URL string.", param)
			}
			if s == "" || len(s) > maxImportURLBytes || !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
				return nil, refusal.Field("url_not_allowed", param, "%s is not a usable URL (empty, longer than 8 KiB or containing control characters).", param)
			}
			*lists[name] = append(*lists[name], s)
		}
		total += len(items)
	}
	for name := range fields {
		return nil, refusal.Field("unknown_field", name, "Unknown field %q. Accepted fields: image_urls, video_urls, audio_urls.", name)
	}
	if total == 0 {
		return nil, refusal.New("missing_field", "Give at least one URL in image_urls, video_urls or audio_urls.")
	}
	return r, nil
}

// Opener opens an external URL for reading (mediafetch.Fetcher, with its address guard).
type Opener interface {
	Open(ctx context.Context, raw string) (*mediafetch.Response, error)
}

// Import fetches every URL of req through open and stores the files for the account: all of them, or
// none. Files are fetched one after another, each checked like an upload.
func (s *Service) Import(ctx context.Context, accountID int64, req *ImportRequest, open Opener) (files []File, bytesIn int64, err error) {
	batch := s.NewBatch(accountID, SourceImport)
	defer batch.Abort(ctx)
	// Bytes fetched, for the call log, whether the import succeeded or not (set after every return).
	defer func() { bytesIn = batch.Bytes() }()
	for _, list := range []struct {
		field string
		urls  []string
	}{{"image_urls", req.ImageURLs}, {"video_urls", req.VideoURLs}, {"audio_urls", req.AudioURLs}} {
		kind := ImportFields[list.field]
		for i, raw := range list.urls {
			param := fmt.Sprintf("%s[%d]", list.field, i)
			if err := s.importOne(ctx, batch, open, list.field, param, kind, raw); err != nil {
				return nil, 0, err
			}
		}
	}
	files, err = batch.Commit(ctx)
	return files, 0, err
}

func (s *Service) importOne(ctx context.Context, batch *Batch, open Opener, field, param string, kind Kind, raw string) error {
	resp, err := open.Open(ctx, raw)
	if err != nil {
		return importError(param, err)
	}
	defer resp.Body.Close()
	if resp.ContentType == "" {
		return refusal.Field("import_failed", param, "%s: the server did not say what the file is (no usable Content-Type); %s links must serve %s with their content type.", param, kind, kind.Formats())
	}
	if resp.ContentLength > kind.MaxBytes() {
		return refusal.Field("import_failed", param, "%s: the file is %.1f MiB; %s files may be at most %d MiB.", param, float64(resp.ContentLength)/MiB, kind, kind.MaxBytes()/MiB)
	}
	err = batch.Add(ctx, Input{Part: field, Param: param, Kind: kind, Declared: resp.ContentType, Origin: origin(resp.URL), Body: resp.Body})
	if re, ok := AsReadError(err); ok {
		return importError(param, re.Err)
	}
	tooLarge := func(r *refusal.Error) bool { return r.Code == "file_too_large" || r.Code == "request_too_large" }
	if ae, ok := refusal.As(err); ok && !tooLarge(ae) && ae.Code != "import_failed" && ae.Code != kind.TooManyCode() {
		// An empty or unreadable file: the remote's fault, reported as the import's.
		return refusal.Field("import_failed", param, "%s: the server sent %s", param, strings.TrimPrefix(ae.Message, param+" "))
	}
	if ae, ok := refusal.As(err); ok && tooLarge(ae) {
		// Over a size limit while downloading: the remote's file is the problem, not the request.
		if ae.Code == "file_too_large" {
			return refusal.Field("import_failed", param, "%s: the file is larger than %d MiB, the limit for %s files.", param, kind.MaxBytes()/MiB, kind)
		}
		return refusal.Field("import_failed", param, "%s: the files of this import add up to more than %d MiB; import them in several requests.", param, MaxRequestBytes/MiB)
	}
	return err
}

// importError words a fetch failure with the URL's field.
func importError(param string, err error) error {
	var fe *mediafetch.Error
	if errors.As(err, &fe) {
		return refusal.Field(fe.Code, param, "%s: %s", param, fe.Reason)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return refusal.Field("import_failed", param, "%s: the download broke off before the whole file arrived; try again.", param)
}

// origin is where a file came from, without user-info, query or fragment (which may hold tokens).
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
