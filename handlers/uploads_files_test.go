package handlers_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestUploadFiles stores every kind of part and hands each back as a signed URL that serves the same
// bytes, inert, with the URLs grouped ready for a create request; the call log counts bytes and files.
func TestUploadFiles(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "0")
		first, cat, dog, clip, tune := testkit.PNG(t, 32, 32), testkit.JPEG(t, 48, 32), testkit.PNG(t, 16, 16), make([]byte, 0), testkit.WAV(800)
		var mp4 strings.Builder
		_, _ = io.Copy(&mp4, testkit.MP4Stream(4096))
		clip = []byte(mp4.String())
		r := s.Upload(t, acct.Key, "?model=videogen-2.0-720p",
			testkit.File("input_reference", "first.png", first), testkit.File("image_files", "cat.jpg", cat),
			testkit.File("image_files", "dog.png", dog), testkit.File("video_files", "clip.mp4", clip),
			testkit.File("audio_files", "tune.wav", tune))
		a := r.Answer(t)
		want := []struct {
			part, name, ctype string
			body              []byte
		}{
			{"input_reference", "first.png", "image/png", first}, {"image_files", "cat.jpg", "image/jpeg", cat},
			{"image_files", "dog.png", "image/png", dog}, {"video_files", "clip.mp4", "video/mp4", clip},
			{"audio_files", "tune.wav", "audio/wav", tune},
		}
		if len(a.Files) != len(want) {
			t.Fatalf("%d files in the answer, want %d: %s", len(a.Files), len(want), r.Body)
		}
		for i, w := range want {
			f := a.Files[i]
			sum := sha256.Sum256(w.body)
			if f.Part != w.part || f.Filename == nil || *f.Filename != w.name || f.ContentType != w.ctype || f.Bytes != int64(len(w.body)) ||
				f.SHA256 != hex.EncodeToString(sum[:]) || !strings.HasPrefix(f.ID, "file_") || f.ExpiresAt == 0 {
				t.Errorf("file %d = %+v, want %s %s %s %d bytes", i, f, w.part, w.name, w.ctype, len(w.body))
			}
			if !strings.HasPrefix(f.URL, s.URL+"/media/"+f.ID+"?exp=") {
				t.Errorf("file %d url %q is not a signed media URL of this server", i, f.URL)
			}
			got := get(t, f.URL)
			if got.Status != 200 || string(got.Body) != string(w.body) || got.Header.Get("Content-Type") != w.ctype ||
				got.Header.Get("X-Content-Type-Options") != "nosniff" || got.Header.Get("Content-Security-Policy") != "sandbox" {
				t.Errorf("GET file %d: %d %v (%d bytes)", i, got.Status, got.Header, len(got.Body))
			}
		}
		if a.StartImageURL == nil || *a.StartImageURL != a.Files[0].URL {
			t.Errorf("start_image_url = %v, want the input_reference URL", a.StartImageURL)
		}
		if len(a.ImageURLs) != 2 || a.ImageURLs[0] != a.Files[1].URL || a.ImageURLs[1] != a.Files[2].URL ||
			len(a.VideoURLs) != 1 || a.VideoURLs[0] != a.Files[3].URL || len(a.AudioURLs) != 1 || a.AudioURLs[0] != a.Files[4].URL {
			t.Errorf("grouped URLs wrong: %s", r.Body)
		}
		if files, rows := s.MediaOnDisk(t); files != 5 || rows != 5 {
			t.Errorf("stored %d files and %d rows, want 5 and 5", files, rows)
		}

		// The call log shows the upload with its bytes and its number of files.
		row := callRow(t, s, r.Header.Get("X-Request-Id"))
		total := len(first) + len(cat) + len(dog) + len(clip) + len(tune)
		if row.Path != "/uploads/v1/files" || row.Status != 200 || row.Files != 5 || row.BytesIn <= int64(total) || row.AccountID == nil || *row.AccountID != acct.ID {
			t.Errorf("call log row %+v: want status 200, 5 files, more than %d bytes in (files plus framing)", row, total)
		}
	})
}

