package handlers_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestMediaLinks: a tampered, expired or unknown link is a bare 404, the same for all three, so a
// prober learns nothing; an intact link serves the file.
func TestMediaLinks(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "0")
		a := s.Upload(t, acct.Key, "", testkit.File("image_files", "a.png", testkit.PNG(t, 8, 8))).Answer(t)
		f := a.Files[0]
		if r := get(t, f.URL); r.Status != 200 {
			t.Fatalf("intact link: %d", r.Status)
		}
		exp := fmt.Sprint(f.ExpiresAt)
		other := "A" // a last character the signature does not already end with
		if strings.HasSuffix(f.URL, "A") {
			other = "B"
		}
		bad := map[string]string{
			"tampered signature":   f.URL[:len(f.URL)-1] + other,
			"no signature":         strings.Split(f.URL, "&sig=")[0],
			"expiry pushed out":    strings.Replace(f.URL, "exp="+exp, "exp="+fmt.Sprint(f.ExpiresAt+3600), 1),
			"expired":              s.Media.Signer.URL(f.ID, time.Now().Add(-time.Second)),
			"unknown file, signed": s.Media.Signer.URL("file_"+strings.Repeat("Z", 24), time.Now().Add(time.Hour)),
			"another id":           strings.Replace(f.URL, f.ID, "file_"+strings.Repeat("Z", 24), 1),
			"not an id":            s.URL + "/media/..%2Fvideogen.db?exp=" + exp + "&sig=x",
		}
		var first []byte
		for name, u := range bad {
			r := get(t, u)
			if r.Status != 404 || r.ErrorCode() != "not_found" {
				t.Errorf("%s: got %d %s, want 404 not_found", name, r.Status, r.Body)
			}
			if first == nil {
				first = r.Body
			} else if string(r.Body) != string(first) {
				t.Errorf("%s: body %s differs from %s: the answers must say nothing", name, r.Body, first)
			}
		}
	})
}

// TestQueuedTaskSubmitsFreshURLs: the upstream gets URLs signed at submission. Here a URL is valid for
// 2 s and the task waits ~3 s for the only upstream slot; with the URL from creation the simulator (which
// fetches every input like a real provider) would get a 404 and refuse the task.
func TestQueuedTaskSubmitsFreshURLs(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"MEDIA_URL_TTL": "2s", "SIM_CREDENTIALS": "1", "SIM_CONCURRENCY": "1", "SIM_DURATION": "3s"})
		acct := s.NewAccount(t, "10")
		img := testkit.PNG(t, 64, 64)
		a := s.Upload(t, acct.Key, "", testkit.File("image_files", "a.png", img)).Answer(t)
		blocker := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "holds the only slot"})
		withMedia := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "uses the image", "image_urls": a.ImageURLs})
		s.WaitStatus(t, acct.Key, blocker["id"].(string), 20*time.Second, "completed")
		done := s.WaitStatus(t, acct.Key, withMedia["id"].(string), 20*time.Second, "completed", "failed")
		if done["status"] != "completed" {
			t.Fatalf("the task that waited past its URL's expiry ended %v: %v", done["status"], done["error"])
		}
		if time.Now().Unix() <= a.ExpiresAt {
			t.Fatalf("the test did not outlast the creation-time URL (expires %d)", a.ExpiresAt)
		}
		var fetched int64
		for _, st := range s.Sim.Tasks() {
			if st.Prompt == "uses the image" {
				fetched = st.InputBytes
			}
		}
		if fetched != int64(len(img)) {
			t.Fatalf("the simulator fetched %d bytes of input, want the %d-byte image", fetched, len(img))
		}
	})
}

