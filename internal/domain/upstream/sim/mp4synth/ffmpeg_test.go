package mp4synth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// requireTool fails (never skips) when an external checker is missing: the
// decoder is the proof that the files are valid, so CI must install it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required for these tests (apt-get install ffmpeg): %v", name, err)
	}
	return path
}

// writeFile synthesizes p into a temporary file and returns its path.
func writeFile(t *testing.T, p Params) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("%dx%d_%ds.mp4", p.Width, p.Height, p.Seconds))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	n, err := Write(w, p)
	if err != nil {
		t.Fatalf("Write(%+v): %v", p, err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != n {
		t.Fatalf("file size %v, Write returned %d (%v)", st.Size(), n, err)
	}
	return path
}

// run executes a command and returns stdout and stderr.
func run(t *testing.T, name string, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(requireTool(t, name), args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}

type probe struct {
	Streams []struct {
		CodecType    string `json:"codec_type"`
		CodecName    string `json:"codec_name"`
		Profile      string `json:"profile"`
		Width        int    `json:"width"`
		Height       int    `json:"height"`
		PixFmt       string `json:"pix_fmt"`
		RFrameRate   string `json:"r_frame_rate"`
		AvgFrameRate string `json:"avg_frame_rate"`
		Duration     string `json:"duration"`
		NbFrames     string `json:"nb_frames"`
		NbReadFrames string `json:"nb_read_frames"`
	} `json:"streams"`
	Format struct {
		Duration string `json:"duration"`
		Size     string `json:"size"`
	} `json:"format"`
}

// productSizes is the product's size table: 480p, 720p and 1080p tiers for each
// aspect ratio.
var productSizes = []struct {
	ratio         string
	width, height int
}{
	{"21:9", 992, 432}, {"21:9", 1470, 630}, {"21:9", 2206, 946},
	{"16:9", 864, 496}, {"16:9", 1280, 720}, {"16:9", 1920, 1080},
	{"4:3", 752, 560}, {"4:3", 1112, 834}, {"4:3", 1664, 1248},
	{"1:1", 640, 640}, {"1:1", 960, 960}, {"1:1", 1440, 1440},
	{"3:4", 560, 752}, {"3:4", 834, 1112}, {"3:4", 1248, 1664},
	{"9:16", 496, 864}, {"9:16", 720, 1280}, {"9:16", 1080, 1920},
}

// TestFFmpegDecodesAndProbes is the end-to-end proof: ffmpeg decodes every
// frame without a single error message, and ffprobe reports exactly the
// requested size, frame count, rate and duration.
func TestFFmpegDecodesAndProbes(t *testing.T) {
	t.Parallel()
	requireTool(t, "ffmpeg")
	requireTool(t, "ffprobe")
	var cases []Params
	for i, s := range productSizes {
		cases = append(cases, Params{Width: s.width, Height: s.height, Seconds: 4, Seed: int64(i)})
	}
	cases = append(cases,
		Params{Width: 2206, Height: 946, Seconds: 15},
		Params{Width: 1920, Height: 1080, Seconds: 15, Seed: 77},
		Params{Width: 640, Height: 640, Seconds: 1},
		Params{Width: 752, Height: 560, Seconds: 7},
		Params{Width: 16, Height: 16, Seconds: 2},
		Params{Width: 18, Height: 4096, Seconds: 1, FPS: 30},
		Params{Width: 330, Height: 186, Seconds: 3, FPS: 60},
	)
	for _, p := range cases {
		fps := p.FPS
		if fps == 0 {
			fps = 24
		}
		t.Run(fmt.Sprintf("%dx%d_%ds_%dfps", p.Width, p.Height, p.Seconds, fps), func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, p)

			_, stderr, err := run(t, "ffmpeg", "-nostdin", "-v", "error", "-xerror", "-i", path, "-f", "null", "-")
			if err != nil || len(stderr) != 0 {
				t.Fatalf("ffmpeg decode failed: %v\nstderr: %s", err, stderr)
			}

			out, stderr, err := run(t, "ffprobe", "-v", "error", "-count_frames", "-show_streams", "-show_format", "-of", "json", path)
			if err != nil || len(stderr) != 0 {
				t.Fatalf("ffprobe failed: %v\nstderr: %s", err, stderr)
			}
			var pr probe
			if err := json.Unmarshal(out, &pr); err != nil {
				t.Fatalf("ffprobe json: %v\n%s", err, out)
			}
			if len(pr.Streams) != 1 {
				t.Fatalf("%d streams, want exactly one video stream (no audio)", len(pr.Streams))
			}
			s := pr.Streams[0]
			frames := strconv.Itoa(p.Seconds * fps)
			rate := fmt.Sprintf("%d/1", fps)
			checks := []struct{ name, got, want string }{
				{"codec_type", s.CodecType, "video"},
				{"codec_name", s.CodecName, "h264"},
				{"profile", s.Profile, "Constrained Baseline"},
				{"pix_fmt", s.PixFmt, "yuv420p"},
				{"width", strconv.Itoa(s.Width), strconv.Itoa(p.Width)},
				{"height", strconv.Itoa(s.Height), strconv.Itoa(p.Height)},
				{"nb_read_frames", s.NbReadFrames, frames},
				{"nb_frames", s.NbFrames, frames},
				{"r_frame_rate", s.RFrameRate, rate},
				{"avg_frame_rate", s.AvgFrameRate, rate},
			}
			for _, c := range checks {
				if c.got != c.want {
					t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
				}
			}
			for name, d := range map[string]string{"stream duration": s.Duration, "format duration": pr.Format.Duration} {
				f, err := strconv.ParseFloat(d, 64)
				if err != nil || math.Abs(f-float64(p.Seconds)) > 0.05 {
					t.Errorf("%s = %q, want %d s", name, d, p.Seconds)
				}
			}
		})
	}
}

