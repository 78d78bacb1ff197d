package handlers_test

import (
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestCreateVideoValidation holds every rule of POST /v1/videos to its status and error code, and shows
// that a refused request leaves nothing written.
func TestCreateVideoValidation(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "1000")
		// Media URLs must be the platform's own: upload one file of each kind (and one for a stranger).
		up := s.Upload(t, acct.Key, "", testkit.File("image_files", "a.png", testkit.PNG(t, 8, 8)),
			testkit.Part{Name: "video_files", Filename: "v.mp4", Body: testkit.MP4Stream(4096)},
			testkit.File("audio_files", "a.wav", testkit.WAV(100))).Answer(t)
		img, vid, aud := up.ImageURLs[0], up.VideoURLs[0], up.AudioURLs[0]
		own := img
		stranger := s.NewAccount(t, "0")
		theirs := s.Upload(t, stranger.Key, "", testkit.File("image_files", "b.png", testkit.PNG(t, 8, 8))).Answer(t).ImageURLs[0]
		expired := s.Media.Signer.URL(up.Files[0].ID, time.Now().Add(-time.Minute))
		unknown := s.Media.Signer.URL("file_"+strings.Repeat("x", 24), time.Now().Add(time.Hour))
		tampered := img[:len(img)-2] + "xx"
		otherHost := strings.Replace(img, s.URL, "https://cdn.example.com", 1)
		later := strings.Replace(img, "exp=", "exp=9", 1) // a later expiry under the old signature
		urls := func(n int, u string) []string {
			out := make([]string, n)
			for i := range out {
				out[i] = u
			}
			return out
		}
		body := func(extra map[string]any) map[string]any {
			b := map[string]any{"model": "videogen-2.0-720p", "prompt": "a red fox in the snow"}
			for k, v := range extra {
				if v == nil {
					delete(b, k)
				} else {
					b[k] = v
				}
			}
			return b
		}
		type want struct {
			status int
			code   string
			param  string
			// for accepted requests
			seconds, size, ratio string
		}
		cases := []struct {
			name    string
			body    any
			headers []string
			want    want
		}{
			// content type and JSON shape
			{"no content type", body(nil), []string{"Content-Type", ""}, want{status: 415, code: "unsupported_content_type"}},
			{"text/plain", body(nil), []string{"Content-Type", "text/plain"}, want{status: 415, code: "unsupported_content_type"}},
			{"form", "model=x", []string{"Content-Type", "application/x-www-form-urlencoded"}, want{status: 415, code: "unsupported_content_type"}},
			{"gzip body", body(nil), []string{"Content-Encoding", "gzip"}, want{status: 415, code: "unsupported_content_type"}},
			{"json with charset", body(nil), []string{"Content-Type", "application/json; charset=utf-8"}, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"empty body", "", nil, want{status: 400, code: "invalid_json"}},
			{"broken json", `{"model": "videogen-2.0-720p",`, nil, want{status: 400, code: "invalid_json"}},
			{"array", `[{"model": "videogen-2.0-720p"}]`, nil, want{status: 400, code: "invalid_json"}},
			{"string", `"hello"`, nil, want{status: 400, code: "invalid_json"}},
			{"null", `null`, nil, want{status: 400, code: "invalid_json"}},
			{"number", `42`, nil, want{status: 400, code: "invalid_json"}},
			{"two objects", `{"model":"videogen-2.0-720p","prompt":"x"} {}`, nil, want{status: 400, code: "invalid_json"}},
			{"unknown field", body(map[string]any{"n": 2}), nil, want{status: 400, code: "unknown_field", param: "n"}},
			{"remix is not offered", body(map[string]any{"remix_video_id": "video_x"}), nil, want{status: 400, code: "unknown_field", param: "remix_video_id"}},
			// model
			{"model missing", body(map[string]any{"model": nil}), nil, want{status: 400, code: "missing_field", param: "model"}},
			{"model null", `{"model": null, "prompt": "x"}`, nil, want{status: 400, code: "missing_field", param: "model"}},
			{"model not a string", body(map[string]any{"model": 7}), nil, want{status: 400, code: "invalid_model", param: "model"}},
			{"model unknown", body(map[string]any{"model": "sora-2"}), nil, want{status: 400, code: "invalid_model", param: "model"}},
			{"mini has no 1080p", body(map[string]any{"model": "videogen-2.0-mini-1080p"}), nil, want{status: 400, code: "invalid_model", param: "model"}},
			// prompt
			{"prompt missing", body(map[string]any{"prompt": nil}), nil, want{status: 400, code: "missing_field", param: "prompt"}},
			{"prompt empty", body(map[string]any{"prompt": ""}), nil, want{status: 400, code: "invalid_prompt", param: "prompt"}},
			{"prompt blank", body(map[string]any{"prompt": " \n\t "}), nil, want{status: 400, code: "invalid_prompt", param: "prompt"}},
			{"prompt not a string", body(map[string]any{"prompt": []string{"a"}}), nil, want{status: 400, code: "invalid_prompt", param: "prompt"}},
			{"prompt 1 character", body(map[string]any{"prompt": "x"}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"prompt 5000 characters of 2 bytes", body(map[string]any{"prompt": strings.Repeat("é", 5000)}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"prompt 5000 emoji of 4 bytes", body(map[string]any{"prompt": strings.Repeat("🎬", 5000)}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"prompt 5001 characters", body(map[string]any{"prompt": strings.Repeat("a", 5001)}), nil, want{status: 400, code: "invalid_prompt", param: "prompt"}},
			{"prompt with NUL", `{"model":"videogen-2.0-720p","prompt":"a\u0000b"}`, nil, want{status: 400, code: "invalid_prompt", param: "prompt"}},
			{"prompt with newlines and tabs", body(map[string]any{"prompt": "scene 1:\n\ta fox\r\nscene 2"}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"invalid UTF-8 in prompt is replaced", []byte("{\"model\":\"videogen-2.0-720p\",\"prompt\":\"caf\xe9\"}"), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			// seconds and duration
			{"seconds default", body(nil), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"seconds 4", body(map[string]any{"seconds": 4}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"seconds 15", body(map[string]any{"seconds": 15}), nil, want{status: 200, seconds: "15", size: "1280x720", ratio: "16:9"}},
			{"seconds as digit string", body(map[string]any{"seconds": "8"}), nil, want{status: 200, seconds: "8", size: "1280x720", ratio: "16:9"}},
			{"seconds 3", body(map[string]any{"seconds": 3}), nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds 16", body(map[string]any{"seconds": 16}), nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds string 16", body(map[string]any{"seconds": "16"}), nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds fraction", `{"model":"videogen-2.0-720p","prompt":"x","seconds":8.5}`, nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds 8.0", `{"model":"videogen-2.0-720p","prompt":"x","seconds":8.0}`, nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds exponent", `{"model":"videogen-2.0-720p","prompt":"x","seconds":8e0}`, nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds negative", body(map[string]any{"seconds": -8}), nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds string with space", body(map[string]any{"seconds": " 8"}), nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds empty string", body(map[string]any{"seconds": ""}), nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"seconds bool", body(map[string]any{"seconds": true}), nil, want{status: 400, code: "invalid_seconds", param: "seconds"}},
			{"duration alone", body(map[string]any{"duration": 10}), nil, want{status: 200, seconds: "10", size: "1280x720", ratio: "16:9"}},
			{"duration 2", body(map[string]any{"duration": 2}), nil, want{status: 400, code: "invalid_seconds", param: "duration"}},
			{"seconds equals duration", body(map[string]any{"seconds": 6, "duration": "6"}), nil, want{status: 200, seconds: "6", size: "1280x720", ratio: "16:9"}},
			{"seconds differs from duration", body(map[string]any{"seconds": 6, "duration": 7}), nil, want{status: 400, code: "seconds_duration_mismatch", param: "duration"}},
			// aspect ratio and size
			{"ratio 9:16", body(map[string]any{"aspect_ratio": "9:16"}), nil, want{status: 200, seconds: "4", size: "720x1280", ratio: "9:16"}},
			{"ratio 21:9 on 1080p", body(map[string]any{"model": "videogen-2.0-1080p", "aspect_ratio": "21:9"}), nil, want{status: 200, seconds: "4", size: "2206x946", ratio: "21:9"}},
			{"ratio 1:1 on mini 480p", body(map[string]any{"model": "videogen-2.0-mini-480p", "aspect_ratio": "1:1"}), nil, want{status: 200, seconds: "4", size: "640x640", ratio: "1:1"}},
			{"ratio unknown", body(map[string]any{"aspect_ratio": "2:1"}), nil, want{status: 400, code: "invalid_aspect_ratio", param: "aspect_ratio"}},
			{"ratio not a string", body(map[string]any{"aspect_ratio": 1.77}), nil, want{status: 400, code: "invalid_aspect_ratio", param: "aspect_ratio"}},
			{"size matches ratio", body(map[string]any{"size": "834x1112", "aspect_ratio": "3:4"}), nil, want{status: 200, seconds: "4", size: "834x1112", ratio: "3:4"}},
			{"size alone gives ratio (OpenAI SDK)", body(map[string]any{"size": "720x1280"}), nil, want{status: 200, seconds: "4", size: "720x1280", ratio: "9:16"}},
			{"size of another resolution", body(map[string]any{"size": "1920x1080"}), nil, want{status: 400, code: "size_mismatch", param: "size"}},
			{"size of another ratio", body(map[string]any{"size": "1280x720", "aspect_ratio": "9:16"}), nil, want{status: 400, code: "size_mismatch", param: "size"}},
			{"size not rendered by any model", body(map[string]any{"size": "1000x1000"}), nil, want{status: 400, code: "size_mismatch", param: "size"}},
			{"size malformed", body(map[string]any{"size": "large"}), nil, want{status: 400, code: "invalid_size", param: "size"}},
			{"size upper-case X", body(map[string]any{"size": "1280X720"}), nil, want{status: 400, code: "invalid_size", param: "size"}},
			{"size zero", body(map[string]any{"size": "0x0"}), nil, want{status: 400, code: "invalid_size", param: "size"}},
			{"size number", body(map[string]any{"size": 1280}), nil, want{status: 400, code: "invalid_size", param: "size"}},
			// flags
			{"flags", body(map[string]any{"generate_audio": true, "watermark": false}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"generate_audio not bool", body(map[string]any{"generate_audio": "yes"}), nil, want{status: 400, code: "invalid_request", param: "generate_audio"}},
			{"watermark not bool", body(map[string]any{"watermark": 1}), nil, want{status: 400, code: "invalid_request", param: "watermark"}},
			// media counts
			{"9 images", body(map[string]any{"image_urls": urls(9, img)}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"10 images", body(map[string]any{"image_urls": urls(10, img)}), nil, want{status: 400, code: "too_many_images", param: "image_urls"}},
			{"7 images + first + last frame", body(map[string]any{"image_urls": urls(7, img), "start_image_url": img, "end_image_url": img}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"8 images + first + last frame", body(map[string]any{"image_urls": urls(8, img), "start_image_url": img, "end_image_url": img}), nil, want{status: 400, code: "too_many_images", param: "image_urls"}},
			{"3 videos", body(map[string]any{"video_urls": urls(3, vid)}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"4 videos", body(map[string]any{"video_urls": urls(4, vid)}), nil, want{status: 400, code: "too_many_videos", param: "video_urls"}},
			{"3 audios", body(map[string]any{"audio_urls": urls(3, aud)}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"4 audios", body(map[string]any{"audio_urls": urls(4, aud)}), nil, want{status: 400, code: "too_many_audios", param: "audio_urls"}},
			// media URLs
			{"http image", body(map[string]any{"image_urls": []string{"http://cdn.example.com/a.png"}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[0]"}},
			{"second image bad", body(map[string]any{"image_urls": []string{img, "ftp://x/b.png"}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[1]"}},
			{"any https URL", body(map[string]any{"image_urls": []string{"https://cdn.example.com/a.png"}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[0]"}},
			{"own URL on another host", body(map[string]any{"image_urls": []string{otherHost}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[0]"}},
			{"tampered signature", body(map[string]any{"image_urls": []string{tampered}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[0]"}},
			{"expiry pushed out", body(map[string]any{"image_urls": []string{later}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[0]"}},
			{"expired", body(map[string]any{"image_urls": []string{img, expired}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[1]"}},
			{"another account's file", body(map[string]any{"start_image_url": theirs}), nil, want{status: 400, code: "invalid_media_url", param: "start_image_url"}},
			{"signed but unknown file", body(map[string]any{"end_image_url": unknown}), nil, want{status: 400, code: "invalid_media_url", param: "end_image_url"}},
			{"image given as a video", body(map[string]any{"video_urls": []string{vid, img}}), nil, want{status: 400, code: "invalid_media_url", param: "video_urls[1]"}},
			{"audio given as an image", body(map[string]any{"start_image_url": aud}), nil, want{status: 400, code: "invalid_media_url", param: "start_image_url"}},
			{"every kind in its place", body(map[string]any{"image_urls": []string{img}, "video_urls": []string{vid}, "audio_urls": []string{aud}, "start_image_url": img, "end_image_url": img}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"relative url", body(map[string]any{"video_urls": []string{"/media/x.mp4"}}), nil, want{status: 400, code: "invalid_media_url", param: "video_urls[0]"}},
			{"url with credentials", body(map[string]any{"audio_urls": []string{"https://user:pw@cdn.example.com/a.mp3"}}), nil, want{status: 400, code: "invalid_media_url", param: "audio_urls[0]"}},
			{"empty url", body(map[string]any{"image_urls": []string{""}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[0]"}},
			{"url not a string", body(map[string]any{"image_urls": []any{5}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[0]"}},
			{"urls not an array", body(map[string]any{"image_urls": "https://cdn.example.com/a.png"}), nil, want{status: 400, code: "invalid_request", param: "image_urls"}},
			{"http start frame", body(map[string]any{"start_image_url": "http://cdn.example.com/a.png"}), nil, want{status: 400, code: "invalid_media_url", param: "start_image_url"}},
			{"end frame not a string", body(map[string]any{"end_image_url": 3}), nil, want{status: 400, code: "invalid_media_url", param: "end_image_url"}},
			{"own signed URLs accepted", body(map[string]any{"image_urls": []string{own}, "start_image_url": own}), nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
			{"own base with NUL", body(map[string]any{"image_urls": []string{own + "\x00"}}), nil, want{status: 400, code: "invalid_media_url", param: "image_urls[0]"}},
			{"idempotency key not ASCII", body(nil), []string{"Idempotency-Key", "cl\xe9"}, want{status: 400, code: "invalid_request", param: "Idempotency-Key"}},
			{"nulls mean absent", `{"model":"videogen-2.0-720p","prompt":"x","seconds":null,"size":null,"image_urls":null,"generate_audio":null}`, nil, want{status: 200, seconds: "4", size: "1280x720", ratio: "16:9"}},
		}
		accepted := 0
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := s.Do(t, "POST", "/v1/videos", acct.Key, tc.body, tc.headers...)
				if r.Status != tc.want.status {
					t.Fatalf("status %d, want %d: %s", r.Status, tc.want.status, r.Body)
				}
				if r.Header.Get("X-Request-Id") == "" {
					t.Error("no X-Request-Id")
				}
				if tc.want.status != 200 {
					m := r.JSON(t)
					e, _ := m["error"].(map[string]any)
					if e["code"] != tc.want.code {
						t.Errorf("code %v, want %s: %s", e["code"], tc.want.code, r.Body)
					}
					if tc.want.param != "" && e["param"] != tc.want.param {
						t.Errorf("param %v, want %s", e["param"], tc.want.param)
					}
					if msg, _ := e["message"].(string); len(msg) < 10 {
						t.Errorf("message %q does not tell the user what to do", msg)
					}
					return
				}
				accepted++
				v := r.JSON(t)
				if v["seconds"] != tc.want.seconds || v["size"] != tc.want.size || v["aspect_ratio"] != tc.want.ratio {
					t.Errorf("got seconds %v size %v ratio %v, want %s %s %s", v["seconds"], v["size"], v["aspect_ratio"], tc.want.seconds, tc.want.size, tc.want.ratio)
				}
				if v["status"] != "queued" {
					t.Errorf("status %v, want queued", v["status"])
				}
			})
		}
		// Refused requests wrote nothing: exactly one task and one reserve entry per accepted request.
		var tasks, reserves int64
		s.DB.R.Model(&models.Task{}).Where("account_id = ?", acct.ID).Count(&tasks)
		s.DB.R.Model(&models.LedgerEntry{}).Where("account_id = ? AND kind = ?", acct.ID, models.KindReserve).Count(&reserves)
		if int(tasks) != accepted || int(reserves) != accepted {
			t.Errorf("%d accepted, but %d tasks and %d reserve entries were written", accepted, tasks, reserves)
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// TestCreateVideoBodyTooLarge shows the 1 MiB limit holds while the body is read: an announced length
// over it is refused from the headers alone, before any of the body is read; a chunked body of unannounced
// length is refused once 1 MiB of it has arrived.
func TestCreateVideoBodyTooLarge(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	acct := s.NewAccount(t, "10")

	for _, chunked := range []bool{false, true} {
		r := postOversized(t, s.URL, acct.Key, chunked)
		if r.Status != 413 || r.ErrorCode() != "request_too_large" {
			t.Fatalf("chunked=%v: got %d %s, want 413 request_too_large", chunked, r.Status, r.Body)
		}
	}
	var n int64
	s.DB.R.Model(&models.Task{}).Count(&n)
	if n != 0 {
		t.Fatalf("%d tasks written", n)
	}
}
