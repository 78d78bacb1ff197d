package handlers_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestStorageSweep: what a crash leaves in storage — a half-written ".put-*" file, a complete video
// copied beside the one its task names, a video of no task, an upload's temporary file, a file of no
// media row — is deleted once older than the sweep's grace (an hour); every file a row names stays,
// however old, and so do young files that may still be named a moment later.
func TestStorageSweep(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"STORAGE_SWEEP_INTERVAL": "200ms"})
		acct := s.NewAccount(t, "10")
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "kept"})["id"].(string)
		s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed")
		upload := s.Upload(t, acct.Key, "", testkit.File("image_files", "a.png", testkit.PNG(t, 16, 16))).Answer(t)
		task := testkit.Task(t, s.DB, id)
		var file models.Media
		if err := s.DB.R.Where("id = ?", upload.Files[0].ID).Take(&file).Error; err != nil {
			t.Fatal(err)
		}

		blobs, data := filepath.Join(s.Cfg.DataDir, "blobs"), s.Cfg.DataDir
		mediaDir := filepath.Join(data, "media", strconv.FormatInt(acct.ID, 10))
		old := time.Now().Add(-2 * time.Hour)
		write := func(path string, age time.Time) string {
			t.Helper()
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte("left behind"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(path, age, age); err != nil {
				t.Fatal(err)
			}
			return path
		}
		if task.ThumbnailKey == nil || task.SpritesheetKey == nil {
			t.Fatalf("the task has no stills: %+v", task)
		}
		// The video and the stills stored beside it are all named by the row.
		named := []string{filepath.Join(blobs, filepath.FromSlash(*task.OutputKey)), filepath.Join(data, filepath.FromSlash(file.StorageKey)),
			filepath.Join(blobs, filepath.FromSlash(*task.ThumbnailKey)), filepath.Join(blobs, filepath.FromSlash(*task.SpritesheetKey))}
		for _, p := range named {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
		orphans := []string{
			write(filepath.Join(blobs, "outputs", id, ".put-1234567"), old),
			write(filepath.Join(blobs, "outputs", id, "copied-but-never-committed.mp4"), old),
			write(filepath.Join(blobs, "outputs", "video_ofNoTaskAtAllxxxxxxxxx", "x.mp4"), old),
			write(filepath.Join(mediaDir, ".put-7654321"), old),
			write(filepath.Join(mediaDir, "file_ofNoRowAtAllxxxxxxxxx"), old),
		}
		young := []string{
			write(filepath.Join(blobs, "outputs", id, ".put-young"), time.Now()),
			write(filepath.Join(mediaDir, ".put-young"), time.Now()),
		}
		for _, p := range orphans {
			testkit.Eventually(t, 15*time.Second, p+" is swept", func() bool {
				_, err := os.Stat(p)
				return os.IsNotExist(err)
			})
		}
		if _, err := os.Stat(filepath.Join(blobs, "outputs", "video_ofNoTaskAtAllxxxxxxxxx")); !os.IsNotExist(err) {
			t.Errorf("the emptied folder of a swept video stays: %v", err)
		}
		for _, p := range append(named, young...) {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s went: %v", p, err)
			}
		}
		if r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil); r.Status != 200 {
			t.Fatalf("the named video after the sweep: %d", r.Status)
		}
	})
}

// TestRetentionWithoutWorkers: an instance that runs no task workers still deletes videos whose
// retention has ended. The retention sweep is a periodic job: the elected leader schedules it and any
// instance works it, so here the instance with workers makes the video and stops, and the other, alone,
// becomes the leader and deletes it (docs/jobs.md, "Periodic chores").
func TestRetentionWithoutWorkers(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		a := testkit.Start(t, dbURL, map[string]string{"DATA_DIR": dir, "OUTPUT_RETENTION": "1s", "MEDIA_SWEEP_INTERVAL": "1h"})
		b := testkit.Start(t, dbURL, map[string]string{"DATA_DIR": dir, "WORKERS": "false", "MEDIA_SWEEP_INTERVAL": "100ms"})
		acct := a.NewAccount(t, "10")
		id := a.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "short-lived"})["id"].(string)
		a.WaitStatus(t, acct.Key, id, 20*time.Second, "completed")
		stored := filepath.Join(dir, "blobs", filepath.FromSlash(*testkit.Task(t, a.DB, id).OutputKey))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := a.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		// The sweep deletes the file and then forgets its key, so both are awaited: reading the row the
		// moment the file went raced that second step. b is elected once a's leadership is seen to be
		// gone, within River's election interval (5 s).
		var stillStored bool
		var task models.Task
		testkit.Eventually(t, 30*time.Second, "an instance without workers deletes the expired video and forgets its key", func() bool {
			_, err := os.Stat(stored)
			stillStored = !os.IsNotExist(err)
			task = testkit.Task(t, b.DB, id)
			return !stillStored && task.OutputKey == nil
		}, func() string {
			if stillStored {
				return "the expired video is still stored"
			}
			return "the task still names its deleted video: " + *task.OutputKey
		})
	})
}
