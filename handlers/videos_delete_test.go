package handlers_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/tasks"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestDeleteVideo: DELETE /v1/videos/{id} as OpenAI defines it. A finished task (completed or failed) is
// deleted: its stored video leaves storage, and the API answers for it as for an unknown id (retrieve,
// list, content, a second delete). Its ledger entries and call log stay, and the console — the
// customer's and staff's — shows it as deleted. An unfinished task is refused with 409; another
// account's task is 404, byte for byte an unknown id's answer.
func TestDeleteVideo(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// One simulated slot, so a slow task holds it in progress while the next waits queued.
		s := testkit.Start(t, dbURL, map[string]string{"SIM_DURATION": "1s", "SIM_CREDENTIALS": "1", "SIM_CONCURRENCY": "1"})
		b := signUpVerified(t, s, "deleter@example.com")
		acct := accountOf(t, s, "deleter@example.com").AccountID
		if err := creditUSD(s, acct, "100"); err != nil {
			t.Fatal(err)
		}
		key := createKey(t, b, "api")
		stranger := s.NewAccount(t, "10")

		done := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a kite over the dunes"})["id"].(string)
		failed := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a storm [sim:fail]"})["id"].(string)
		s.WaitStatus(t, key, done, 30*time.Second, "completed")
		s.WaitStatus(t, key, failed, 30*time.Second, "failed")
		running := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a long take [sim:slow]"})["id"].(string)
		s.WaitStatus(t, key, running, 30*time.Second, "in_progress")
		waiting := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "next in line"})["id"].(string)

		var stored []string // the video and its stills
		for _, k := range tasks.StoredKeys(new(testkit.Task(t, s.DB, done))) {
			stored = append(stored, filepath.Join(s.Cfg.DataDir, "blobs", filepath.FromSlash(k)))
			if _, err := os.Stat(stored[len(stored)-1]); err != nil {
				t.Fatalf("the completed video's file is not in storage where the test looks: %v", err)
			}
		}
		if len(stored) != 3 {
			t.Fatalf("the completed task names %d files, want the video, its thumbnail and its spritesheet", len(stored))
		}
		entries := map[string][]models.LedgerEntry{done: testkit.Entries(t, s.DB, done), failed: testkit.Entries(t, s.DB, failed)}
		unknown := "video_AAAAAAAAAAAAAAAAAAAAAAAA"
		notFound := s.Do(t, "GET", "/v1/videos/"+unknown, key, nil)

		// Started at a provider that cannot stop it (the simulator has no cancel): refused, not retried by
		// the SDKs, and nothing changes.
		if st := testkit.Task(t, s.DB, waiting).Status; st != "queued" {
			t.Fatalf("the second task is %s, want queued behind the slow one", st)
		}
		r := s.Do(t, "DELETE", "/v1/videos/"+running, key, nil)
		if r.Status != 409 || r.ErrorCode() != "video_not_finished" || r.Header.Get("x-should-retry") != "false" || !strings.Contains(string(r.Body), "cannot stop it now") {
			t.Fatalf("delete of a running task: %d %s (x-should-retry %q)", r.Status, r.Body, r.Header.Get("x-should-retry"))
		}
		if task := testkit.Task(t, s.DB, running); task.DeletedAt != nil || task.Status != "in_progress" || task.BillingState != "reserved" {
			t.Fatalf("a refused delete changed the task: %s %s %v", task.Status, task.BillingState, task.DeletedAt)
		}
		// Not yet sent anywhere: cancelled (failed, released), and still shown (TestCancelQueuedVideo).
		if r := s.Do(t, "DELETE", "/v1/videos/"+waiting, key, nil); r.Status != 200 {
			t.Fatalf("cancel of the waiting task: %d %s", r.Status, r.Body)
		}
		if task := testkit.Task(t, s.DB, waiting); task.DeletedAt != nil || task.Status != "failed" || *task.ErrorCode != "cancelled" {
			t.Fatalf("the cancelled task: %s %v %v", task.Status, task.ErrorCode, task.DeletedAt)
		}

		// Another account: the answer of an unknown id, and the task stays.
		theirs, missing := s.Do(t, "DELETE", "/v1/videos/"+done, stranger.Key, nil), s.Do(t, "DELETE", "/v1/videos/"+unknown, stranger.Key, nil)
		if theirs.Status != 404 || theirs.ErrorCode() != "not_found" || string(theirs.Body) != string(missing.Body) {
			t.Fatalf("another account's delete: %d %s, unknown id: %d %s", theirs.Status, theirs.Body, missing.Status, missing.Body)
		}
		if r := s.Do(t, "GET", "/v1/videos/"+done, key, nil); r.Status != 200 {
			t.Fatalf("another account's delete removed the task: %d", r.Status)
		}

		for _, id := range []string{done, failed} {
			r := s.Do(t, "DELETE", "/v1/videos/"+id, key, nil)
			if r.Status != 200 {
				t.Fatalf("delete %s: %d %s", id, r.Status, r.Body)
			}
			if got := r.JSON(t); !reflect.DeepEqual(got, map[string]any{"id": id, "object": "video.deleted", "deleted": true}) {
				t.Fatalf("delete answered %v", got)
			}
			// Gone from the API, exactly like an unknown id (the poll cache held the finished task).
			for _, path := range []string{"/v1/videos/" + id, "/v1/videos/" + id + "/content"} {
				if r := s.Do(t, "GET", path, key, nil); r.Status != 404 || string(r.Body) != string(notFound.Body) {
					t.Fatalf("GET %s after delete: %d %s", path, r.Status, r.Body)
				}
			}
			if again := s.Do(t, "DELETE", "/v1/videos/"+id, key, nil); again.Status != 404 || string(again.Body) != string(notFound.Body) {
				t.Fatalf("second delete: %d %s", again.Status, again.Body)
			}
			task := testkit.Task(t, s.DB, id)
			if task.DeletedAt == nil || task.OutputKey != nil {
				t.Fatalf("deleted task: deleted_at %v, output_key %v", task.DeletedAt, task.OutputKey)
			}
			// The money is untouched: the same entries, the same billing state.
			if got := testkit.Entries(t, s.DB, id); !reflect.DeepEqual(got, entries[id]) {
				t.Fatalf("ledger entries changed by the delete:\n%v\nwere\n%v", got, entries[id])
			}
			waitCall(t, s, r.Header.Get("X-Request-Id"))
			var call models.CallLog
			if err := s.DB.R.Where("request_id = ?", r.Header.Get("X-Request-Id")).Take(&call).Error; err != nil || call.TaskID != id || call.Method != "DELETE" || call.Status != 200 {
				t.Fatalf("the delete's call-log row: %+v, %v", call, err)
			}
		}
		for _, f := range stored {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				t.Fatalf("the deleted task's file %s is still stored: %v", f, err)
			}
		}
		list := s.Do(t, "GET", "/v1/videos?limit=100", key, nil).JSON(t)
		var listed []string
		for _, v := range list["data"].([]any) {
			listed = append(listed, v.(map[string]any)["id"].(string))
		}
		if want := []string{waiting, running}; !reflect.DeepEqual(listed, want) {
			t.Fatalf("the list shows %v, want only the undeleted %v", listed, want)
		}
		testkit.CheckLedger(t, s.DB)

		// The console keeps the record and says it was deleted, and when; the storage key stays staff's.
		tasks := b.get("/console/tasks")
		tasks.contains(t, done, failed, running, `<span class="badge deleted" title="Deleted `)
		if n := strings.Count(tasks.Body, `class="badge deleted"`); n != 2 {
			t.Errorf("the task list marks %d tasks deleted, want 2", n)
		}
		page := b.get("/console/tasks/" + done)
		page.contains(t, "Deleted through the API on", "its stored video was removed", "deleted through the API by API key ", "Charged for a video")
		page.lacks(t, "<video", "Download MP4", "outputs/")
		b.get("/console/tasks/"+failed).contains(t, "Deleted through the API on", "it had no stored video", "Failed:")
		if r := b.get("/console/tasks/" + done + "/video"); r.Status != 404 {
			t.Fatalf("the console still serves the deleted video: %d", r.Status)
		}
		staff := signInStaff(t, s, "support@example.com", "support")
		account := "/support/accounts/" + strconv.FormatInt(acct, 10)
		staff.get(account+"/tasks/"+done).contains(t, "Deleted through the API on", "outputs/"+done+"/")
		staff.get(account).contains(t, done, `class="badge deleted"`)
	})
}

