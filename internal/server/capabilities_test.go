package server_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestRoutesSellOnlyWhatTheyRender: each route renders what its upstreams file declares, or its kind's
// defaults (OpenAI: 4, 8 or 12 seconds at its four sizes, a first frame, with sound). GET /v1/models and
// /pricing list what can be sold now; a create no route can render is refused with unsupported_value,
// naming the field and what is accepted, before anything is reserved; one that fits is routed and
// rendered as asked.
func TestRoutesSellOnlyWhatTheyRender(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		openai := startSim(t, "openai", 100*time.Millisecond, 4, "key-o")
		ark := startSim(t, "ark", 100*time.Millisecond, 4, "key-a")
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("o", "openai", openai.Base, "key-o", 4, route("videogen-2.0-720p", "sora-2", "0.1"))+
			cred("a", "ark", ark.Base, "key-a", 4, "      videogen-2.0-1080p:\n        upstream_model: seedance-1-0-pro-250528\n        cost_per_second: \"0.2\"\n"+
				"        seconds: [5, 10]\n        sizes: [1920x1080]\n        inputs: []\n        audio: false\n"))
		s := testkit.Start(t, dbURL, upstreamEnv(file, nil))
		acct := s.NewAccount(t, "50")

		r := s.Do(t, "GET", "/v1/models", acct.Key, nil)
		if r.Status != 200 {
			t.Fatalf("models: %d %s", r.Status, r.Body)
		}
		byID := map[string]map[string]any{}
		for _, m := range r.JSON(t)["data"].([]any) {
			byID[m.(map[string]any)["id"].(string)] = m.(map[string]any)
		}
		if len(byID) != 2 {
			t.Fatalf("models listed: %v", byID)
		}
		for id, want := range map[string]string{
			"videogen-2.0-720p":  `seconds [4 8 12] sizes map[16:9:1280x720 9:16:720x1280] inputs [first_frame] audio true`,
			"videogen-2.0-1080p": `seconds [5 10] sizes map[16:9:1920x1080] inputs [] audio false`,
		} {
			m := byID[id]
			got := strings.Join([]string{"seconds", fmt.Sprint(m["seconds"]), "sizes", fmt.Sprint(m["sizes"]), "inputs", fmt.Sprint(m["inputs"]), "audio", fmt.Sprint(m["audio"])}, " ")
			if got != want {
				t.Fatalf("%s: %s, want %s", id, got, want)
			}
		}

		balance := func() int64 {
			var a models.Account
			if err := s.DB.R.Where("id = ?", acct.ID).Take(&a).Error; err != nil {
				t.Fatal(err)
			}
			return a.AvailableMicros
		}
		before, tasks := balance(), taskCount(t, s)
		for _, c := range []struct {
			body          map[string]any
			param, saying string
		}{
			{map[string]any{"model": "videogen-2.0-720p", "prompt": "p", "seconds": 5}, "seconds", "This model renders 4, 8 or 12 seconds; 5 seconds cannot be rendered."},
			{map[string]any{"model": "videogen-2.0-720p", "prompt": "p", "seconds": 8, "aspect_ratio": "1:1"}, "size", "This model renders 1280x720 or 720x1280 at 8 seconds; 960x960 cannot be rendered."},
			{map[string]any{"model": "videogen-2.0-1080p", "prompt": "p", "seconds": 4}, "seconds", "This model renders 5 or 10 seconds"},
			{map[string]any{"model": "videogen-2.0-1080p", "prompt": "p", "seconds": 5, "generate_audio": true}, "generate_audio", "This model renders silent video only. Set generate_audio to false."},
		} {
			r := s.Do(t, "POST", "/v1/videos", acct.Key, c.body)
			e, _ := r.JSON(t)["error"].(map[string]any)
			if r.Status != 400 || r.ErrorCode() != "unsupported_value" || e["param"] != c.param || !strings.Contains(e["message"].(string), c.saying) {
				t.Fatalf("%v: %d %s", c.body, r.Status, r.Body)
			}
		}
		if balance() != before || taskCount(t, s) != tasks {
			t.Fatal("a refused create reserved money or wrote a task")
		}

		// What fits is routed to the route that renders it, and rendered as asked.
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "eight seconds", "seconds": 8, "size": "720x1280"})["id"].(string)
		if v := s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed", "failed"); v["status"] != "completed" {
			t.Fatalf("fitting task: %v", v)
		}
		if task := testkit.Task(t, s.DB, id); *task.CredentialID != "o" || task.Seconds != 8 || task.Size != "720x1280" {
			t.Fatalf("task %+v", task)
		}
		id = s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-1080p", "prompt": "ten seconds", "seconds": 10})["id"].(string)
		if v := s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed", "failed"); v["status"] != "completed" {
			t.Fatalf("1080p task: %v", v)
		}

		// The pricing page says the same, and which models cannot be had now.
		body := s.Do(t, "GET", "/pricing", "", nil).Body
		for _, want := range []string{"4, 8 or 12", "5 or 10", "first frame", "prompt only", "Not available at the moment."} {
			if !strings.Contains(string(body), want) {
				t.Fatalf("/pricing lacks %q", want)
			}
		}
	})
}
