package handlers_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"videogen/internal/domain/videos"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestTaskPagesWithTiedCreationTimes: the task lists page by (created_at, id) from a cursor whose time
// bound the database starts its index range at (docs/performance.md, "Figures that hold at a million
// tasks"); tasks created in the same instant — thirty of them, across page boundaries — are each listed
// exactly once, in order, by GET /v1/videos both ways and by the console's Tasks pages.
func TestTaskPagesWithTiedCreationTimes(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1", "MAX_QUEUED_PER_ACCOUNT": "100"})
		b := signUpVerified(t, s, "ties@example.com")
		addFunds(t, b, "100")
		key := createKey(t, b, "ties")
		var ids []string
		for i := 0; i < 40; i++ {
			ids = append(ids, s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("tie %d", i)})["id"].(string))
		}
		// Thirty of them in one instant, between the others' times.
		tie := time.Now().UTC().Add(-time.Hour).Truncate(time.Microsecond)
		if err := s.DB.W.Model(&models.Task{}).Where("id IN ?", ids[5:35]).Update("created_at", tie).Error; err != nil {
			t.Fatal(err)
		}
		var tasks []models.Task
		if err := s.DB.R.Where("id IN ?", ids).Find(&tasks).Error; err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(tasks, func(a, b models.Task) int {
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		})
		var newest []string
		for _, tk := range tasks {
			newest = append(newest, tk.ID)
		}
		oldest := slices.Clone(newest)
		slices.Reverse(oldest)

		walk := func(order string) []string {
			var seen []string
			after := ""
			for range 20 {
				q := "/v1/videos?limit=7&order=" + order
				if after != "" {
					q += "&after=" + after
				}
				r := s.Do(t, "GET", q, key, nil)
				if r.Status != 200 {
					t.Fatalf("%s: %d %s", q, r.Status, r.Body)
				}
				m := r.JSON(t)
				for _, d := range m["data"].([]any) {
					seen = append(seen, d.(map[string]any)["id"].(string))
				}
				if m["has_more"] != true {
					return seen
				}
				after = m["last_id"].(string)
			}
			t.Fatalf("GET /v1/videos order=%s did not end", order)
			return nil
		}
		if got := walk("desc"); !slices.Equal(got, newest) {
			t.Fatalf("newest first, 7 a page:\n got %v\nwant %v", got, newest)
		}
		if got := walk("asc"); !slices.Equal(got, oldest) {
			t.Fatalf("oldest first, 7 a page:\n got %v\nwant %v", got, oldest)
		}

		// The console's pages of 25.
		idRE := regexp.MustCompile(`video_[0-9A-Za-z]{24}`)
		olderRE := regexp.MustCompile(`href="(/console/tasks\?after=[^"]+)">Older`)
		var listed []string
		next := "/console/tasks"
		for pages := 0; next != ""; pages++ {
			if pages > 5 {
				t.Fatal("the console's task pages did not end")
			}
			p := b.get(next)
			if p.Status != 200 {
				t.Fatalf("%s: %d", next, p.Status)
			}
			for _, id := range idRE.FindAllString(p.Body, -1) {
				if len(listed) == 0 || listed[len(listed)-1] != id {
					if slices.Contains(listed, id) {
						t.Fatalf("%s listed twice (on %s)", id, next)
					}
					listed = append(listed, id)
				}
			}
			next = ""
			if m := olderRE.FindStringSubmatch(p.Body); m != nil {
				next = html.UnescapeString(m[1])
			}
		}
		if !slices.Equal(listed, newest) {
			t.Fatalf("the console listed:\n got %v\nwant %v", listed, newest)
		}
	})
}

