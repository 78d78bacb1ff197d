package handlers_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/testkit"
)

func TestDownloadVideo(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"SIM_DURATION": "1500ms"})
		acct := s.NewAccount(t, "100")
		notReady := func(id, when string) {
			t.Helper()
			r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil)
			if r.Status != 409 || r.ErrorCode() != "video_not_ready" || r.Header.Get("x-should-retry") != "false" {
				t.Fatalf("content while %s: %d %s (x-should-retry %q)", when, r.Status, r.Body, r.Header.Get("x-should-retry"))
			}
		}
		v := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a kite", "seconds": 5, "aspect_ratio": "21:9"})
		id := v["id"].(string)
		notReady(id, "queued")
		if v := s.WaitStatus(t, acct.Key, id, 20*time.Second, "in_progress", "completed"); v["status"] != "in_progress" {
			t.Fatal("the task was never seen in progress")
		}
		notReady(id, "in progress")
		done := s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed")
		if done["progress"] != 100.0 || done["completed_at"] == nil || done["expires_at"] == nil {
			t.Fatalf("completed object %v", done)
		}

		failed := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "[sim:fail] a kite"})
		s.WaitStatus(t, acct.Key, failed["id"].(string), 20*time.Second, "failed")
		notReady(failed["id"].(string), "failed")
		if r := s.Do(t, "GET", "/v1/videos/"+failed["id"].(string)+"/content", acct.Key, nil); !strings.Contains(string(r.Body), "failed") || strings.Contains(string(r.Body), "Keep polling") {
			t.Fatalf("a failed video's download must say it failed, not to keep polling: %s", r.Body)
		}

		// Range is ignored: the answer is 200 with the whole file.
		r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil, "Range", "bytes=0-99")
		if r.Status != 200 || r.Header.Get("Content-Type") != "video/mp4" {
			t.Fatalf("download: %d %s %q", r.Status, r.Header.Get("Content-Type"), r.Body[:min(len(r.Body), 200)])
		}
		if cl, _ := strconv.Atoi(r.Header.Get("Content-Length")); cl != len(r.Body) || cl < 1000 || r.Header.Get("Content-Range") != "" {
			t.Fatalf("Content-Length %q for %d bytes, Content-Range %q", r.Header.Get("Content-Length"), len(r.Body), r.Header.Get("Content-Range"))
		}
		if want := *testkit.Task(t, s.DB, id).OutputBytes; int64(len(r.Body)) != want {
			t.Fatalf("downloaded %d bytes, stored %d", len(r.Body), want)
		}
		probe(t, r.Body, 992, 432, 5)
	})
}

// probe decodes every frame with ffmpeg and checks the stream's size, frame count and duration.
func probe(t *testing.T, video []byte, width, height, seconds int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "out.mp4")
	if err := os.WriteFile(path, video, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ffmpeg", "-v", "error", "-xerror", "-i", path, "-f", "null", "-").CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("ffmpeg could not decode every frame (ffmpeg is required: make test installs it): %v %s", err, out)
	}
	out, err := exec.Command("ffprobe", "-v", "error", "-count_frames", "-show_streams", "-show_format", "-of", "json", path).Output()
	if err != nil {
		t.Fatalf("ffprobe: %v", err)
	}
	var p struct {
		Streams []struct {
			CodecType    string `json:"codec_type"`
			CodecName    string `json:"codec_name"`
			Width        int    `json:"width"`
			Height       int    `json:"height"`
			NbReadFrames string `json:"nb_read_frames"`
			AvgFrameRate string `json:"avg_frame_rate"`
		} `json:"streams"`
		Format struct {
			Duration string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Streams) != 1 {
		t.Fatalf("%d streams, want one video stream (the simulator's files have no audio)", len(p.Streams))
	}
	st := p.Streams[0]
	dur, _ := strconv.ParseFloat(p.Format.Duration, 64)
	if st.CodecType != "video" || st.CodecName != "h264" || st.Width != width || st.Height != height ||
		st.NbReadFrames != strconv.Itoa(seconds*24) || st.AvgFrameRate != "24/1" || dur < float64(seconds)-0.05 || dur > float64(seconds)+0.05 {
		t.Fatalf("stream %+v duration %s, want h264 %dx%d, %d frames at 24/1, %d s", st, p.Format.Duration, width, height, seconds*24, seconds)
	}
}

func TestDownloadExpires(t *testing.T) {
	testkit.EachDB(t, testDownloadExpires)
}

func testDownloadExpires(t *testing.T, dbURL string) {
	s := testkit.Start(t, dbURL, map[string]string{"OUTPUT_RETENTION": "1500ms", "MEDIA_SWEEP_INTERVAL": "100ms"})
	acct := s.NewAccount(t, "10")
	id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "short-lived"})["id"].(string)
	done := s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed")
	if r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil); r.Status != 200 {
		t.Fatalf("before expiry: %d", r.Status)
	}
	expires := time.Unix(int64(done["expires_at"].(float64)), 0)
	if d := time.Until(expires); d > 3*time.Second {
		t.Fatalf("expires_at %v is not completed_at + OUTPUT_RETENTION", expires)
	}
	blobDir := filepath.Join(s.Cfg.DataDir, "blobs", "outputs", id)
	time.Sleep(time.Until(expires) + 1200*time.Millisecond)
	r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil)
	if r.Status != 404 || r.ErrorCode() != "video_expired" {
		t.Fatalf("after expiry: %d %s", r.Status, r.Body)
	}
	// The janitor deleted the stored file.
	deadline := time.Now().Add(5 * time.Second)
	for {
		entries, _ := os.ReadDir(blobDir)
		if len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired output still stored: %v", entries)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v := s.Do(t, "GET", "/v1/videos/"+id, acct.Key, nil).JSON(t); v["status"] != "completed" {
		t.Fatalf("task after expiry %v", v)
	}
}

// TestDownloadStreams serves a 256 MB stored video and shows the server's heap does not grow with it.
func TestDownloadStreams(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	acct := s.NewAccount(t, "10")
	id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "big"})["id"].(string)
	const size = 256 << 20
	key := "outputs/" + id + "/big.mp4"
	path := filepath.Join(s.Cfg.DataDir, "blobs", filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil { // sparse: costs no disk
		t.Fatal(err)
	}
	s.DB.W.Exec("UPDATE tasks SET status = 'completed', output_key = ?, output_bytes = ?, expires_at = ? WHERE id = ?", key, size, time.Now().UTC().Add(time.Hour), id)

	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	stop := make(chan struct{})
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-stop:
				return
			default:
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	req, _ := http.NewRequest("GET", s.URL+"/v1/videos/"+id+"/content", nil)
	req.Header.Set("Authorization", "Bearer "+acct.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	close(stop)
	if err != nil || n != size || resp.ContentLength != size {
		t.Fatalf("read %d of %d (Content-Length %d): %v", n, size, resp.ContentLength, err)
	}
	growth := int64(peak.Load()) - int64(base)
	t.Logf("heap grew by %.1f MB while serving %d MB", float64(growth)/(1<<20), size>>20)
	if growth > 32<<20 {
		t.Fatalf("heap grew by %d MB while serving a %d MB file: the body is not streamed", growth>>20, size>>20)
	}
}
