package server_test

import (
	"bytes"
	"context"
	"fmt"
	"image/jpeg"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/upstream/sim"
	"videogen/internal/infra/config"
	"videogen/internal/server"
	"videogen/internal/staff/margin"
	"videogen/internal/testkit"
	"videogen/models"
)

// upstreamSim is a simulator speaking protocol ("openai" or "ark") over real HTTP.
type upstreamSim struct {
	*sim.Sim
	srv  *httptest.Server
	Base string // the base_url a credential of its protocol is configured with
}

func startSim(t *testing.T, protocol string, duration time.Duration, concurrency int, keys ...string) *upstreamSim {
	t.Helper()
	s, err := sim.New(sim.Config{Dir: t.TempDir(), Duration: duration, Concurrency: concurrency, Secrets: keys, Protocol: protocol, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	u := &upstreamSim{Sim: s, srv: srv, Base: srv.URL}
	if protocol == "ark" {
		u.Base += "/api/v3"
	}
	return u
}

// writeFile writes an upstreams file and returns its path.
func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// cred is one credential entry of an upstreams file.
func cred(id, kind, base, secret string, max int, models string) string {
	return fmt.Sprintf("  - id: %s\n    name: %s credential\n    kind: %s\n    base_url: %s\n    secret: %s\n    max_concurrency: %d\n    models:\n%s",
		id, id, kind, base, secret, max, models)
}

func route(alias, model, cost string) string {
	return fmt.Sprintf("      %s: {upstream_model: %s, cost_per_second: %q}\n", alias, model, cost)
}

func upstreamEnv(file string, over map[string]string) map[string]string {
	env := map[string]string{"UPSTREAMS_FILE": file, "UPSTREAMS_WATCH_INTERVAL": "100ms"}
	for k, v := range over {
		env[k] = v
	}
	return env
}

func taskCount(t *testing.T, s *testkit.Server) int64 {
	t.Helper()
	var n int64
	if err := s.DB.R.Model(&models.Task{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func credentialRow(t *testing.T, s *testkit.Server, id string) models.UpstreamCredential {
	t.Helper()
	var c models.UpstreamCredential
	if err := s.DB.R.Where("id = ?", id).Take(&c).Error; err != nil {
		t.Fatalf("credential %s: %v", id, err)
	}
	return c
}

// TestUpstreamPoolServesMixedTraffic: a pool of an Ark and an OpenAI-style credential (two simulators
// speaking those wire formats) serves the aliases the file gives each, under each provider's model
// name, least-loaded first; /v1/models lists only what the pool serves; each task records its
// credential, the provider's model, the usage Ark reports and the cost at the configured price; and the
// margin report adds it up to the micro-dollar. Requests only an Ark model would be asked, and cannot
// serve, are refused before anything is written; provider refusals reach the customer in our words.
func TestUpstreamPoolServesMixedTraffic(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		arkSim := startSim(t, "ark", 300*time.Millisecond, 4, "ark-secret-0001")
		oaiSim := startSim(t, "openai", 300*time.Millisecond, 4, "oai-secret-0001")
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("ark-main", "ark", arkSim.Base, "ark-secret-0001", 2,
				route("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.18")+
					"      videogen-2.0-fast-720p: {upstream_model: dreamina-seedance-2-0-fast-260128, cost_per_second: \"0.09\", cost_per_million_tokens: \"1.234567\"}\n")+
			cred("oai-main", "openai", oaiSim.Base, "oai-secret-0001", 2,
				// OpenAI renders none of the 480p sizes: the route sells 480p 16:9 as its 1280x720.
				route("videogen-2.0-720p", "sora-2", "0.1")+"      videogen-2.0-mini-480p: {upstream_model: sora-2, cost_per_second: \"0.05\", size_map: {864x496: 1280x720}}\n"))
		s := testkit.Start(t, dbURL, upstreamEnv(file, nil))
		acct := s.NewAccount(t, "100")

		// Only the served aliases are offered.
		r := s.Do(t, "GET", "/v1/models", acct.Key, nil)
		var listed []string
		for _, m := range r.JSON(t)["data"].([]any) {
			listed = append(listed, m.(map[string]any)["id"].(string))
		}
		if strings.Join(listed, " ") != "videogen-2.0-720p videogen-2.0-fast-720p videogen-2.0-mini-480p" {
			t.Fatalf("/v1/models lists %v", listed)
		}
		// An alias nobody serves, and inputs the only (Ark) credential of an alias cannot combine: refused, nothing written.
		if r := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-480p", "prompt": "x"}); r.Status != 400 || r.ErrorCode() != "model_unavailable" {
			t.Fatalf("unserved alias: %d %s", r.Status, r.Body)
		}
		up := s.Upload(t, acct.Key, "", testkit.File("input_reference", "first.png", testkit.PNG(t, 320, 320)),
			testkit.File("image_files", "style.png", testkit.PNG(t, 320, 320))).Answer(t)
		mixed := map[string]any{"model": "videogen-2.0-fast-720p", "prompt": "frames and references",
			"start_image_url": *up.StartImageURL, "image_urls": up.ImageURLs}
		if r := s.Do(t, "POST", "/v1/videos", acct.Key, mixed); r.Status != 400 || r.ErrorCode() != "unsupported_input_combination" ||
			!strings.Contains(string(r.Body), `"param":"start_image_url"`) {
			t.Fatalf("frames with references for an Ark-only alias: %d %s", r.Status, r.Body)
		}
		if n := taskCount(t, s); n != 0 {
			t.Fatalf("%d tasks written by refusals", n)
		}
		// Where OpenAI serves the alias too, it takes no references at all (a first frame only), so the same
		// inputs are still refused; references alone only Ark renders, so they go there.
		mixed["model"] = "videogen-2.0-720p"
		if r := s.Do(t, "POST", "/v1/videos", acct.Key, mixed); r.Status != 400 || r.ErrorCode() != "unsupported_input_combination" {
			t.Fatalf("frames with references for a shared alias: %d %s", r.Status, r.Body)
		}
		onlyArk := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "references only", "image_urls": up.ImageURLs})["id"].(string)

		var ids []string
		// 4 seconds, which both 720p routes render (OpenAI: 4, 8 or 12); 5 for Ark's fast model.
		for i, model := range []string{"videogen-2.0-720p", "videogen-2.0-720p", "videogen-2.0-720p", "videogen-2.0-fast-720p", "videogen-2.0-mini-480p"} {
			secs := 4
			if model == "videogen-2.0-fast-720p" {
				secs = 5
			}
			ids = append(ids, s.CreateVideo(t, acct.Key, map[string]any{"model": model, "prompt": fmt.Sprintf("harbour %d", i), "seconds": secs, "seed": 42})["id"].(string))
		}
		policy := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-fast-720p", "prompt": "something [sim:policy]"})["id"].(string)
		rejected := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-mini-480p", "prompt": "bad parameters [sim:reject]"})["id"].(string)

		costs := map[string]map[string]int64{ // credential → alias → micro-dollars per second
			"ark-main": {"videogen-2.0-720p": 180_000, "videogen-2.0-fast-720p": 90_000},
			"oai-main": {"videogen-2.0-720p": 100_000, "videogen-2.0-mini-480p": 50_000},
		}
		upstreamModels := map[string]string{"ark-main/videogen-2.0-720p": "dreamina-seedance-2-0-260128", "ark-main/videogen-2.0-fast-720p": "dreamina-seedance-2-0-fast-260128",
			"oai-main/videogen-2.0-720p": "sora-2", "oai-main/videogen-2.0-mini-480p": "sora-2"}
		// Priced per second, except Ark's fast model, priced per million tokens: 5 s of 1280x720 at 24 fps
		// is 1280×720×121/1024 = 108900 tokens (Ark's documented count), × $1.234567 per million =
		// $0.1344443463, $0.134444 to the micro-dollar.
		costOf := func(task models.Task) int64 {
			if *task.CredentialID == "ark-main" && task.Model == "videogen-2.0-fast-720p" {
				if task.UsageCompletionTokens == nil || *task.UsageCompletionTokens != 108900 || task.Seconds != 5 {
					t.Fatalf("task %s: %v tokens for %d s", task.ID, task.UsageCompletionTokens, task.Seconds)
				}
				return 134444
			}
			return costs[*task.CredentialID][task.Model] * int64(task.Seconds)
		}
		used := map[string]int{}
		for _, id := range append([]string{onlyArk}, ids...) {
			if v := s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed"); v["status"] != "completed" {
				t.Fatalf("task %s: %v", id, v)
			}
			task := testkit.Task(t, s.DB, id)
			c := *task.CredentialID
			used[c]++
			if task.UpstreamModel == nil || *task.UpstreamModel != upstreamModels[c+"/"+task.Model] {
				t.Fatalf("task %s on %s for %s ran as %v", id, c, task.Model, task.UpstreamModel)
			}
			if want := costOf(task); task.UpstreamCostMicros == nil || *task.UpstreamCostMicros != want {
				t.Fatalf("task %s cost %v, want %d", id, task.UpstreamCostMicros, want)
			}
			if (c == "ark-main") != (task.UsageCompletionTokens != nil && *task.UsageCompletionTokens > 0) {
				t.Fatalf("task %s on %s: usage %v (Ark reports tokens, the OpenAI protocol none)", id, c, task.UsageCompletionTokens)
			}
			// The seed went to Ark, which takes one; OpenAI takes none, so those tasks forget it.
			if (c == "ark-main") != (task.Seed != nil && *task.Seed == 42) && id != onlyArk {
				t.Fatalf("task %s on %s: seed %v", id, c, task.Seed)
			}
			// Stills: the OpenAI-style provider serves them; for Ark, which serves only the video, the
			// worker made them with ffmpeg. Either way a JPEG thumbnail at the video's size.
			checkThumbnail(t, s, acct.Key, task)
		}
		if testkit.Task(t, s.DB, onlyArk).CredentialID == nil || *testkit.Task(t, s.DB, onlyArk).CredentialID != "ark-main" {
			t.Fatal("references went to the OpenAI credential, which takes none")
		}
		// The 480p task was sold at its size and rendered at the mapped one, and its log says so.
		mini := testkit.Task(t, s.DB, ids[4])
		if mini.Size != "864x496" || mini.RenderedSize == nil || *mini.RenderedSize != "1280x720" {
			t.Fatalf("mapped size: sold %s, rendered %v", mini.Size, mini.RenderedSize)
		}
		var noted []models.TaskEvent
		if s.DB.R.Where("task_id = ? AND detail LIKE ?", mini.ID, "%rendered size 1280x720 (sold 864x496, as its route renders it)%").Find(&noted); len(noted) != 1 {
			t.Fatal("the task log does not say the rendered size differs")
		}
		if used["ark-main"] < 3 || used["oai-main"] < 2 {
			t.Fatalf("tasks per credential %v: the 720p tasks were not spread least-loaded first", used)
		}
		// The providers saw their own model names.
		for _, st := range arkSim.Tasks() {
			if st.Model != "dreamina-seedance-2-0-260128" && st.Model != "dreamina-seedance-2-0-fast-260128" {
				t.Fatalf("Ark simulator got model %q", st.Model)
			}
		}
		for _, st := range oaiSim.Tasks() {
			if st.Model != "sora-2" {
				t.Fatalf("OpenAI-style simulator got model %q", st.Model)
			}
		}

		// Refusals: failed, released, told in our words (no provider, no secret, no provider code).
		for id, code := range map[string]string{policy: "content_policy_violation", rejected: "upstream_rejected"} {
			v := s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed")
			e := v["error"].(map[string]any)
			msg := e["message"].(string)
			if v["status"] != "failed" || e["code"] != code || v["billing"].(map[string]any)["state"] != "released" || !strings.Contains(msg, "reservation was released") {
				t.Fatalf("%s: %v", code, v)
			}
			for _, leak := range []string{"ark", "Ark", "sim", "openai", "OpenAI", "secret", "Sensitive", "invalid_request", "InvalidParameter"} {
				if strings.Contains(msg, leak) {
					t.Fatalf("%s message %q leaks %q", code, msg, leak)
				}
			}
		}

		// The margin report: revenue charged, cost at the configured prices, to the micro-dollar.
		var tasks []models.Task
		s.DB.R.Where("billing_state = 'settled'").Find(&tasks)
		want := map[string][2]int64{}
		for _, task := range tasks {
			w := want[task.Model]
			w[0] += task.AmountMicros
			w[1] += costOf(task)
			want[task.Model] = w
		}
		day := time.Now().UTC().Truncate(24 * time.Hour)
		rep, err := margin.Report(context.Background(), s.DB, day, day)
		if err != nil {
			t.Fatal(err)
		}
		checkMargin(t, rep, want)
		testkit.CheckLedger(t, s.DB)
	})
}