// TestUploadRefusals: every limit of docs/api.md and every bad part is a 4xx with its code, and a
// refused upload leaves no file and no row behind — even when files before the bad one were stored.
func TestUploadRefusals(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "0")
		img := testkit.PNG(t, 8, 8)
		wav := testkit.WAV(10)
		n := func(k int, name, file string, b []byte) []testkit.Part {
			out := make([]testkit.Part, k)
			for i := range out {
				out[i] = testkit.File(name, file, b)
			}
			return out
		}
		mp4 := func() testkit.Part {
			return testkit.Part{Name: "video_files", Filename: "v.mp4", Body: testkit.MP4Stream(2048)}
		}
		cases := []struct {
			name   string
			query  string
			parts  []testkit.Part
			status int
			code   string
			param  string
		}{
			{"10 images", "", n(10, "image_files", "a.png", img), 400, "too_many_images", "image_files"},
			{"9 images and a first frame", "", append(n(9, "image_files", "a.png", img), testkit.File("input_reference", "f.png", img)), 400, "too_many_images", "input_reference"},
			{"4 videos", "", []testkit.Part{mp4(), mp4(), mp4(), mp4()}, 400, "too_many_videos", "video_files"},
			{"4 audio files", "", n(4, "audio_files", "a.wav", wav), 400, "too_many_audios", "audio_files"},
			{"two first frames", "", n(2, "input_reference", "a.png", img), 400, "invalid_request", "input_reference"},
			{"image over 20 MiB", "", []testkit.Part{testkit.File("image_files", "ok.png", img), {Name: "image_files", Filename: "big.png", Body: testkit.PNGStream(20<<20 + 1)}}, 413, "file_too_large", "image_files[1]"},
			{"video over 100 MiB", "", []testkit.Part{{Name: "video_files", Filename: "big.mp4", Body: testkit.MP4Stream(100<<20 + 1)}}, 413, "file_too_large", "video_files[0]"},
			{"audio over 50 MiB", "", []testkit.Part{{Name: "audio_files", Filename: "big.wav", Body: io.MultiReader(strings.NewReader(string(wav)), io.LimitReader(testkit.Zeros{}, 50<<20))}}, 413, "file_too_large", "audio_files[0]"},
			{"SVG image", "", []testkit.Part{testkit.File("image_files", "x.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`))}, 415, "unsupported_media_type", "image_files[0]"},
			{"HTML named .png", "", []testkit.Part{testkit.File("image_files", "x.png", []byte(`<!DOCTYPE html><html><script>alert(1)</script></html>`))}, 415, "unsupported_media_type", "image_files[0]"},
			{"image in the video part", "", []testkit.Part{testkit.File("video_files", "x.mp4", img)}, 415, "unsupported_media_type", "video_files[0]"},
			{"video in the audio part", "", []testkit.Part{{Name: "audio_files", Filename: "x.wav", Body: testkit.MP4Stream(4096)}}, 415, "unsupported_media_type", "audio_files[0]"},
			{"PDF", "", []testkit.Part{testkit.File("image_files", "x.png", []byte("%PDF-1.7\n1 0 obj\n"))}, 415, "unsupported_media_type", "image_files[0]"},
			{"good file then a bad one", "", []testkit.Part{testkit.File("image_files", "a.png", img), testkit.File("audio_files", "a.wav", wav), testkit.File("image_files", "x.svg", []byte(`<svg/>`))}, 415, "unsupported_media_type", "image_files[1]"},
			{"unknown part", "", []testkit.Part{testkit.File("image_files", "a.png", img), testkit.File("files", "a.png", img)}, 400, "unknown_field", "files"},
			{"empty file", "", []testkit.Part{testkit.File("image_files", "a.png", nil)}, 400, "invalid_request", "image_files[0]"},
			{"no files", "", nil, 400, "missing_field", ""},
			{"unknown model", "?model=sora-9", []testkit.Part{testkit.File("image_files", "a.png", img)}, 400, "invalid_model", "model"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := s.Upload(t, acct.Key, tc.query, tc.parts...)
				if r.Status != tc.status || r.ErrorCode() != tc.code || errorParam(r) != tc.param {
					t.Fatalf("got %d %s (param %q), want %d %s (param %q): %s", r.Status, r.ErrorCode(), errorParam(r), tc.status, tc.code, tc.param, r.Body)
				}
				if files, rows := s.MediaOnDisk(t); files != 0 || rows != 0 {
					t.Fatalf("a refused upload left %d files and %d rows", files, rows)
				}
			})
		}

		t.Run("not multipart", func(t *testing.T) {
			r := s.Do(t, "POST", "/uploads/v1/files", acct.Key, `{"image_files":[]}`)
			if r.Status != 415 || r.ErrorCode() != "unsupported_content_type" {
				t.Fatalf("got %d %s", r.Status, r.Body)
			}
		})
		t.Run("no key", func(t *testing.T) {
			r := s.Upload(t, "", "", testkit.File("image_files", "a.png", img))
			if r.Status != 401 || r.ErrorCode() != "missing_api_key" {
				t.Fatalf("got %d %s", r.Status, r.Body)
			}
		})
		t.Run("announced body over 300 MiB", func(t *testing.T) {
			// Refused from the headers: only the first bytes of the body are sent.
			r := rawPost(t, s.URL, "/uploads/v1/files", acct.Key, "multipart/form-data; boundary=xyz", 302<<20)
			if r.Status != 413 || !strings.Contains(string(r.Body), `"request_too_large"`) {
				t.Fatalf("got %d %s", r.Status, r.Body)
			}
		})
	})
}