// TestFramesDiffer checks that the video is not a still picture.
func TestFramesDiffer(t *testing.T) {
	t.Parallel()
	p := Params{Width: 864, Height: 496, Seconds: 4, Seed: 1}
	path := writeFile(t, p)
	out, stderr, err := run(t, "ffmpeg", "-nostdin", "-v", "error", "-i", path, "-f", "framemd5", "-")
	if err != nil || len(stderr) != 0 {
		t.Fatalf("ffmpeg framemd5: %v\n%s", err, stderr)
	}
	var hashes []string
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(strings.TrimSpace(line), ",")
		hashes = append(hashes, strings.TrimSpace(f[len(f)-1]))
	}
	if len(hashes) != p.Seconds*24 {
		t.Fatalf("framemd5 listed %d frames, want %d", len(hashes), p.Seconds*24)
	}
	distinct := map[string]bool{}
	for _, h := range hashes {
		distinct[h] = true
	}
	if hashes[0] == hashes[47] {
		t.Error("frames 0 and 47 are identical")
	}
	if len(distinct) < len(hashes)*9/10 {
		t.Errorf("only %d distinct frames out of %d", len(distinct), len(hashes))
	}
}

// TestDecodedPixelsExact decodes every frame and compares all three planes
// with what picture.go draws. This is much stronger than "ffmpeg did not
// complain": it proves I_PCM layout, cropping and P_Skip copying are right,
// because any slip would change pixels. Sizes are not multiples of 16.
func TestDecodedPixelsExact(t *testing.T) {
	t.Parallel()
	for _, p := range []Params{
		{Width: 200, Height: 120, Seconds: 2, Seed: 4},
		{Width: 1470, Height: 630, Seconds: 1, Seed: 8},
	} {
		t.Run(fmt.Sprintf("%dx%d", p.Width, p.Height), func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, p)
			cmd := exec.Command(requireTool(t, "ffmpeg"), "-nostdin", "-v", "error", "-i", path,
				"-f", "rawvideo", "-pix_fmt", "yuv420p", "-")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := false
			defer func() {
				if !done { // a failed check stops reading: unblock ffmpeg
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			}()

			w, h := p.Width, p.Height
			got := make([]byte, w*h*3/2)
			r := bufio.NewReaderSize(stdout, 1<<20)
			for n := range p.Seconds * 24 {
				if _, err := io.ReadFull(r, got); err != nil {
					t.Fatalf("frame %d: reading decoded video: %v (stderr: %s)", n, err, stderr.Bytes())
				}
				want := framePlanes(t, p, n)
				if i := firstDiff(got, want); i >= 0 {
					t.Fatalf("frame %d: decoded picture differs at %s", n, planePos(i, w, h))
				}
			}
			if extra, _ := io.Copy(io.Discard, r); extra != 0 {
				t.Errorf("%d bytes of extra decoded video", extra)
			}
			done = true
			if err := cmd.Wait(); err != nil || stderr.Len() != 0 {
				t.Fatalf("ffmpeg: %v\n%s", err, stderr.Bytes())
			}
		})
	}
}

// framePlanes is frameYCbCr(p, n) as packed yuv420p planes, the way ffmpeg writes a decoded frame: the
// test proves that what Frame draws from (the simulator's thumbnails) is what a decoder shows.
func framePlanes(t *testing.T, p Params, n int) []byte {
	t.Helper()
	img, err := frameYCbCr(p, n)
	if err != nil {
		t.Fatal(err)
	}
	w, h := p.Width, p.Height
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("frame %d is %v, want %dx%d", n, b, w, h)
	}
	out := make([]byte, 0, w*h*3/2)
	for y := range h {
		out = append(out, img.Y[img.YOffset(0, y):][:w]...)
	}
	for _, plane := range [][]byte{img.Cb, img.Cr} {
		for y := 0; y < h; y += 2 {
			out = append(out, plane[img.COffset(0, y):][:w/2]...)
		}
	}
	return out
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func planePos(i, w, h int) string {
	switch {
	case i < w*h:
		return fmt.Sprintf("Y (%d,%d)", i%w, i/w)
	case i < w*h*5/4:
		i -= w * h
		return fmt.Sprintf("Cb (%d,%d)", i%(w/2), i/(w/2))
	default:
		i -= w * h * 5 / 4
		return fmt.Sprintf("Cr (%d,%d)", i%(w/2), i/(w/2))
	}
}
