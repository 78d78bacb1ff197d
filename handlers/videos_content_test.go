package handlers_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"math"
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

	"golang.org/x/image/draw"

	"videogen/internal/server"
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
		checkStills(t, s, acct.Key, id, r.Body, 992, 432)

		// variant=video is the default (an empty variant too); an unknown variant is refused, never answered
		// with the MP4.
		for _, q := range []string{"?variant=video", "?variant="} {
			if v := s.Do(t, "GET", "/v1/videos/"+id+"/content"+q, acct.Key, nil); v.Status != 200 || string(v.Body) != string(r.Body) {
				t.Fatalf("%s: %d %s, %d bytes", q, v.Status, v.Header.Get("Content-Type"), len(v.Body))
			}
		}
		for _, bad := range []string{"Thumbnail", "poster", "video,thumbnail", "%00"} {
			v := s.Do(t, "GET", "/v1/videos/"+id+"/content?variant="+bad, acct.Key, nil)
			if v.Status != 400 || v.ErrorCode() != "invalid_request" || !strings.Contains(string(v.Body), `"param":"variant"`) {
				t.Fatalf("variant=%s: %d %s", bad, v.Status, v.Body)
			}
		}
		if v := s.Do(t, "GET", "/v1/videos/"+failed["id"].(string)+"/content?variant=thumbnail", acct.Key, nil); v.Status != 409 {
			t.Fatalf("thumbnail of a failed video: %d %s", v.Status, v.Body)
		}
	})
}

// checkStills downloads the video's thumbnail and spritesheet and checks what they show: the thumbnail is
// the first frame at the video's size (against ffmpeg's decoding of the MP4), the spritesheet a 4x4 grid
// of frames 256 pixels wide whose first tile is that frame and whose tiles are not all the same.
func checkStills(t *testing.T, s *testkit.Server, key, id string, video []byte, width, height int) {
	t.Helper()
	first := firstFrame(t, video)
	thumb := still(t, s, key, id, "thumbnail")
	if b := thumb.Bounds(); b.Dx() != width || b.Dy() != height {
		t.Fatalf("thumbnail is %v, want %dx%d", b, width, height)
	}
	if d := meanDiff(thumb, first, thumb.Bounds()); d > 4 {
		t.Fatalf("the thumbnail differs from the video's first frame by %.1f per channel on average", d)
	}
	sheet := still(t, s, key, id, "spritesheet")
	tw, th := 256, (height*256/width+1)&^1
	if b := sheet.Bounds(); b.Dx() != 4*tw || b.Dy() != 4*th {
		t.Fatalf("spritesheet is %v, want 4x4 tiles of %dx%d", b, tw, th)
	}
	small := image.NewRGBA(image.Rect(0, 0, tw, th))
	draw.CatmullRom.Scale(small, small.Bounds(), first, first.Bounds(), draw.Src, nil)
	if d := meanDiff(sheet, small, small.Bounds()); d > 6 {
		t.Fatalf("the spritesheet's first tile differs from the first frame by %.1f", d)
	}
	last := image.Rect(3*tw, 3*th, 4*tw, 4*th)
	if d := meanDiff(sheet.(interface {
		SubImage(image.Rectangle) image.Image
	}).SubImage(last), small, small.Bounds()); d < 0.5 {
		t.Fatalf("the spritesheet's last tile is the first frame again (%.2f): the grid does not move through the video", d)
	}
}

// still downloads a variant and decodes it as the image type it says it is.
func still(t *testing.T, s *testkit.Server, key, id, variant string) image.Image {
	t.Helper()
	r := s.Do(t, "GET", "/v1/videos/"+id+"/content?variant="+variant, key, nil)
	if r.Status != 200 || r.Header.Get("Content-Type") != "image/jpeg" || r.Header.Get("Content-Disposition") != `attachment; filename="`+id+"."+variant+`.jpg"` {
		t.Fatalf("%s: %d %q %q %.200s", variant, r.Status, r.Header.Get("Content-Type"), r.Header.Get("Content-Disposition"), r.Body)
	}
	if cl, _ := strconv.Atoi(r.Header.Get("Content-Length")); cl != len(r.Body) {
		t.Fatalf("%s: Content-Length %q for %d bytes", variant, r.Header.Get("Content-Length"), len(r.Body))
	}
	img, err := jpeg.Decode(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("%s is not a JPEG: %v", variant, err)
	}
	return img
}

