package handlers_test

import (
	"fmt"
	"sort"
	"strconv"
	"testing"

	"videogen/internal/testkit"
)

func TestGetVideo(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "100")
		other := s.NewAccount(t, "100")
		created := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-fast-1080p", "prompt": "a lighthouse", "seconds": 5, "aspect_ratio": "9:16", "generate_audio": true})
		id := created["id"].(string)

		r := s.Do(t, "GET", "/v1/videos/"+id, acct.Key, nil)
		if r.Status != 200 {
			t.Fatalf("get: %d %s", r.Status, r.Body)
		}
		v := r.JSON(t)
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := []string{"aspect_ratio", "billing", "completed_at", "created_at", "error", "expires_at", "generate_audio", "id", "model", "object",
			"progress", "prompt", "remixed_from_video_id", "seconds", "seed", "size", "status", "watermark"}
		if fmt.Sprint(keys) != fmt.Sprint(want) {
			t.Fatalf("keys %v\nwant %v", keys, want)
		}
		checks := map[string]any{"object": "video", "model": "videogen-2.0-fast-1080p", "status": "queued", "progress": 0.0, "prompt": "a lighthouse",
			"size": "1080x1920", "seconds": "5", "aspect_ratio": "9:16", "generate_audio": true, "watermark": false,
			"completed_at": nil, "expires_at": nil, "error": nil, "remixed_from_video_id": nil, "seed": nil}
		for k, w := range checks {
			if v[k] != w {
				t.Errorf("%s = %v, want %v", k, v[k], w)
			}
		}
		if b := v["billing"].(map[string]any); b["amount"] != "2.250000" || b["state"] != "reserved" {
			t.Errorf("billing %v, want 0.45 × 5 = 2.250000 reserved", b)
		}
		if ms, err := strconv.Atoi(r.Header.Get("openai-poll-after-ms")); err != nil || ms < 1000 {
			t.Errorf("openai-poll-after-ms %q", r.Header.Get("openai-poll-after-ms"))
		}

		// Another account's task and a missing task answer exactly alike.
		theirs := s.Do(t, "GET", "/v1/videos/"+id, other.Key, nil)
		missing := s.Do(t, "GET", "/v1/videos/video_doesnotexist000000000000", other.Key, nil)
		if theirs.Status != 404 || missing.Status != 404 || string(theirs.Body) != string(missing.Body) || theirs.ErrorCode() != "not_found" {
			t.Fatalf("other account: %d %s\nmissing: %d %s", theirs.Status, theirs.Body, missing.Status, missing.Body)
		}
		for _, path := range []string{"/v1/videos/" + id + "/content"} {
			a, b := s.Do(t, "GET", path, other.Key, nil), s.Do(t, "GET", "/v1/videos/video_nope/content", other.Key, nil)
			if a.Status != 404 || string(a.Body) != string(b.Body) {
				t.Fatalf("content of other account's task: %d %s vs %s", a.Status, a.Body, b.Body)
			}
		}
	})
}

func TestListVideos(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.Start(t, dbURL, map[string]string{"WORKERS": "false"})
		acct := s.NewAccount(t, "100")
		other := s.NewAccount(t, "100")
		s.CreateVideo(t, other.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "not yours"})
		var ids []string
		for i := 0; i < 5; i++ {
			ids = append(ids, s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": fmt.Sprintf("p%d", i)})["id"].(string))
		}
		page := func(q string) map[string]any {
			r := s.Do(t, "GET", "/v1/videos"+q, acct.Key, nil)
			if r.Status != 200 {
				t.Fatalf("list %s: %d %s", q, r.Status, r.Body)
			}
			return r.JSON(t)
		}
		idsOf := func(m map[string]any) []string {
			var out []string
			for _, d := range m["data"].([]any) {
				out = append(out, d.(map[string]any)["id"].(string))
			}
			return out
		}
		// Newest first, two at a time.
		var seen []string
		after := ""
		for pageNo := 0; ; pageNo++ {
			q := "?limit=2"
			if after != "" {
				q += "&after=" + after
			}
			m := page(q)
			got := idsOf(m)
			seen = append(seen, got...)
			if m["object"] != "list" || m["first_id"] != got[0] || m["last_id"] != got[len(got)-1] {
				t.Fatalf("page %d: %v", pageNo, m)
			}
			if m["has_more"] != (len(seen) < 5) {
				t.Fatalf("page %d has_more %v after %d of 5", pageNo, m["has_more"], len(seen))
			}
			if !m["has_more"].(bool) {
				break
			}
			after = m["last_id"].(string)
		}
		want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
		if fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Fatalf("pages gave %v, want %v", seen, want)
		}
		if got := idsOf(page("?order=asc&limit=3")); fmt.Sprint(got) != fmt.Sprint(ids[:3]) {
			t.Fatalf("asc %v", got)
		}
		if got := idsOf(page("?order=asc&after=" + ids[2])); fmt.Sprint(got) != fmt.Sprint(ids[3:]) {
			t.Fatalf("asc after %v", got)
		}
		empty := testkit.NewAccount(t, s.DB, "0")
		r := s.Do(t, "GET", "/v1/videos", empty.Key, nil)
		if m := r.JSON(t); len(m["data"].([]any)) != 0 || m["first_id"] != nil || m["has_more"] != false {
			t.Fatalf("empty list %s", r.Body)
		}
		for _, q := range []string{"?limit=0", "?limit=101", "?limit=x", "?order=up", "?after=video_unknown", "?after=%FF", "?after=a%00b", "?after=video_%E2%82%AC"} {
			if r := s.Do(t, "GET", "/v1/videos"+q, acct.Key, nil); r.Status != 400 || r.ErrorCode() != "invalid_request" {
				t.Errorf("%s: %d %s", q, r.Status, r.Body)
			}
		}
	})
}