// TestMediaJanitor moves the clock past the retention: files no unfinished task uses are deleted
// (bytes, row and link), a file a queued task uses is kept until the task ends, and two instances
// sweeping at once delete each file exactly once without errors.
func TestMediaJanitor(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		env := map[string]string{"WORKERS": "false", "DATA_DIR": t.TempDir()}
		a := testkit.Start(t, dbURL, env)
		b := testkit.Start(t, dbURL, env) // a second instance on the same database and storage
		acct := a.NewAccount(t, "10")
		var parts []testkit.Part
		for i := 0; i < 9; i++ {
			parts = append(parts, testkit.File("image_files", fmt.Sprintf("%d.png", i), testkit.PNG(t, 8+i, 8)))
		}
		var urls []string
		for i := 0; i < 3; i++ {
			urls = append(urls, a.Upload(t, acct.Key, "", parts[i*3:i*3+3]...).Answer(t).ImageURLs...)
		}
		kept := urls[0]
		task := a.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "still queued", "image_urls": []string{kept}})

		ctx := context.Background()
		// Before the retention ends nothing goes.
		if n, err := a.Media.Sweep(ctx, time.Now().Add(47*time.Hour)); err != nil || n != 0 {
			t.Fatalf("sweep at 47 h deleted %d (%v), want 0", n, err)
		}
		// The leader's own retention sweep runs when it is elected (then every MEDIA_SWEEP_INTERVAL, a
		// minute): once it is done, only the sweeps below delete, and their count is theirs alone.
		testkit.Eventually(t, 20*time.Second, "the leader's first retention sweep", func() bool {
			var n int64
			a.DB.R.Table("river_job").Where("kind = ? AND state = ?", "media_retention", "completed").Count(&n)
			return n > 0
		})
		later := time.Now().Add(49 * time.Hour)
		var total atomic.Int64
		var wg sync.WaitGroup
		for _, inst := range []*testkit.Server{a, b, a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := inst.Media.Sweep(ctx, later)
				if err != nil {
					t.Errorf("sweep: %v", err)
				}
				total.Add(int64(n))
			}()
		}
		wg.Wait()
		if total.Load() != 8 {
			t.Fatalf("the sweeps deleted %d files together, want 8 (each once)", total.Load())
		}
		if files, rows := a.MediaOnDisk(t); files != 1 || rows != 1 {
			t.Fatalf("%d files and %d rows left, want the one the queued task uses", files, rows)
		}
		if r := get(t, kept); r.Status != 200 {
			t.Fatalf("the kept file answers %d", r.Status)
		}
		if r := get(t, urls[1]); r.Status != 404 {
			t.Fatalf("a deleted file answers %d", r.Status)
		}
		// A deleted file can no longer be used in a create.
		r := a.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "x", "image_urls": []string{urls[2]}})
		if r.Status != 400 || r.ErrorCode() != "invalid_media_url" {
			t.Fatalf("create with a deleted file: %d %s", r.Status, r.Body)
		}

		// Once the task is over, its file goes too (and its link row with it). It ends as any task does
		// (its reservation released, its place in the queue given up), so the ledger stays exact.
		ended := testkit.Task(t, a.DB, task["id"].(string))
		if err := a.Tasks.Fail(ctx, &ended, "test_ended", "ended by the test"); err != nil {
			t.Fatal(err)
		}
		if ended = testkit.Task(t, a.DB, ended.ID); ended.Status != tasks.Failed {
			t.Fatalf("the task did not end: %s", ended.Status)
		}
		if n, err := b.Media.Sweep(ctx, later); err != nil || n != 1 {
			t.Fatalf("sweep after the task ended deleted %d (%v), want 1", n, err)
		}
		if files, rows := a.MediaOnDisk(t); files != 0 || rows != 0 {
			t.Fatalf("%d files and %d rows left, want none", files, rows)
		}
		var links int64
		a.DB.R.Model(&models.TaskMedia{}).Count(&links)
		if links != 0 {
			t.Fatalf("%d task_media rows left", links)
		}
	})
}

// TestUploadStreamsToStorage uploads 300 MiB (three 100 MiB videos) and samples the heap while it runs:
// bodies stream to storage, so the peak stays far under 64 MiB. The server runs in this process, so the
// figure covers it (and the test's own client, which generates the files as it sends them).
func TestUploadStreamsToStorage(t *testing.T) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	metrics.Read(sample)
	before := sample[0].Value.Uint64()
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	acct := s.NewAccount(t, "0")
	runtime.GC()
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	t.Logf("heap objects %.1f MiB before the server started, %.1f MiB after", float64(before)/(1<<20), float64(base)/(1<<20))
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	const size = 100 << 20
	r := s.Upload(t, acct.Key, "",
		testkit.Part{Name: "video_files", Filename: "a.mp4", Body: testkit.MP4Stream(size)},
		testkit.Part{Name: "video_files", Filename: "b.mp4", Body: testkit.MP4Stream(size)},
		testkit.Part{Name: "video_files", Filename: "c.mp4", Body: testkit.MP4Stream(size)})
	close(stop)
	wg.Wait()
	a := r.Answer(t)
	h := sha256.New()
	_, _ = io.Copy(h, testkit.MP4Stream(size))
	for _, f := range a.Files {
		if f.Bytes != size || f.SHA256 != hex.EncodeToString(h.Sum(nil)) {
			t.Fatalf("stored %+v, want %d bytes with the generated hash", f, size)
		}
	}
	t.Logf("300 MiB upload: heap objects %.1f MiB before, peak %.1f MiB", float64(base)/(1<<20), float64(peak.Load())/(1<<20))
	// The server's heap is what the process holds beyond what it held before the server started (other
	// tests of this package leave their own live data behind). Both bounds: the server's whole heap at
	// its peak (the 64 MiB bound, its fixed buffers included) and what the upload itself added, which
	// is what streaming keeps small.
	// Other tests' live data may be freed while this one runs, so the peak can fall below a baseline:
	// the differences saturate at zero rather than wrapping around to an absurd figure.
	server, upload := peak.Load()-min(before, peak.Load()), peak.Load()-min(base, peak.Load())
	t.Logf("the server's heap peaked at %.1f MiB; the upload added %.1f MiB", float64(server)/(1<<20), float64(upload)/(1<<20))
	if server > 64<<20 || upload > 16<<20 {
		t.Fatalf("the server's heap peaked at %.1f MiB (%.1f MiB over the idle server) during a 300 MiB upload, want under 64 MiB and 16 MiB",
			float64(server)/(1<<20), float64(upload)/(1<<20))
	}
}
