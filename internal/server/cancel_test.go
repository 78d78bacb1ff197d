package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"videogen/internal/staff/margin"
	"videogen/internal/testkit"
	"videogen/models"
)

// TestGivingUpCancelsUpstream: when RUN_TIMEOUT ends a task the provider still has, the provider is
// asked to stop it. Ark (its simulator, speaking Ark's protocol) cancels a queued task — nothing to pay —
// and cannot cancel a running one, whose expected cost is then kept and shown by the margin report as
// its own line; the task log says which. Each task is refunded either way. A task that completes keeps
// what Ark reports it rendered (the seed echoed by the video object), and its last frame is served as
// content?variant=last_frame.
func TestGivingUpCancelsUpstream(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		// RUN_TIMEOUT is 10 s: the slow simulator's tasks are queued for their first 6 s, then run to
		// 60 s ([sim:slow]: queued 60 s); the fast one's complete at once, with room under load.
		slow := startSim(t, "ark", 60*time.Second, 4, "key-slow")
		fast := startSim(t, "ark", 100*time.Millisecond, 4, "key-fast")
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("slow", "ark", slow.Base, "key-slow", 4, route("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.18"))+
			cred("fast", "ark", fast.Base, "key-fast", 4, route("videogen-2.0-480p", "dreamina-seedance-2-0-fast-260128", "0.05")))
		// No ffmpeg: Ark serves no stills, and making them is not what this test is about.
		s := testkit.Start(t, dbURL, upstreamEnv(file, map[string]string{"RUN_TIMEOUT": "10s", "FFMPEG_PATH": "off"}))
		acct := s.NewAccount(t, "50")

		// Queued upstream at the deadline ([sim:slow]: ten times as long, the first tenth queued), and running.
		queued := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "still queued [sim:slow]", "seconds": 5})["id"].(string)
		running := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "already running", "seconds": 5})["id"].(string)
		for _, id := range []string{queued, running} {
			if v := s.WaitStatus(t, acct.Key, id, 40*time.Second, "completed", "failed"); v["status"] != "failed" || v["error"].(map[string]any)["code"] != "run_timeout" {
				t.Fatalf("%s: %v", id, v)
			}
		}
		testkit.Eventually(t, 10*time.Second, "both cancels recorded", func() bool {
			a, b := testkit.Task(t, s.DB, queued).UpstreamCancel, testkit.Task(t, s.DB, running).UpstreamCancel
			return a != nil && *a != "asking" && b != nil && *b != "asking"
		})
		q, r := testkit.Task(t, s.DB, queued), testkit.Task(t, s.DB, running)
		if *q.UpstreamCancel != "cancelled" || q.UpstreamCostMicros != nil {
			t.Fatalf("queued task: cancel %s, cost %v", *q.UpstreamCancel, q.UpstreamCostMicros)
		}
		if *r.UpstreamCancel != "not_cancellable" || r.UpstreamCostMicros == nil || *r.UpstreamCostMicros != 900_000 {
			t.Fatalf("running task: cancel %s, cost %v (want 5 s × 0.18)", *r.UpstreamCancel, r.UpstreamCostMicros)
		}
		for id, want := range map[string]string{queued: "cancelled, nothing to pay upstream", running: "it cannot"} {
			var events []models.TaskEvent
			if err := s.DB.R.Where("task_id = ? AND detail LIKE ?", id, "%asked the provider to stop the task%").Find(&events).Error; err != nil || len(events) != 1 || !strings.Contains(events[0].Detail, want) {
				t.Fatalf("task log of %s: %+v %v", id, events, err)
			}
		}
		for _, st := range slow.Tasks() {
			if st.ID == *q.UpstreamTaskID && st.CancelledAt == nil {
				t.Fatal("the simulator's queued task was not cancelled")
			}
		}
		res, err := margin.Report(context.Background(), s.DB, time.Now().AddDate(0, 0, -1), time.Now().AddDate(0, 0, 1))
		if err != nil {
			t.Fatal(err)
		}
		if f := res.FailedLocally; f.Tasks != 2 || f.Cost != 900_000 || f.Uncosted != 0 || res.Total.Tasks != 0 {
			t.Fatalf("margin: failed here %+v, settled %+v", f, res.Total)
		}

		// A completed task keeps what Ark reports it rendered, and its last frame.
		var seed int64 = 4242
		done := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "rendered", "seconds": 4, "seed": seed})["id"].(string)
		if v := s.WaitStatus(t, acct.Key, done, 20*time.Second, "completed", "failed"); v["status"] != "completed" || v["seed"] != float64(seed) {
			t.Fatalf("completed: %v", v)
		}
		task := testkit.Task(t, s.DB, done)
		if task.RenderedSeed == nil || *task.RenderedSeed != seed || task.RenderedResolution == nil || *task.RenderedResolution != "480p" ||
			task.RenderedRatio == nil || *task.RenderedRatio != "16:9" || task.RenderedSeconds == nil || *task.RenderedSeconds != 4 ||
			task.RenderedFPS == nil || *task.RenderedFPS != 24 || task.LastFrameKey == nil {
			t.Fatalf("rendered: %+v", task)
		}
		// Without a seed in the request, the video object echoes the one Ark reports it used.
		random := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "random seed", "seconds": 4})["id"].(string)
		v := s.WaitStatus(t, acct.Key, random, 20*time.Second, "completed", "failed")
		if rt := testkit.Task(t, s.DB, random); v["status"] != "completed" || rt.RenderedSeed == nil || v["seed"] != float64(*rt.RenderedSeed) {
			t.Fatalf("random seed: %v, rendered %v", v, rt.RenderedSeed)
		}
		frame := s.Do(t, "GET", "/v1/videos/"+done+"/content?variant=last_frame", acct.Key, nil)
		if frame.Status != 200 || frame.Header.Get("Content-Type") != "image/png" || len(frame.Body) < 100 || string(frame.Body[1:4]) != "PNG" {
			t.Fatalf("last frame: %d %s (%d bytes)", frame.Status, frame.Header.Get("Content-Type"), len(frame.Body))
		}
	})
}