// TestUploadOverRequestLimitWhileStreaming: without a Content-Length, the 300 MiB request limit holds
// while the body streams; the files stored before the limit was crossed are deleted. (SQLite only: the
// storage path is the same on both databases, and 300 MiB twice would slow the suite.)
func TestUploadOverRequestLimitWhileStreaming(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	acct := s.NewAccount(t, "0")
	parts := []testkit.Part{
		{Name: "video_files", Filename: "a.mp4", Body: testkit.MP4Stream(100 << 20)},
		{Name: "video_files", Filename: "b.mp4", Body: testkit.MP4Stream(100 << 20)},
		{Name: "video_files", Filename: "c.mp4", Body: testkit.MP4Stream(100 << 20)},
		{Name: "image_files", Filename: "d.png", Body: testkit.PNGStream(1 << 20)},
	}
	r := s.Upload(t, acct.Key, "", parts...)
	if r.Status != 413 || r.ErrorCode() != "request_too_large" {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	if files, rows := s.MediaOnDisk(t); files != 0 || rows != 0 {
		t.Fatalf("a refused upload left %d files and %d rows", files, rows)
	}
}

func errorParam(r *testkit.Resp) string {
	var m struct {
		Error struct {
			Param *string `json:"param"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.Body, &m)
	if m.Error.Param == nil {
		return ""
	}
	return *m.Error.Param
}

// get fetches an absolute URL without following redirects.
func get(t *testing.T, u string) *testkit.Resp {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &testkit.Resp{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// callRow waits for the call-log row of a request (the log is written in batches).
func callRow(t *testing.T, s *testkit.Server, requestID string) models.CallLog {
	t.Helper()
	var rows []models.CallLog
	testkit.Eventually(t, 10*time.Second, "a call-log row for request "+requestID, func() bool {
		rows = nil
		if err := s.DB.R.Where("request_id = ?", requestID).Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		return len(rows) == 1
	})
	return rows[0]
}

// TestUploadWithoutLengthOrChunks: a POST with neither Content-Length nor chunked encoding has no body;
// it is a 400, never a crash.
func TestUploadWithoutLengthOrChunks(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	acct := s.NewAccount(t, "0")
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /uploads/v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: multipart/form-data; boundary=xyz\r\n\r\n", acct.Key)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 {
		t.Fatalf("got %d %s, want 400", resp.StatusCode, body)
	}
}

// TestPageBodyTooLarge: a form over 1 MiB is refused with a 413 page, not a 500.
func TestPageBodyTooLarge(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	r := rawPost(t, s.URL, "/signin", "", "application/x-www-form-urlencoded", 2<<20)
	if r.Status != 413 || !strings.Contains(string(r.Body), "<html") {
		t.Fatalf("got %d %s, want a 413 page", r.Status, r.Body)
	}
}