// TestFilteredPagesReadABoundedWindow: a filter that matches little reads at most a window of the
// account's rows per page (models.CallScanWindow, videos.TaskScanWindow; made small here): a page with
// fewer matches says how far back it looked and offers Older, and walking Older finds every match once,
// then ends. Queued and in-progress tasks are listed whole from their own index, a page at a time. The
// CSV export, read in windows too, holds every match.
func TestFilteredPagesReadABoundedWindow(t *testing.T) {
	calls, tasks := models.CallScanWindow, videos.TaskScanWindow
	models.CallScanWindow, videos.TaskScanWindow = 40, 30
	t.Cleanup(func() { models.CallScanWindow, videos.TaskScanWindow = calls, tasks })
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false", "TEST_TOPUPS": "1", "MAX_QUEUED_PER_ACCOUNT": "1000"})
		b := signUpVerified(t, s, "window@example.com")
		addFunds(t, b, "100")
		key := createKey(t, b, "window")
		// The oldest task is the only one of its model, and the oldest call the only 404.
		if r := s.Do(t, "GET", "/v1/videos/video_missing0000000000000000", key, nil); r.Status != 404 {
			t.Fatalf("missing video: %d", r.Status)
		}
		rare := s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-fast-1080p", "prompt": "rare"})["id"].(string)
		for i := 0; i < 70; i++ {
			s.CreateVideo(t, key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": fmt.Sprintf("common %d", i)})
		}
		waitRows(t, s, 72)

		// walk follows the Older links from first and returns every page.
		olderRE := regexp.MustCompile(`href="([^"]*after=[^"]+)">Older`)
		walk := func(first string) []*page {
			var pages []*page
			for next := first; next != ""; {
				if len(pages) > 10 {
					t.Fatalf("%s: the pages did not end", first)
				}
				p := b.get(next)
				if p.Status != 200 {
					t.Fatalf("%s: %d", next, p.Status)
				}
				pages = append(pages, p)
				next = ""
				if m := olderRE.FindStringSubmatch(p.Body); m != nil {
					next = html.UnescapeString(m[1])
				}
			}
			return pages
		}

		// Tasks of the rare model: 71 tasks read 30 a page, the match on the third page.
		pages := walk("/console/tasks?model=videogen-2.0-fast-1080p")
		if len(pages) != 3 {
			t.Fatalf("the rare model's pages: %d, want 3 (71 tasks, 30 read a page)", len(pages))
		}
		for i, p := range pages[:2] {
			p.contains(t, "No videos match these filters among those created since")
			p.lacks(t, rare)
			if i == 0 {
				p.lacks(t, "Newest")
			}
		}
		pages[2].contains(t, rare, "Newest")
		pages[2].lacks(t, "among those created since")

		// Queued tasks, from their own index: every one, 25 a page, in three pages.
		seen := map[string]bool{}
		queued := walk("/console/tasks?status=queued")
		for _, p := range queued {
			for _, id := range regexp.MustCompile(`video_[0-9A-Za-z]{24}`).FindAllString(p.Body, -1) {
				seen[id] = true
			}
			p.lacks(t, "among those created since")
		}
		if len(queued) != 3 || len(seen) != 71 {
			t.Fatalf("queued tasks: %d pages listing %d tasks, want 3 pages of all 71", len(queued), len(seen))
		}

		// The one 4xx call, oldest of 72 calls read 40 a page: found on the second page, once.
		pages = walk("/console/calls?class=4xx")
		if len(pages) != 2 {
			t.Fatalf("the 4xx pages: %d, want 2 (72 calls, 40 read a page)", len(pages))
		}
		pages[0].contains(t, "No calls match among those made since")
		pages[0].lacks(t, "not_found")
		pages[1].contains(t, "not_found", "video_missing0000000000000000")
		if n := strings.Count(pages[1].Body, "not_found"); n != 1 {
			t.Fatalf("the 404 shows %d times", n)
		}
		// A page of matches: every create (71) with status class 2xx, 50 a page.
		pages = walk("/console/calls?class=2xx&path=%2Fv1%2Fvideos")
		var listed int
		for _, p := range pages {
			listed += strings.Count(p.Body, `<span class="badge`)
		}
		if listed != 71 {
			t.Fatalf("the creates' pages list %d calls, want 71", listed)
		}
		// The export reads window after window: it holds the one match, and only it.
		exp := b.get("/console/calls.csv?class=4xx")
		if lines := strings.Split(strings.TrimSpace(exp.Body), "\n"); exp.Status != 200 || len(lines) != 2 || !strings.Contains(lines[1], "not_found") {
			t.Fatalf("the 4xx export: %d %q", exp.Status, exp.Body)
		}
	})
}