// checkThumbnail downloads a completed task's thumbnail and spritesheet: JPEGs, the thumbnail at the
// video's size.
func checkThumbnail(t *testing.T, s *testkit.Server, key string, task models.Task) {
	t.Helper()
	for _, variant := range []string{"thumbnail", "spritesheet"} {
		r := s.Do(t, "GET", "/v1/videos/"+task.ID+"/content?variant="+variant, key, nil)
		if r.Status != 200 || r.Header.Get("Content-Type") != "image/jpeg" {
			t.Fatalf("%s of %s (on %s): %d %q %.300s", variant, task.ID, *task.CredentialID, r.Status, r.Header.Get("Content-Type"), r.Body)
		}
		img, err := jpeg.Decode(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatalf("%s of %s is not a JPEG: %v", variant, task.ID, err)
		}
		size := task.Size
		if task.RenderedSize != nil {
			size = *task.RenderedSize // a route's size map
		}
		if got := fmt.Sprintf("%dx%d", img.Bounds().Dx(), img.Bounds().Dy()); variant == "thumbnail" && got != size {
			t.Fatalf("thumbnail of %s (on %s) is %s, the video %s", task.ID, *task.CredentialID, got, size)
		}
	}
}

// TestStillsWithoutFFmpeg: with ffmpeg switched off (FFMPEG_PATH=off), a video from a provider that
// serves no stills (Ark) still completes and downloads; its thumbnail and spritesheet answer 404
// variant_unavailable, and the task log says why.
func TestStillsWithoutFFmpeg(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		arkSim := startSim(t, "ark", 200*time.Millisecond, 4, "ark-secret-0002")
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("ark-only", "ark", arkSim.Base, "ark-secret-0002", 2, route("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.18")))
		s := testkit.Start(t, dbURL, upstreamEnv(file, map[string]string{"FFMPEG_PATH": "off"}))
		acct := s.NewAccount(t, "10")
		id := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "a lighthouse"})["id"].(string)
		s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed")
		if r := s.Do(t, "GET", "/v1/videos/"+id+"/content", acct.Key, nil); r.Status != 200 || r.Header.Get("Content-Type") != "video/mp4" {
			t.Fatalf("video: %d %s", r.Status, r.Header.Get("Content-Type"))
		}
		for _, variant := range []string{"thumbnail", "spritesheet"} {
			r := s.Do(t, "GET", "/v1/videos/"+id+"/content?variant="+variant, acct.Key, nil)
			if r.Status != 404 || r.ErrorCode() != "variant_unavailable" || !strings.Contains(string(r.Body), "variant=video") {
				t.Fatalf("%s without ffmpeg: %d %s", variant, r.Status, r.Body)
			}
		}
		var notes []models.TaskEvent
		if err := s.DB.R.Where("task_id = ? AND detail LIKE ?", id, "%no thumbnail or spritesheet%").Find(&notes).Error; err != nil || len(notes) != 1 {
			t.Fatalf("task-log notes on the missing stills: %v, %v", notes, err)
		}
	})
}

