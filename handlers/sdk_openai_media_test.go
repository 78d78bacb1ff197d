package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/testkit"
	"videogen/models"
)

// sdkClient is openai-go, unmodified, pointed at s with key; every exchange is checked against the
// OpenAPI document.
func sdkClient(t *testing.T, s *testkit.Server, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithHTTPClient(&http.Client{Transport: testkit.OpenAPITransport(t, nil)}))
}

// simTask is what the simulator received for the task created with prompt.
func simTask(t *testing.T, s *testkit.Server, prompt string) sim.Task {
	t.Helper()
	for _, st := range s.Sim.Tasks() {
		if st.Prompt == prompt {
			return st
		}
	}
	t.Fatalf("the simulator got no task %q", prompt)
	return sim.Task{}
}

// fetchInput reads a media URL the way the provider does (no key: the signature is the authorization).
func fetchInput(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return b
}

// firstFrameOf is the first-frame URL the simulator was sent for the task with prompt.
func firstFrameOf(t *testing.T, s *testkit.Server, prompt string, role string) string {
	t.Helper()
	st := simTask(t, s, prompt)
	for _, m := range st.Media {
		if m.Role == role {
			return m.URL
		}
	}
	t.Fatalf("task %q reached the simulator with media %+v, no %s", prompt, st.Media, role)
	return ""
}

