package handlers_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

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