// TestUpstreamReloadKeepsTasksOnTheirCredential: a reload takes effect for new tasks at once; a task a
// removed credential holds is still polled and copied with it until it ends; an invalid file is refused
// whole and the running pool stays; and after a restart, a task keeps the credential that took it.
func TestUpstreamReloadKeepsTasksOnTheirCredential(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		simA := startSim(t, "openai", 1500*time.Millisecond, 4, "key-a-0001")
		simB := startSim(t, "ark", 1500*time.Millisecond, 4, "key-b-0001")
		credA := cred("cred-a", "openai", simA.Base, "key-a-0001", 4, route("videogen-2.0-720p", "sora-2", "0.1"))
		credB := cred("cred-b", "ark", simB.Base, "key-b-0001", 4, route("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.2"))
		dir := t.TempDir()
		file := writeFile(t, filepath.Join(dir, "upstreams.yaml"), "upstreams:\n"+credA)
		dataDir := t.TempDir()
		s := testkit.Start(t, dbURL, upstreamEnv(file, map[string]string{"DATA_DIR": dataDir}))
		acct := s.NewAccount(t, "100")
		create := func(s *testkit.Server, prompt string) string {
			return s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": prompt})["id"].(string)
		}
		onCred := func(s *testkit.Server, id string) string {
			var c string
			testkit.Eventually(t, 10*time.Second, "task "+id+" gets a credential", func() bool {
				task := testkit.Task(t, s.DB, id)
				if task.CredentialID != nil && task.UpstreamTaskID != nil {
					c = *task.CredentialID
					return true
				}
				return false
			})
			return c
		}
		t1 := create(s, "first, on A")
		if c := onCred(s, t1); c != "cred-a" {
			t.Fatalf("t1 on %s", c)
		}

		// Replace A by B: new work goes to B at once; A keeps polling t1.
		writeFile(t, file, "upstreams:\n"+credB)
		if err := s.ReloadUpstreams(context.Background(), "test"); err != nil {
			t.Fatal(err)
		}
		t2 := create(s, "second, on B")
		if c := onCred(s, t2); c != "cred-b" {
			t.Fatalf("t2 on %s after the reload", c)
		}
		if a, b := credentialRow(t, s, "cred-a"), credentialRow(t, s, "cred-b"); a.Enabled || !b.Enabled {
			t.Fatalf("after the reload: a enabled %v, b enabled %v", a.Enabled, b.Enabled)
		}

		// An invalid file is refused whole; the pool stays as it was.
		writeFile(t, file, "upstreams:\n"+credA+strings.Replace(credB, "kind: ark", "kind: runway", 1))
		if err := s.ReloadUpstreams(context.Background(), "test"); err == nil || !strings.Contains(err.Error(), "kind") || !strings.Contains(err.Error(), "line") && !strings.Contains(err.Error(), ".yaml:") {
			t.Fatalf("invalid file: %v", err)
		}
		t3 := create(s, "third, still on B")
		if c := onCred(s, t3); c != "cred-b" {
			t.Fatalf("t3 on %s after a refused reload", c)
		}
		// An id reused for another account (kind or base URL) is refused too.
		writeFile(t, file, "upstreams:\n"+strings.Replace(credB, simB.Base, "https://elsewhere.example/api/v3", 1))
		if err := s.ReloadUpstreams(context.Background(), "test"); err == nil || !strings.Contains(err.Error(), "give the new account a new id") {
			t.Fatalf("reused id: %v", err)
		}
		for _, id := range []string{t1, t2, t3} {
			if v := s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed"); v["status"] != "completed" {
				t.Fatalf("%s: %v", id, v)
			}
		}
		if len(simA.Tasks()) != 1 || len(simB.Tasks()) != 2 {
			t.Fatalf("simulator A ran %d tasks, B %d; want 1 and 2", len(simA.Tasks()), len(simB.Tasks()))
		}

		// Restart with B draining and A back: a task B took before the restart finishes on B; new work goes to A.
		writeFile(t, file, "upstreams:\n"+credB)
		if err := s.ReloadUpstreams(context.Background(), "test"); err != nil {
			t.Fatal(err)
		}
		t4 := create(s, "fourth, on B across a restart")
		if c := onCred(s, t4); c != "cred-b" {
			t.Fatalf("t4 on %s", c)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		writeFile(t, file, "upstreams:\n"+credA+strings.Replace(credB, "    models:", "    draining: true\n    models:", 1))
		s2 := testkit.Start(t, dbURL, upstreamEnv(file, map[string]string{"DATA_DIR": dataDir}))
		t5 := create(s2, "fifth, on A: B drains")
		if c := onCred(s2, t5); c != "cred-a" {
			t.Fatalf("t5 on %s while B drains", c)
		}
		for _, id := range []string{t4, t5} {
			if v := s2.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed"); v["status"] != "completed" {
				t.Fatalf("%s: %v", id, v)
			}
		}
		if c := *testkit.Task(t, s2.DB, t4).CredentialID; c != "cred-b" || len(simB.Tasks()) != 3 {
			t.Fatalf("t4 ended on %s; simulator B ran %d tasks", c, len(simB.Tasks()))
		}
		testkit.CheckLedger(t, s2.DB)
	})
}