func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("want an API error, got %v", err)
	}
	return apiErr
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestOpenAIGoSDKInputReference: openai-go's Videos.New with InputReference, unmodified — as a file
// (a multipart file part, streamed into storage like an upload) and as {image_url} (a URL from the
// media entry points) — creates a task whose first frame is that image: the simulator is sent it as the
// first frame and reads back the very bytes. The file counts as an upload would: its limits (size,
// type) are the upload's, refused with the upload's codes, and a refused create leaves no file behind.
func TestOpenAIGoSDKInputReference(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		acct := s.NewAccount(t, "10")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		client := sdkClient(t, s, acct.Key)

		// As a file.
		img := testkit.PNG(t, 128, 72)
		v, err := client.Videos.New(ctx, openai.VideoNewParams{Prompt: "from a file", Model: "videogen-2.0-720p",
			InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: bytes.NewReader(img)}})
		if err != nil {
			t.Fatalf("Videos.New with a file: %v", err)
		}
		task := testkit.Task(t, s.DB, v.ID)
		in, _ := task.StoredInputs()
		if in.StartImageURL == "" || in.Count() != 1 {
			t.Fatalf("stored inputs %+v: the file is not the first frame", in)
		}
		var stored models.Media
		if err := s.DB.R.Raw("SELECT m.* FROM media m JOIN task_media tm ON tm.media_id = m.id WHERE tm.task_id = ? AND tm.field = ?", v.ID, "start_image_url").Scan(&stored).Error; err != nil || stored.ID == "" {
			t.Fatalf("no first-frame media linked to the task: %v", err)
		}
		if stored.Source != "upload" || stored.Part != "input_reference" || stored.State != models.MediaReady || stored.SHA256 != sum(img) ||
			stored.ContentType != "image/png" || stored.AccountID != acct.ID {
			t.Fatalf("stored file %+v", stored)
		}
		if done := s.WaitStatus(t, acct.Key, v.ID, 30*time.Second, "completed", "failed"); done["status"] != "completed" {
			t.Fatalf("task with a file first frame: %v", done)
		}
		if got := fetchInput(t, firstFrameOf(t, s, "from a file", "first_frame")); !bytes.Equal(got, img) {
			t.Fatal("the simulator's first frame is not the uploaded file")
		}

		// As {image_url}: the SDK sends input_reference[image_url] in its form.
		img2 := testkit.JPEG(t, 96, 54)
		up := s.Upload(t, acct.Key, "", testkit.File("input_reference", "frame.jpg", img2)).Answer(t)
		v2, err := client.Videos.New(ctx, openai.VideoNewParams{Prompt: "from a url", Model: "videogen-2.0-720p",
			InputReference: openai.VideoNewParamsInputReferenceUnion{OfImageInputReference: &openai.ImageInputReferenceParam{ImageURL: openai.String(*up.StartImageURL)}}})
		if err != nil {
			t.Fatalf("Videos.New with an image URL: %v", err)
		}
		var link models.TaskMedia
		if err := s.DB.R.Where("task_id = ?", v2.ID).Take(&link).Error; err != nil || link.Field != "start_image_url" || link.MediaID != up.Files[0].ID {
			t.Fatalf("task media %+v (%v), want the uploaded file as start_image_url", link, err)
		}
		s.WaitStatus(t, acct.Key, v2.ID, 30*time.Second, "completed")
		if got := fetchInput(t, firstFrameOf(t, s, "from a url", "first_frame")); !bytes.Equal(got, img2) {
			t.Fatal("the simulator's first frame is not the image of the URL")
		}
		// The same as JSON, OpenAI's documented form.
		r := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "json form",
			"input_reference": map[string]any{"image_url": *up.StartImageURL}})
		if r.Status != 200 {
			t.Fatalf("JSON input_reference: %d %s", r.Status, r.Body)
		}

		// Limits and refusals: nothing is kept of a refused create.
		_, rowsBefore := s.MediaOnDisk(t)
		filesBefore, _ := s.MediaOnDisk(t)
		var tasksBefore int64
		s.DB.R.Model(&models.Task{}).Count(&tasksBefore)
		for _, c := range []struct {
			name   string
			params openai.VideoNewParams
			status int
			code   string
		}{
			{"oversized file", openai.VideoNewParams{Prompt: "too big", Model: "videogen-2.0-720p",
				InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: testkit.PNGStream(21 << 20)}}, 413, "file_too_large"},
			{"not an image", openai.VideoNewParams{Prompt: "wrong type", Model: "videogen-2.0-720p",
				InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: strings.NewReader("<svg xmlns='http://www.w3.org/2000/svg'/>")}}, 415, "unsupported_media_type"},
			{"a video as input_reference", openai.VideoNewParams{Prompt: "wrong kind", Model: "videogen-2.0-720p",
				InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: io.LimitReader(testkit.MP4Stream(4096), 4096)}}, 415, "unsupported_media_type"},
			{"refused after the file was stored", openai.VideoNewParams{Prompt: "bad model", Model: "sora-2",
				InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: bytes.NewReader(img)}}, 400, "invalid_model"},
			{"file_id", openai.VideoNewParams{Prompt: "file id", Model: "videogen-2.0-720p",
				InputReference: openai.VideoNewParamsInputReferenceUnion{OfImageInputReference: &openai.ImageInputReferenceParam{FileID: openai.String("file-abc")}}}, 400, "file_id_not_supported"},
			{"an image URL not issued here", openai.VideoNewParams{Prompt: "foreign", Model: "videogen-2.0-720p",
				InputReference: openai.VideoNewParamsInputReferenceUnion{OfImageInputReference: &openai.ImageInputReferenceParam{ImageURL: openai.String("https://cdn.example.com/a.png")}}}, 400, "invalid_media_url"},
		} {
			_, err := client.Videos.New(ctx, c.params)
			if e := apiError(t, err); e.StatusCode != c.status || e.Code != c.code {
				t.Fatalf("%s: %d %s, want %d %s", c.name, e.StatusCode, e.Code, c.status, c.code)
			}
		}
		// Not enough money: the stored file goes too.
		poor := s.NewAccount(t, "0.10")
		poorClient := sdkClient(t, s, poor.Key)
		_, err = poorClient.Videos.New(ctx, openai.VideoNewParams{Prompt: "no money", Model: "videogen-2.0-720p",
			InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: bytes.NewReader(img)}})
		if e := apiError(t, err); e.StatusCode != 402 || e.Code != "insufficient_balance" {
			t.Fatalf("poor account: %d %s", e.StatusCode, e.Code)
		}
		if files, rows := s.MediaOnDisk(t); files != filesBefore || rows != rowsBefore {
			t.Fatalf("refused creates left media: %d files, %d rows (before %d, %d)", files, rows, filesBefore, rowsBefore)
		}
		var tasksAfter int64
		s.DB.R.Model(&models.Task{}).Count(&tasksAfter)
		if tasksAfter != tasksBefore {
			t.Fatalf("refused creates made %d tasks", tasksAfter-tasksBefore)
		}
	})
}