// TestRemixBeforeTheKeyAndTheSource: a remix is checked after the key, as on every /v1 route; a source
// that is still queued is 409 video_not_ready (remix it once completed), an unknown one 404 not_found.
func TestRemixBeforeTheKeyAndTheSource(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false"})
	acct := s.NewAccount(t, "10")
	id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a kite"})["id"].(string)
	if r := s.Do(t, "POST", "/v1/videos/"+id+"/remix", acct.Key, map[string]any{"prompt": "the same kite at night"}); r.Status != 409 || r.ErrorCode() != "video_not_ready" {
		t.Fatalf("remix of a queued video: %d %s", r.Status, r.Body)
	}
	if r := s.Do(t, "POST", "/v1/videos/video_AAAAAAAAAAAAAAAAAAAAAAAA/remix", acct.Key, map[string]any{"prompt": "x"}); r.Status != 404 || r.ErrorCode() != "not_found" {
		t.Fatalf("remix of an unknown video: %d %s", r.Status, r.Body)
	}
	if r := s.Do(t, "POST", "/v1/videos/"+id+"/remix", "", map[string]any{"prompt": "x"}); r.Status != 401 || r.ErrorCode() != "missing_api_key" {
		t.Fatalf("remix without a key: %d %s", r.Status, r.Body)
	}
}