// TestRefusedKeyTakesNoNewWork: a credential whose key the provider refuses (401) is marked unhealthy in
// the database with the reason, for every instance and for staff, and takes no new task. A task whose
// only submission was refused goes back to the queue and runs on the other credential; a task already
// accepted upstream keeps its credential and is retried, never failed for it. With every key refused,
// create answers 429 no_capacity with Retry-After and writes nothing. A reload after the keys are fixed
// puts the credentials back, and the held task completes on its own credential.
func TestRefusedKeyTakesNoNewWork(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		simA := startSim(t, "openai", 1500*time.Millisecond, 4, "key-a-0001")
		simB := startSim(t, "ark", 200*time.Millisecond, 4, "key-b-0001")
		var revokedA, revokedB atomic.Bool
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("cred-a", "openai", refusing(t, simA, &revokedA, `{"error":{"code":"invalid_api_key","message":"Incorrect API key provided: key-a-0001"}}`), "key-a-0001", 4, route("videogen-2.0-720p", "sora-2", "0.1"))+
			cred("cred-b", "ark", refusing(t, simB, &revokedB, `{"error":{"code":"AuthenticationError","message":"invalid key key-b-0001"}}`)+"/api/v3", "key-b-0001", 4, route("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.2")))
		s := testkit.Start(t, dbURL, upstreamEnv(file, nil))
		acct := s.NewAccount(t, "100")
		create := func(prompt string) string {
			return s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": prompt})["id"].(string)
		}
		// Accepted on A (least loaded, first by id), then A's key is revoked while it runs.
		held := create("accepted before the key was revoked")
		testkit.Eventually(t, 10*time.Second, "the held task accepted upstream", func() bool { return testkit.Task(t, s.DB, held).UpstreamTaskID != nil })
		if c := *testkit.Task(t, s.DB, held).CredentialID; c != "cred-a" {
			t.Fatalf("held task on %s", c)
		}
		revokedA.Store(true)
		testkit.Eventually(t, 10*time.Second, "cred-a marked refused", func() bool { return credentialRow(t, s, "cred-a").AuthError != nil })
		if msg := *credentialRow(t, s, "cred-a").AuthError; !strings.Contains(msg, "401") || strings.Contains(msg, "key-a-0001") {
			t.Fatalf("recorded reason %q", msg)
		}
		// New work goes to B and completes.
		for i := 0; i < 3; i++ {
			id := create(fmt.Sprintf("healthy work %d", i))
			if v := s.WaitStatus(t, acct.Key, id, 20*time.Second, "completed", "failed"); v["status"] != "completed" || *testkit.Task(t, s.DB, id).CredentialID != "cred-b" {
				t.Fatalf("task %d: %v on %v", i, v, testkit.Task(t, s.DB, id).CredentialID)
			}
		}
		// B's key is refused too: a task it could not submit goes back to the queue, and creates are refused.
		revokedB.Store(true)
		bounced := create("refused by B's key")
		testkit.Eventually(t, 10*time.Second, "cred-b marked refused", func() bool { return credentialRow(t, s, "cred-b").AuthError != nil })
		testkit.Eventually(t, 10*time.Second, "the refused task back in the queue", func() bool {
			task := testkit.Task(t, s.DB, bounced)
			return task.CredentialID == nil && task.Status == "queued"
		})
		before := taskCount(t, s)
		r := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "no capacity"})
		if r.Status != 429 || r.ErrorCode() != "no_capacity" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("create with every key refused: %d %s (Retry-After %q)", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		if taskCount(t, s) != before {
			t.Fatal("a refused create wrote a task")
		}
		if task := testkit.Task(t, s.DB, held); task.Status == "failed" || *task.CredentialID != "cred-a" {
			t.Fatalf("the held task: %s on %v", task.Status, task.CredentialID)
		}

		// The operator fixes the keys and reloads: the held task completes on A, the bounced one somewhere.
		revokedA.Store(false)
		revokedB.Store(false)
		if err := s.ReloadUpstreams(context.Background(), "test"); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{held, bounced, create("after the fix")} {
			if v := s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed"); v["status"] != "completed" {
				t.Fatalf("%s: %v", id, v)
			}
		}
		if *testkit.Task(t, s.DB, held).CredentialID != "cred-a" {
			t.Fatal("the held task moved to another credential")
		}
		var events []models.TaskEvent
		s.DB.R.Where("task_id = ? AND detail LIKE ?", bounced, "returned to the queue%").Find(&events)
		if len(events) == 0 {
			t.Fatal("the bounced task's log does not say it returned to the queue")
		}
		testkit.CheckLedger(t, s.DB)
	})
}