// TestCreateInputReferenceFileIdempotent: a multipart create with an input_reference file, sent again
// with the same Idempotency-Key and the same bytes, is the same request (the file counts by its
// content, not by the id each storing gives it): the first task comes back, nothing more is reserved,
// and the second copy of the file is deleted. Other bytes under the key are a conflict.
func TestCreateInputReferenceFileIdempotent(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		acct := s.NewAccount(t, "10")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		client := sdkClient(t, s, acct.Key)
		img := testkit.PNG(t, 64, 36)
		params := func(b []byte) openai.VideoNewParams {
			return openai.VideoNewParams{Prompt: "same", Model: "videogen-2.0-mini-480p", InputReference: openai.VideoNewParamsInputReferenceUnion{OfFile: bytes.NewReader(b)}}
		}
		key := option.WithHeader("Idempotency-Key", "file-once")
		first, err := client.Videos.New(ctx, params(img), key)
		if err != nil {
			t.Fatal(err)
		}
		var resp *http.Response
		again, err := client.Videos.New(ctx, params(img), key, option.WithResponseInto(&resp))
		if err != nil || again.ID != first.ID || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %+v %v", again, err)
		}
		if es := testkit.Entries(t, s.DB, first.ID); len(es) != 1 || es[0].Kind != models.KindReserve {
			t.Fatalf("entries %v", testkit.Kinds(es))
		}
		if _, rows := s.MediaOnDisk(t); rows != 1 {
			t.Fatalf("%d media rows after a replay, want the first task's one", rows)
		}
		_, err = client.Videos.New(ctx, params(testkit.PNG(t, 64, 37)), key)
		if e := apiError(t, err); e.StatusCode != 409 || e.Code != "idempotency_conflict" {
			t.Fatalf("other bytes under the key: %d %s", e.StatusCode, e.Code)
		}
	})
}

// TestCreateInputReferenceRules: the JSON and form rules of input_reference, table-driven.
func TestCreateInputReferenceRules(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "10")
		up := s.Upload(t, acct.Key, "", testkit.File("image_files", "a.png", testkit.PNG(t, 32, 32)), testkit.File("image_files", "b.png", testkit.PNG(t, 32, 33))).Answer(t)
		eight := make([]string, 8)
		for i := range eight {
			eight[i] = up.ImageURLs[0]
		}
		body := func(extra map[string]any) map[string]any {
			b := map[string]any{"model": "videogen-2.0-720p", "prompt": "rules"}
			for k, v := range extra {
				b[k] = v
			}
			return b
		}
		ref := map[string]any{"image_url": up.ImageURLs[0]}
		for _, c := range []struct {
			name          string
			body          map[string]any
			status        int
			code, param   string
			startImageURL bool
		}{
			{"image_url", body(map[string]any{"input_reference": ref}), 200, "", "", true},
			{"null is not given", body(map[string]any{"input_reference": nil}), 200, "", "", false},
			{"with start_image_url", body(map[string]any{"input_reference": ref, "start_image_url": up.ImageURLs[1]}), 400, "conflicting_fields", "input_reference", false},
			{"file_id", body(map[string]any{"input_reference": map[string]any{"file_id": "file-1"}}), 400, "file_id_not_supported", "input_reference.file_id", false},
			{"no image_url", body(map[string]any{"input_reference": map[string]any{}}), 400, "missing_field", "input_reference.image_url", false},
			{"a string", body(map[string]any{"input_reference": up.ImageURLs[0]}), 400, "invalid_request", "input_reference", false},
			{"unknown member", body(map[string]any{"input_reference": map[string]any{"image_url": up.ImageURLs[0], "detail": "high"}}), 400, "unknown_field", "input_reference.detail", false},
			{"data URL", body(map[string]any{"input_reference": map[string]any{"image_url": "data:image/png;base64,iVBORw0KGgo="}}), 400, "invalid_media_url", "input_reference.image_url", false},
			{"counts among the 9 images", body(map[string]any{"input_reference": ref, "image_urls": append(eight, up.ImageURLs[1])}), 400, "too_many_images", "image_urls", false},
			{"8 + 1 is fine", body(map[string]any{"input_reference": ref, "image_urls": eight}), 200, "", "", true},
		} {
			r := s.Do(t, "POST", "/v1/videos", acct.Key, c.body)
			if r.Status != c.status || (c.code != "" && (r.ErrorCode() != c.code || r.JSON(t)["error"].(map[string]any)["param"] != c.param)) {
				t.Fatalf("%s: %d %s", c.name, r.Status, r.Body)
			}
			if c.status == 200 {
				task := testkit.Task(t, s.DB, r.JSON(t)["id"].(string))
				in, _ := task.StoredInputs()
				if (in.StartImageURL != "") != c.startImageURL {
					t.Fatalf("%s: stored inputs %+v", c.name, in)
				}
			}
		}
	})
}