// firstFrame decodes the video's first frame with ffmpeg, as a viewer would see it (with the colour
// matrix and range the stream declares).
func firstFrame(t *testing.T, video []byte) image.Image {
	t.Helper()
	path := filepath.Join(t.TempDir(), "first.mp4")
	if err := os.WriteFile(path, video, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ffmpeg", "-v", "error", "-i", path, "-frames:v", "1",
		"-vf", "scale=in_color_matrix=bt709:in_range=limited,format=rgb24", "-f", "image2pipe", "-c:v", "png", "-").Output()
	if err != nil {
		t.Fatalf("ffmpeg first frame: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// meanDiff is the mean absolute difference per RGB channel (0-255) of a and b over r, each read from
// its own origin.
func meanDiff(a, b image.Image, r image.Rectangle) float64 {
	ao, bo := a.Bounds().Min, b.Bounds().Min
	var sum, n float64
	for y := 0; y < r.Dy(); y++ {
		for x := 0; x < r.Dx(); x++ {
			r1, g1, b1, _ := a.At(ao.X+x, ao.Y+y).RGBA()
			r2, g2, b2, _ := b.At(bo.X+x, bo.Y+y).RGBA()
			for _, d := range []int{int(r1>>8) - int(r2>>8), int(g1>>8) - int(g2>>8), int(b1>>8) - int(b2>>8)} {
				sum += math.Abs(float64(d))
				n++
			}
		}
	}
	return sum / n
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
	// The service's clock runs with real time, ahead by however far the test moves it.
	var ahead atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	s := testkit.StartWith(t, dbURL, map[string]string{"OUTPUT_RETENTION": "1h", "MEDIA_SWEEP_INTERVAL": "100ms"}, server.Options{Now: clock})
	acct := s.NewAccount(t, "10")
	id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "short-lived"})["id"].(string)
	done := s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed")
	if r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil); r.Status != 200 {
		t.Fatalf("before expiry: %d", r.Status)
	}
	expires := time.Unix(int64(done["expires_at"].(float64)), 0)
	if d := time.Until(expires); d > time.Hour+3*time.Second || d < time.Hour-time.Minute {
		t.Fatalf("expires_at %v is not completed_at + OUTPUT_RETENTION", expires)
	}
	blobDir := filepath.Join(s.Cfg.DataDir, "blobs", "outputs", id)
	if entries, _ := os.ReadDir(blobDir); len(entries) != 3 {
		t.Fatalf("stored beside the task: %v, want the video, its thumbnail and its spritesheet", entries)
	}
	// A second before expiry the video is still there; a second after, it is gone.
	ahead.Store(int64(time.Until(expires) - time.Second))
	if r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil); r.Status != 200 {
		t.Fatalf("a second before expiry: %d %s", r.Status, r.Body)
	}
	ahead.Store(int64(time.Until(expires) + time.Second))
	for _, variant := range []string{"video", "thumbnail", "spritesheet"} {
		r := s.Do(t, "GET", "/v1/videos/"+id+"/content?variant="+variant, acct.Key, nil)
		if r.Status != 404 || r.ErrorCode() != "video_expired" {
			t.Fatalf("%s after expiry: %d %s", variant, r.Status, r.Body)
		}
	}
	// The janitor deleted the stored files, the stills with the video.
	var entries []os.DirEntry
	testkit.Eventually(t, 10*time.Second, "the janitor deletes the expired output and its stills", func() bool {
		entries, _ = os.ReadDir(blobDir)
		return len(entries) == 0
	}, func() string { return fmt.Sprintf("still stored: %v", entries) })
	if v := s.Do(t, "GET", "/v1/videos/"+id, acct.Key, nil).JSON(t); v["status"] != "completed" {
		t.Fatalf("task after expiry %v", v)
	}
}

// TestDownloadStreams serves a 256 MB stored video and shows the server's heap does not grow with it.
func TestDownloadStreams(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), nil)
	acct := s.NewAccount(t, "10")
	id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "big"})["id"].(string)
	s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed") // generated, charged and stored as any video
	// Its output is then replaced by a far bigger one.
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
	if err := s.DB.W.Exec("UPDATE tasks SET output_key = ?, output_bytes = ? WHERE id = ?", key, size, id).Error; err != nil {
		t.Fatal(err)
	}

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