// refusing serves u, or answers 401 with body while revoked is set — a provider refusing a revoked key.
func refusing(t *testing.T, u *upstreamSim, revoked *atomic.Bool, body string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if revoked.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(body))
			return
		}
		u.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBreakerMovesNewWorkAway: submissions a credential answers with 5xx open its circuit breaker after
// UPSTREAM_BREAKER_FAILURES in a row; new tasks then go to the other credential; the task it holds is
// retried on it with backoff — a 5xx is never a failure by itself — and completes once the upstream
// recovers. The open breaker is published for the operator. With every credential open, create answers
// 429 no_capacity with Retry-After.
func TestBreakerMovesNewWorkAway(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		simA := startSim(t, "openai", 200*time.Millisecond, 4, "key-a-0001")
		simB := startSim(t, "openai", 200*time.Millisecond, 4, "key-b-0001")
		var downA, downB atomic.Bool
		failing := func(u *upstreamSim, down *atomic.Bool) string {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if down.Load() {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadGateway)
					_, _ = w.Write([]byte(`{"error":{"code":"bad_gateway","message":"upstream down"}}`))
					return
				}
				u.ServeHTTP(w, r)
			}))
			t.Cleanup(srv.Close)
			return srv.URL
		}
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("cred-a", "openai", failing(simA, &downA), "key-a-0001", 4, route("videogen-2.0-720p", "sora-2", "0.1"))+
			cred("cred-b", "openai", failing(simB, &downB), "key-b-0001", 4, route("videogen-2.0-720p", "sora-2-pro", "0.2")))
		s := testkit.Start(t, dbURL, upstreamEnv(file, map[string]string{"UPSTREAM_BREAKER_FAILURES": "2", "UPSTREAM_BREAKER_COOLDOWN": "4s"}))
		acct := s.NewAccount(t, "100")
		create := func(prompt string) string {
			return s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": prompt})["id"].(string)
		}
		downA.Store(true)
		held := create("held by A while it is down")
		testkit.Eventually(t, 10*time.Second, "cred-a's breaker open", func() bool { return !s.Pool.Health.Healthy("cred-a") })
		testkit.Eventually(t, 10*time.Second, "the open breaker published", func() bool {
			var h models.UpstreamHealth
			return s.DB.R.Where("credential_id = ? AND breaker = 'open'", "cred-a").Take(&h).Error == nil && h.Errors >= 2 && strings.Contains(h.LastError, "502")
		})
		moved := create("new work while A is open")
		if v := s.WaitStatus(t, acct.Key, moved, 20*time.Second, "completed", "failed"); v["status"] != "completed" || *testkit.Task(t, s.DB, moved).CredentialID != "cred-b" {
			t.Fatalf("new work: %v", v)
		}

		// Both down and open: refused with Retry-After, nothing written.
		downB.Store(true)
		victim := create("opens B")
		testkit.Eventually(t, 10*time.Second, "cred-b's breaker open", func() bool { return !s.Pool.Health.Healthy("cred-b") })
		before := taskCount(t, s)
		r := s.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "no capacity"})
		if ra, _ := strconv.Atoi(r.Header.Get("Retry-After")); r.Status != 429 || r.ErrorCode() != "no_capacity" || ra < 1 || ra > 4 {
			t.Fatalf("create with every breaker open: %d %s (Retry-After %q)", r.Status, r.Body, r.Header.Get("Retry-After"))
		}
		if taskCount(t, s) != before {
			t.Fatal("a refused create wrote a task")
		}

		// Recovery: the held tasks complete on their own credentials; nothing failed for the outage.
		downA.Store(false)
		downB.Store(false)
		for _, id := range []string{held, victim} {
			if v := s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed"); v["status"] != "completed" {
				t.Fatalf("%s: %v", id, v)
			}
		}
		if *testkit.Task(t, s.DB, held).CredentialID != "cred-a" || *testkit.Task(t, s.DB, victim).CredentialID != "cred-b" {
			t.Fatal("a held task moved")
		}
		testkit.Eventually(t, 10*time.Second, "cred-a's breaker closed", func() bool { return s.Pool.Health.Healthy("cred-a") })
		testkit.CheckLedger(t, s.DB)
	})
}