// TestDeleteSurvivesACrash: a delete forgets the stored video in the transaction that marks the task
// deleted, then deletes the file. If the process dies between the two, the file is one no row names, and
// the storage sweep deletes it — while the API already answers for the task as for an unknown id.
func TestDeleteSurvivesACrash(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"STORAGE_SWEEP_INTERVAL": "200ms"})
		acct := s.NewAccount(t, "10")
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "a kite"})["id"].(string)
		s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed")
		task := testkit.Task(t, s.DB, id)
		if task.ThumbnailKey == nil || task.SpritesheetKey == nil {
			t.Fatalf("the completed task has no stills: %+v", task)
		}
		var stored []string
		for _, k := range []string{*task.OutputKey, *task.ThumbnailKey, *task.SpritesheetKey} {
			stored = append(stored, filepath.Join(s.Cfg.DataDir, "blobs", filepath.FromSlash(k)))
		}

		// The delete's first half only, as a crash right after its commit leaves it.
		keys, err := s.Tasks.MarkDeleted(t.Context(), acct.ID, id, "API key test")
		if err != nil || len(keys) != 3 {
			t.Fatalf("mark deleted: %q, %v", keys, err)
		}
		if r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil); r.Status != 404 || r.ErrorCode() != "not_found" {
			t.Fatalf("content of the deleted task: %d %s", r.Status, r.Body)
		}
		// Past the sweep's grace (files younger than an hour may be about to be named), they are swept.
		old := time.Now().Add(-2 * time.Hour)
		for _, f := range stored {
			if err := os.Chtimes(f, old, old); err != nil {
				t.Fatalf("the file should still be there, as the crash left it: %v", err)
			}
		}
		for _, f := range stored {
			testkit.Eventually(t, 15*time.Second, "the storage sweep removes the deleted task's file "+f, func() bool {
				_, err := os.Stat(f)
				return os.IsNotExist(err)
			})
		}
	})
}
