package handlers_test

import (
	"context"
	"html"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// TestTaskPageShowsInputs: a task's page shows the media it was created with, each labelled by what it
// was for (first frame, last frame, reference image, reference video, audio), through signed /media links of this origin
// that answer the file's bytes without a session. Once the janitor has deleted the files after their
// retention, the page says so for each, and links to none.
func TestTaskPageShowsInputs(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"TEST_TOPUPS": "1"})
		b := signUpVerified(t, s, "inputs@example.com")
		addFunds(t, b, "10")
		key := createKey(t, b, "inputs")
		first, last, style, audio := testkit.PNG(t, 64, 48), testkit.PNG(t, 40, 30), testkit.PNG(t, 32, 32), testkit.WAV(800)
		clip, err := io.ReadAll(testkit.MP4Stream(4096))
		if err != nil {
			t.Fatal(err)
		}
		up := s.Upload(t, key, "", testkit.File("input_reference", "first.png", first), testkit.File("image_files", "last.png", last),
			testkit.File("image_files", "style.png", style), testkit.File("video_files", "motion.mp4", clip),
			testkit.File("audio_files", "voice.wav", audio)).Answer(t)
		id := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-720p", "prompt": "the boat sails off",
			"start_image_url": up.StartImageURL, "end_image_url": up.ImageURLs[0], "image_urls": []string{up.ImageURLs[1]},
			"video_urls": up.VideoURLs, "audio_urls": up.AudioURLs})["id"].(string)
		s.WaitStatus(t, key, id, 20*time.Second, "completed")

		page := b.get("/console/tasks/" + id)
		page.contains(t, `<h2 id="inputs">Inputs</h2>`, "3 images, 1 video, 1 audio file")
		type shown struct{ label, src string }
		var got []shown
		for _, m := range regexp.MustCompile(`<img src="([^"]+)" alt="([^"]+)"|<(?:video|audio) [^>]*src="([^"]+)" aria-label="([^"]+)"`).FindAllStringSubmatch(page.Body, -1) {
			if m[1] != "" {
				got = append(got, shown{html.UnescapeString(m[2]), html.UnescapeString(m[1])})
			} else {
				got = append(got, shown{html.UnescapeString(m[4]), html.UnescapeString(m[3])})
			}
		}
		want := []struct {
			label string
			bytes []byte
		}{{"First frame", first}, {"Last frame", last}, {"Reference image 1", style}, {"Reference video 1", clip}, {"Audio 1", audio}}
		if len(got) != len(want) {
			t.Fatalf("the page shows %q, want %d labelled inputs", got, len(want))
		}
		for i, w := range want {
			if got[i].label != w.label || !strings.HasPrefix(got[i].src, "/media/file_") || !strings.Contains(got[i].src, "&sig=") {
				t.Errorf("input %d: %+v, want %q with a signed /media link", i+1, got[i], w.label)
				continue
			}
			// The link is the authorization: no session is needed, as for any media URL.
			if r := get(t, s.URL+got[i].src); r.Status != 200 || string(r.Body) != string(w.bytes) {
				t.Errorf("%s's link answers %d with %d bytes, want 200 with the %d uploaded", w.label, r.Status, len(r.Body), len(w.bytes))
			}
		}
		page.lacks(t, "deleted after retention")

		// After the retention the janitor deletes them; the page says so.
		if n, err := s.Media.Sweep(context.Background(), time.Now().Add(49*time.Hour)); err != nil || n != 5 {
			t.Fatalf("the sweep after the retention deleted %d files (%v), want the 5 inputs", n, err)
		}
		after := b.get("/console/tasks/" + id)
		if n := strings.Count(after.Body, "deleted after retention"); n != 5 {
			t.Errorf("after the retention the page says %d times that an input was deleted, want 5", n)
		}
		after.contains(t, "First frame", "Last frame", "Reference image 1", "Reference video 1", "Audio 1")
		after.lacks(t, "/media/")
		if r := get(t, s.URL+got[0].src); r.Status != 404 {
			t.Errorf("the first frame's link after the retention: %d", r.Status)
		}
	})
}