// checkMargin compares the margin report's per-model totals with want (model → revenue, cost).
func checkMargin(t *testing.T, rep margin.Result, want map[string][2]int64) {
	t.Helper()
	got := map[string][2]int64{}
	var total [2]int64
	for _, m := range rep.Models {
		got[m.Model] = [2]int64{int64(m.Revenue), int64(m.Cost)}
		if m.Uncosted != 0 {
			t.Errorf("%s: %d uncosted tasks", m.Model, m.Uncosted)
		}
	}
	for model, w := range want {
		if got[model] != w {
			t.Errorf("%s: revenue, cost %v; want %v", model, got[model], w)
		}
		total[0] += w[0]
		total[1] += w[1]
	}
	if len(got) != len(want) || int64(rep.Total.Revenue) != total[0] || int64(rep.Total.Cost) != total[1] ||
		rep.Total.Margin() != rep.Total.Revenue-rep.Total.Cost {
		t.Errorf("report %+v; want models %v", rep, want)
	}
}

// TestInvalidUpstreamsFileRefusedAtStart: a server does not start on an upstreams file it would refuse,
// and says which line and key, and which environment variable is missing — never a secret.
func TestInvalidUpstreamsFileRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, filepath.Join(dir, "upstreams.yaml"), "upstreams:\n"+
		cred("good", "openai", "http://127.0.0.1:1", "inline-secret-0001", 2, route("videogen-2.0-720p", "sora-2", "0.1"))+
		strings.Replace(cred("bad", "openai", "http://127.0.0.1:1", "x", 0, route("videogen-2.0-720p", "sora-2", "0.1")), "    secret: x\n", "    secret_env: VIDEOGEN_TEST_UNSET_KEY\n", 1))
	cfg, err := config.Load(testkit.Env(t, testkit.SQLiteURL(t), map[string]string{"UPSTREAMS_FILE": file}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		t.Fatal("the server started on an invalid upstreams file")
	}
	for _, want := range []string{"UPSTREAMS_FILE refused", "upstreams.yaml:15: upstreams[1].max_concurrency: must be a whole number"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "inline-secret-0001") {
		t.Errorf("the error shows a secret: %v", err)
	}
	// Once the shape is right, a secret that cannot be read is the refusal, naming the variable.
	writeFile(t, file, strings.Replace(mustRead(t, file), "max_concurrency: 0", "max_concurrency: 1", 1))
	if _, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil))); err == nil ||
		!strings.Contains(err.Error(), "upstreams[1].secret_env: the environment variable VIDEOGEN_TEST_UNSET_KEY is not set") {
		t.Fatalf("unset secret: %v", err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
