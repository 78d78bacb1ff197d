package handlers_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"strings"
	"testing"

	"videogen/internal/testkit"
	"videogen/models"
)

// formPart is one part of a multipart create body; a file when filename is set (even to "").
type formPart struct {
	name, value string
	filename    *string
}

func text(name, value string) formPart { return formPart{name: name, value: value} }

func filePart(name, filename, body string) formPart {
	return formPart{name: name, value: body, filename: &filename}
}

// multipartBody writes parts as OpenAI's SDKs do: one part per field, Content-Disposition form-data,
// files with a filename and application/octet-stream.
func multipartBody(t *testing.T, parts ...formPart) (body []byte, contentType string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for _, p := range parts {
		h := textproto.MIMEHeader{}
		if p.filename != nil {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, p.name, *p.filename))
			h.Set("Content-Type", "application/octet-stream")
		} else {
			h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q`, p.name))
		}
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.WriteString(pw, p.value)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), w.FormDataContentType()
}

// postForm sends a multipart create.
func postForm(t *testing.T, s *testkit.Server, key string, parts []formPart, headers ...string) *testkit.Resp {
	t.Helper()
	body, ctype := multipartBody(t, parts...)
	return s.Do(t, "POST", "/v1/videos", key, body, append([]string{"Content-Type", ctype}, headers...)...)
}

// TestCreateVideoMultipart: POST /v1/videos takes the create fields as multipart text parts, as
// openai-go's Videos.New sends them, and makes the very task the JSON body makes; an Idempotency-Key
// binds the request whichever form carries it; a file part, and every rule of the JSON body, refuse it.
func TestCreateVideoMultipart(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "1000")
		img := s.Upload(t, acct.Key, "", testkit.File("image_files", "a.png", testkit.PNG(t, 8, 8))).Answer(t).ImageURLs[0]

		// The same request both ways: the same task fields, price and inputs.
		fields := map[string]any{"model": "videogen-2.0-720p", "prompt": "a paper boat", "seconds": "8", "size": "720x1280",
			"generate_audio": true, "seed": 7, "image_urls": []string{img, img}}
		asJSON := s.CreateVideo(t, acct.Key, fields)
		// Lists as repeated parts ("image_urls[]", the SDKs' spelling, is held to the JSON form in
		// internal/domain/videos: the OpenAPI document these exchanges are checked against names the parts plainly).
		r := postForm(t, s, acct.Key, []formPart{text("generate_audio", "true"), text("image_urls", img), text("image_urls", img),
			text("model", "videogen-2.0-720p"), text("prompt", "a paper boat"), text("seconds", "8"), text("seed", "7"), text("size", "720x1280")})
		if r.Status != 200 {
			t.Fatalf("multipart create: %d %s", r.Status, r.Body)
		}
		asForm := r.JSON(t)
		if asForm["seconds"] != "8" || asForm["size"] != "720x1280" || asForm["aspect_ratio"] != "9:16" || asForm["status"] != "queued" {
			t.Fatalf("multipart create answered %v", asForm)
		}
		a, b := testkit.Task(t, s.DB, asJSON["id"].(string)), testkit.Task(t, s.DB, asForm["id"].(string))
		type same struct {
			Model, Prompt, Size, Ratio, Inputs string
			Seconds                            int
			Audio, Watermark                   bool
			Seed                               int64
			Amount                             int64
		}
		key := func(t models.Task) same {
			return same{t.Model, t.Prompt, t.Size, t.AspectRatio, t.Inputs, t.Seconds, t.GenerateAudio, t.Watermark, *t.Seed, t.AmountMicros}
		}
		if key(a) != key(b) {
			t.Fatalf("JSON made %+v, multipart %+v", key(a), key(b))
		}

		// Idempotency across the two forms, in both orders: the key binds the normalised request.
		openaiGo := []formPart{text("model", "videogen-2.0-mini-480p"), text("prompt", "waves"), text("seconds", "4"), text("size", "864x496")}
		first := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "waves"}, "Idempotency-Key", "json-then-form")
		replay := postForm(t, s, acct.Key, openaiGo, "Idempotency-Key", "json-then-form")
		if first.Status != 200 || replay.Status != 200 || replay.JSON(t)["id"] != first.JSON(t)["id"] || replay.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("JSON then multipart with one key: %d %s / %d %s", first.Status, first.Body, replay.Status, replay.Body)
		}
		first = postForm(t, s, acct.Key, openaiGo, "Idempotency-Key", "form-then-json")
		replay = s.Do(t, "POST", "/v1/videos", acct.Key, `{"prompt":"waves","model":"videogen-2.0-mini-480p","aspect_ratio":"16:9"}`, "Idempotency-Key", "form-then-json")
		if first.Status != 200 || replay.Status != 200 || replay.JSON(t)["id"] != first.JSON(t)["id"] || replay.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("multipart then JSON with one key: %d %s / %d %s", first.Status, first.Body, replay.Status, replay.Body)
		}
		other := postForm(t, s, acct.Key, []formPart{text("model", "videogen-2.0-mini-480p"), text("prompt", "waves"), text("seconds", "8")}, "Idempotency-Key", "form-then-json")
		if other.Status != 409 || other.ErrorCode() != "idempotency_conflict" {
			t.Fatalf("another request under the key: %d %s", other.Status, other.Body)
		}
		var before int64
		s.DB.R.Model(&models.Task{}).Where("account_id = ?", acct.ID).Count(&before)

		base := []formPart{text("model", "videogen-2.0-720p"), text("prompt", "a red fox")}
		with := func(extra ...formPart) []formPart { return append(append([]formPart{}, base...), extra...) }
		cases := []struct {
			name   string
			parts  []formPart
			ctype  string // Content-Type when not the writer's
			body   string // raw body instead of parts
			status int
			code   string
			param  string
		}{
			// input_reference is the one file part a create takes (TestOpenAIGoSDKInputReference): held to the
			// upload's rules, its type decided by its bytes.
			{name: "input_reference file that is no image", parts: []formPart{filePart("input_reference", "anonymous_file", "\x89PNG..."), text("model", "videogen-2.0-720p"), text("prompt", "x")},
				status: 415, code: "unsupported_media_type", param: "input_reference"},
			{name: "file after the text fields", parts: with(filePart("image_files", "cat.png", "\x89PNG...")), status: 400, code: "file_upload_not_supported", param: "image_files"},
			{name: "file under a field's name", parts: with(filePart("image_urls", "cat.png", "\x89PNG...")), status: 400, code: "file_upload_not_supported", param: "image_urls"},
			{name: "empty file field of a browser form", parts: with(filePart("input_reference", "", "")), status: 400, code: "invalid_request", param: "input_reference"},
			{name: "empty file under another name", parts: with(filePart("video_files", "", "")), status: 400, code: "file_upload_not_supported", param: "video_files"},
			{name: "unknown field", parts: with(text("n", "2")), status: 400, code: "unknown_field", param: "n"},
			{name: "input_reference as a link not ours", parts: with(text("input_reference[image_url]", "https://x.example/a.png")), status: 400, code: "invalid_media_url", param: "input_reference.image_url"},
			{name: "seconds out of range", parts: with(text("seconds", "16")), status: 400, code: "invalid_seconds", param: "seconds"},
			{name: "seconds not digits", parts: with(text("seconds", "8s")), status: 400, code: "invalid_seconds", param: "seconds"},
			{name: "boolean not true or false", parts: with(text("watermark", "1")), status: 400, code: "invalid_request", param: "watermark"},
			{name: "a field twice", parts: with(text("model", "videogen-2.0-480p")), status: 400, code: "invalid_request", param: "model"},
			{name: "model missing", parts: []formPart{text("prompt", "x")}, status: 400, code: "missing_field", param: "model"},
			{name: "not our media", parts: with(text("image_urls", "https://cdn.example.com/a.png")), status: 400, code: "invalid_media_url", param: "image_urls[0]"},
			{name: "size of another model", parts: with(text("size", "1920x1080")), status: 400, code: "size_mismatch", param: "size"},
			{name: "no boundary", ctype: "multipart/form-data", body: "--x\r\n", status: 415, code: "unsupported_content_type"},
			{name: "multipart/mixed", ctype: "multipart/mixed; boundary=x", body: "--x\r\n\r\nmodel\r\n--x--\r\n", status: 415, code: "unsupported_content_type"},
			{name: "malformed", ctype: "multipart/form-data; boundary=x", body: "--x\r\nno headers end here", status: 400, code: "invalid_request"},
			{name: "cut short", ctype: "multipart/form-data; boundary=x", body: "--x\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nvideogen", status: 400, code: "invalid_request"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var r *testkit.Resp
				if tc.ctype != "" {
					r = s.Do(t, "POST", "/v1/videos", acct.Key, tc.body, "Content-Type", tc.ctype)
				} else {
					r = postForm(t, s, acct.Key, tc.parts)
				}
				if r.Status != tc.status || r.ErrorCode() != tc.code {
					t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
				}
				e, _ := r.JSON(t)["error"].(map[string]any)
				if tc.param != "" && e["param"] != tc.param {
					t.Errorf("param %v, want %s", e["param"], tc.param)
				}
				if tc.code == "file_upload_not_supported" && !strings.Contains(e["message"].(string), "POST /uploads/v1/files") {
					t.Errorf("the refusal of a file does not say where files go: %s", r.Body)
				}
			})
		}
		var after int64
		s.DB.R.Model(&models.Task{}).Where("account_id = ?", acct.ID).Count(&after)
		if after != before {
			t.Fatalf("refused multipart creates wrote %d tasks", after-before)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestCreateVideoMultipartBounded: a multipart create is held to the JSON body's 1 MiB while it is read,
// announced or chunked, and its refusal reaches the client although the body is left unread; a file part
// other than input_reference is refused as soon as its headers arrive, whatever follows, and an
// input_reference that is no image as soon as its first bytes are read.
func TestCreateVideoMultipartBounded(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	acct := s.NewAccount(t, "10")
	textHead := "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nvideogen-2.0-720p\r\n--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\n"
	fileHead := "--b\r\nContent-Disposition: form-data; name=\"video_files\"; filename=\"big.mp4\"\r\nContent-Type: video/mp4\r\n\r\n"
	// input_reference is streamed to storage as an upload's: its bytes decide (here, not an image).
	refHead := "--b\r\nContent-Disposition: form-data; name=\"input_reference\"; filename=\"big.png\"\r\nContent-Type: image/png\r\n\r\n"
	for _, tc := range []struct {
		name    string
		head    string
		chunked bool
		status  int
		code    string
	}{
		{"3 MiB prompt, announced", textHead, false, 413, "request_too_large"},
		{"3 MiB prompt, chunked", textHead, true, 413, "request_too_large"},
		{"3 MiB file, announced", fileHead, false, 400, "file_upload_not_supported"},
		{"3 MiB file, chunked", fileHead, true, 400, "file_upload_not_supported"},
		{"3 MiB input_reference of no image type", refHead, false, 415, "unsupported_media_type"},
		{"3 MiB input_reference of no image type, chunked", refHead, true, 415, "unsupported_media_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := postLarge(t, s.URL, acct.Key, "multipart/form-data; boundary=b", tc.head, 3<<20, tc.chunked)
			if r.Status != tc.status || r.ErrorCode() != tc.code {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, tc.status, tc.code)
			}
		})
	}
	// Over the limit inside a part's headers: multipart's header parser rewords the body's refusal as a
	// malformed header, and the answer must still be 413, not 400 "malformed". Where the limit falls
	// depends on how the body lines up with the reads, so the parts are padded 0 to 63 bytes.
	for pad := 0; pad < 64; pad += 3 {
		var many strings.Builder
		for i := 0; many.Len() <= 1200<<10; i++ {
			fmt.Fprintf(&many, "--b\r\nContent-Disposition: form-data; name=\"f%d\"\r\nX-Pad: %s\r\n\r\nv\r\n", i, strings.Repeat("p", pad))
		}
		many.WriteString("--b--\r\n")
		if r := s.Do(t, "POST", "/v1/videos", acct.Key, many.String(), "Content-Type", "multipart/form-data; boundary=b"); r.Status != 413 || r.ErrorCode() != "request_too_large" {
			t.Fatalf("1.2 MB of small parts (padded %d): %d %.300s", pad, r.Status, r.Body)
		}
	}
	// A long unknown field name is quoted cut short, not echoed whole (in the message and in param).
	long := strings.Repeat("x", 500_000)
	r := s.Do(t, "POST", "/v1/videos", acct.Key, "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nvideogen-2.0-720p\r\n"+
		"--b\r\nContent-Disposition: form-data; name=\""+long+"\"\r\n\r\nv\r\n--b--\r\n", "Content-Type", "multipart/form-data; boundary=b")
	if r.Status != 400 || r.ErrorCode() != "unknown_field" || len(r.Body) > 2000 {
		t.Fatalf("a 500,000-character field name: %d, %d bytes: %.300s", r.Status, len(r.Body), r.Body)
	}
	r = s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "x", long: 1})
	if r.Status != 400 || r.ErrorCode() != "unknown_field" || len(r.Body) > 2000 {
		t.Fatalf("a 500,000-character JSON member: %d, %d bytes", r.Status, len(r.Body))
	}
	var n int64
	s.DB.R.Model(&models.Task{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d tasks written", n)
	}
}
