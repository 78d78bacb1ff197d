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

// TestOpenAIGoSDKRemix: openai-go's Videos.Remix, unmodified, makes a new task from a completed video:
// remixed_from_video_id set, the source's model, seconds and size, a reservation of exactly what a
// create of those costs (one ledger entry), completed and settled; the simulator (which takes reference
// videos) is sent the source video itself. Another account's video is 404, an unfinished or failed one
// 409 video_not_ready, one past its retention 404 video_expired, a short balance 402; an
// Idempotency-Key replays the first remix.
func TestOpenAIGoSDKRemix(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, nil)
		acct := s.NewAccount(t, "10")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		client := sdkClient(t, s, acct.Key)

		src, err := client.Videos.NewAndPoll(ctx, openai.VideoNewParams{Prompt: "a harbour at dawn", Model: "videogen-2.0-720p",
			Seconds: openai.VideoSeconds("8"), Size: openai.VideoSize("720x1280")}, 50)
		if err != nil || src.Status != openai.VideoStatusCompleted {
			t.Fatalf("source: %+v %v", src, err)
		}
		v, err := client.Videos.Remix(ctx, src.ID, openai.VideoRemixParams{Prompt: "the harbour at night"})
		if err != nil {
			t.Fatalf("Videos.Remix: %v", err)
		}
		if v.RemixedFromVideoID != src.ID || v.ID == src.ID || v.Status != openai.VideoStatusQueued || v.Seconds != "8" ||
			v.Size != "720x1280" || string(v.Model) != "videogen-2.0-720p" || v.Prompt != "the harbour at night" {
			t.Fatalf("remix %+v", v)
		}
		srcTask, task := testkit.Task(t, s.DB, src.ID), testkit.Task(t, s.DB, v.ID)
		if task.AmountMicros != 8*300_000 || task.AmountMicros != srcTask.AmountMicros || task.AspectRatio != "9:16" {
			t.Fatalf("remix priced %d (%s), source %d", task.AmountMicros, task.AspectRatio, srcTask.AmountMicros)
		}
		es := testkit.Entries(t, s.DB, v.ID)
		if len(es) != 1 || es[0].Kind != models.KindReserve || es[0].DeltaReserved != task.AmountMicros || es[0].DeltaAvailable != -task.AmountMicros {
			t.Fatalf("remix ledger %+v", es)
		}
		if done := s.WaitStatus(t, acct.Key, v.ID, 30*time.Second, "completed", "failed"); done["status"] != "completed" ||
			done["remixed_from_video_id"] != src.ID || done["billing"].(map[string]any)["state"] != "settled" {
			t.Fatalf("remix ended %v", done)
		}
		// The simulator was sent the source video as a reference, and reads back its very bytes.
		resp, err := client.Videos.DownloadContent(ctx, src.ID, openai.VideoDownloadContentParams{})
		if err != nil {
			t.Fatal(err)
		}
		srcMP4, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := fetchInput(t, firstFrameOf(t, s, "the harbour at night", "reference_video")); !bytes.Equal(got, srcMP4) {
			t.Fatalf("the simulator's reference video (%d bytes) is not the source (%d bytes)", len(got), len(srcMP4))
		}
		if got, _ := client.Videos.Get(ctx, src.ID); got.RemixedFromVideoID != "" {
			t.Fatalf("the source shows remixed_from_video_id %q", got.RemixedFromVideoID)
		}

		// Idempotency-Key: the same remix again is the first one; another prompt under it a conflict.
		key := option.WithHeader("Idempotency-Key", "remix-once")
		first, err := client.Videos.Remix(ctx, src.ID, openai.VideoRemixParams{Prompt: "once"}, key)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := client.Videos.Remix(ctx, src.ID, openai.VideoRemixParams{Prompt: "once"}, key); err != nil || again.ID != first.ID {
			t.Fatalf("replayed remix: %+v %v", again, err)
		}
		if es := testkit.Entries(t, s.DB, first.ID); len(es) != 1 {
			t.Fatalf("replayed remix reserved again: %v", testkit.Kinds(es))
		}
		var copies int64
		s.DB.R.Model(&models.Media{}).Where("part = ?", "remix").Count(&copies)
		if copies != 2 { // the two remixes' copies; the replay's was deleted
			t.Fatalf("%d remix copies stored, want 2", copies)
		}
		_, err = client.Videos.Remix(ctx, src.ID, openai.VideoRemixParams{Prompt: "twice"}, key)
		if e := apiError(t, err); e.StatusCode != 409 || e.Code != "idempotency_conflict" {
			t.Fatalf("other prompt under the key: %d %s", e.StatusCode, e.Code)
		}

		// Refusals.
		other := s.NewAccount(t, "10")
		otherClient := sdkClient(t, s, other.Key)
		_, err = otherClient.Videos.Remix(ctx, src.ID, openai.VideoRemixParams{Prompt: "not mine"})
		if e := apiError(t, err); e.StatusCode != 404 || e.Code != "not_found" {
			t.Fatalf("another account's video: %d %s", e.StatusCode, e.Code)
		}
		slow, err := client.Videos.New(ctx, openai.VideoNewParams{Prompt: "still going [sim:slow]", Model: "videogen-2.0-mini-480p"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.Videos.Remix(ctx, slow.ID, openai.VideoRemixParams{Prompt: "too soon"})
		if e := apiError(t, err); e.StatusCode != 409 || e.Code != "video_not_ready" || e.Response.Header.Get("x-should-retry") != "false" {
			t.Fatalf("unfinished video: %d %s", e.StatusCode, e.Code)
		}
		failed, err := client.Videos.NewAndPoll(ctx, openai.VideoNewParams{Prompt: "breaks [sim:fail]", Model: "videogen-2.0-mini-480p"}, 50)
		if err != nil || failed.Status != openai.VideoStatusFailed {
			t.Fatalf("failed source: %+v %v", failed, err)
		}
		_, err = client.Videos.Remix(ctx, failed.ID, openai.VideoRemixParams{Prompt: "from a failure"})
		if e := apiError(t, err); e.StatusCode != 409 || e.Code != "video_not_ready" {
			t.Fatalf("failed video: %d %s", e.StatusCode, e.Code)
		}
		_, err = client.Videos.Remix(ctx, src.ID, openai.VideoRemixParams{Prompt: ""})
		if e := apiError(t, err); e.StatusCode != 400 || e.Code != "invalid_prompt" {
			t.Fatalf("empty prompt: %d %s", e.StatusCode, e.Code)
		}
		poor := s.NewAccount(t, "1.20")
		poorClient := sdkClient(t, s, poor.Key)
		cheap, err := poorClient.Videos.NewAndPoll(ctx, openai.VideoNewParams{Prompt: "cheap", Model: "videogen-2.0-720p", Seconds: openai.VideoSeconds("4")}, 50)
		if err != nil || cheap.Status != openai.VideoStatusCompleted {
			t.Fatalf("cheap source: %+v %v", cheap, err)
		}
		_, err = poorClient.Videos.Remix(ctx, cheap.ID, openai.VideoRemixParams{Prompt: "cannot pay"})
		if e := apiError(t, err); e.StatusCode != 402 || e.Code != "insufficient_balance" {
			t.Fatalf("short balance: %d %s", e.StatusCode, e.Code)
		}
		var poorCopies int64
		s.DB.R.Model(&models.Media{}).Where("account_id = ?", poor.ID).Count(&poorCopies)
		if poorCopies != 0 {
			t.Fatalf("a refused remix left %d files", poorCopies)
		}
		// Past its retention (expires_at passed): its file is gone.
		if err := s.DB.W.Model(&models.Task{}).Where("id = ?", cheap.ID).Update("expires_at", time.Now().Add(-time.Minute)).Error; err != nil {
			t.Fatal(err)
		}
		s.Videos.Polls.Forget(poor.ID, cheap.ID)
		_, err = poorClient.Videos.Remix(ctx, cheap.ID, openai.VideoRemixParams{Prompt: "too late"})
		if e := apiError(t, err); e.StatusCode != 404 || e.Code != "video_expired" {
			t.Fatalf("expired video: %d %s", e.StatusCode, e.Code)
		}
		if _, err := client.Videos.Delete(ctx, src.ID); err != nil {
			t.Fatal(err)
		}
		_, err = client.Videos.Remix(ctx, src.ID, openai.VideoRemixParams{Prompt: "deleted"})
		if e := apiError(t, err); e.StatusCode != 404 || e.Code != "not_found" {
			t.Fatalf("deleted video: %d %s", e.StatusCode, e.Code)
		}
	})
}
