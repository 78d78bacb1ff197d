package server_test

import (
	"bytes"
	"fmt"
	"html"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream"
	"videogen/internal/domain/upstream/ark"
	"videogen/internal/domain/upstream/gemini"
	"videogen/internal/domain/upstream/openai"
	"videogen/internal/domain/upstream/sim/mp4synth"
	"videogen/internal/testkit"
)

// TestEveryRowAtItsEdges: each model of each provider's capability table, served as the only route of
// an alias, is sent its edge values through the product — the shortest and longest seconds it renders and
// one beyond each, each input it takes (and some it does not), the combinations its rules couple, a
// reference video at the pixel and duration edges — to the provider's simulator, which refuses from the
// same table in the provider's own words. What the product accepts, the simulator renders (completed);
// what the simulator would refuse, the product refuses first (400, nothing reserved): no task ever fails
// upstream_rejected after its reservation.
func TestEveryRowAtItsEdges(t *testing.T) {
	type served struct{ kind, model, alias string }
	// One route per alias, so each create reaches the row under test.
	kinds := [][]served{
		{{"openai", "sora-2", "videogen-2.0-720p"}, {"openai", "sora-2-pro", "videogen-2.0-fast-720p"}},
		{{"ark", "dreamina-seedance-2-0-260128", "videogen-2.0-720p"}, {"ark", "dreamina-seedance-2-0-fast-260128", "videogen-2.0-fast-720p"},
			{"ark", "seedance-1-5-pro-251215", "videogen-2.0-mini-720p"}, {"ark", "seedance-1-0-pro-250528", "videogen-2.0-1080p"},
			{"ark", "seedance-1-0-pro-fast-251015", "videogen-2.0-480p"}, {"ark", "seedance-1-0-lite-t2v-250428", "videogen-2.0-fast-480p"},
			{"ark", "seedance-1-0-lite-i2v-250428", "videogen-2.0-mini-480p"}},
		{{"gemini", "veo-3.1-generate-preview", "videogen-2.0-720p"}, {"gemini", "veo-3.1-fast-generate-preview", "videogen-2.0-fast-720p"},
			{"gemini", "veo-3.1-lite-generate-preview", "videogen-2.0-mini-720p"}, {"gemini", "veo-3.0-generate-001", "videogen-2.0-1080p"},
			{"gemini", "veo-3.1-generate-preview", "videogen-2.0-fast-1080p"}},
	}
	tables := map[string]upstream.Table{"openai": openai.Models, "ark": ark.Models, "gemini": gemini.Models}
	movie := func(w, h, secs int) []byte {
		var b bytes.Buffer
		if _, err := mp4synth.Write(&b, mp4synth.Params{Width: w, Height: h, Seconds: secs}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		for _, routes := range kinds {
			kind := routes[0].kind
			t.Run(kind, func(t *testing.T) {
				// The simulator refuses at submission, as the providers do: an accepted submission is the
				// provider's yes, so the tasks are left running (an hour) and never rendered here.
				s := startSim(t, kind, time.Hour, 200, "key-"+kind)
				var file strings.Builder
				file.WriteString("upstreams:\n")
				var models strings.Builder
				for _, r := range routes {
					models.WriteString(route(r.alias, r.model, "0.1"))
				}
				file.WriteString(cred(kind, kind, s.Base, "key-"+kind, 200, models.String()))
				srv := testkit.Start(t, dbURL, upstreamEnv(writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), file.String()),
					map[string]string{"MAX_QUEUED_PER_ACCOUNT": "500"}))
				acct := srv.NewAccount(t, "10000")
				up := srv.Upload(t, acct.Key, "", testkit.File("input_reference", "first.png", testkit.PNG(t, 640, 640)),
					testkit.File("image_files", "ref.png", testkit.PNG(t, 640, 640)),
					testkit.File("video_files", "edge-small.mp4", movie(640, 640, 2)),
					testkit.File("video_files", "big.mp4", movie(1920, 1080, 3)),
					testkit.File("audio_files", "voice.wav", testkit.WAV(48000)),
					testkit.File("audio_files", "short.mp3", testkit.Tone(t, "1s.mp3")),
					testkit.File("audio_files", "long.mp3", testkit.Tone(t, "16s.mp3"))).Answer(t)
				first, ref, small, big, voice := *up.StartImageURL, up.ImageURLs[0], up.VideoURLs[0], up.VideoURLs[1], up.AudioURLs[0]
				short, long := up.AudioURLs[1], up.AudioURLs[2]

				accepted := map[string]string{} // prompt → task id
				for _, r := range routes {
					row := tables[kind][r.model]
					caps, _ := upstream.RouteCaps(row, r.alias)
					size := caps.Sizes[0]
					secs := caps.Seconds
					lo, hi := secs[0], secs[len(secs)-1]
					asks := []map[string]any{
						{"seconds": lo}, {"seconds": hi}, {"seconds": lo - 1}, {"seconds": hi + 1},
						{"seconds": hi, "start_image_url": first},
						{"seconds": lo, "start_image_url": first, "end_image_url": first},
						{"seconds": hi, "start_image_url": first, "end_image_url": first},
						{"seconds": hi, "end_image_url": first},
						{"seconds": hi, "image_urls": []string{ref}},
						{"seconds": hi, "image_urls": []string{ref}, "start_image_url": first},
						{"seconds": min(hi, 15), "video_urls": []string{small}},
						{"seconds": min(hi, 15), "video_urls": []string{big}},
						{"seconds": min(hi, 15), "video_urls": []string{small}, "audio_urls": []string{voice}},
						{"seconds": min(hi, 15), "audio_urls": []string{voice}},
						{"seconds": min(hi, 15), "video_urls": []string{small}, "audio_urls": []string{short}},
						{"seconds": min(hi, 15), "video_urls": []string{small}, "audio_urls": []string{long}},
						{"seconds": min(hi, 15), "video_urls": []string{small}, "audio_urls": []string{voice, voice, voice}},
					}
					for _, other := range caps.Sizes[1:] {
						asks = append(asks, map[string]any{"seconds": hi, "size": other})
					}
					for i, ask := range asks {
						body := map[string]any{"model": r.alias, "prompt": fmt.Sprintf("%s edge %d", r.model, i), "size": size}
						for k, v := range ask {
							body[k] = v
						}
						if n, ok := body["seconds"].(int); ok && (n < 4 || n > 15) {
							continue // outside what the API sells at all: refused as any create is
						}
						before := taskCount(t, srv)
						resp := srv.Do(t, "POST", "/v1/videos", acct.Key, body)
						switch {
						case resp.Status == 200:
							accepted[body["prompt"].(string)] = resp.JSON(t)["id"].(string)
						case resp.Status == 400 && slices.Contains([]string{"unsupported_value", "unsupported_input_combination"}, resp.ErrorCode()):
							if taskCount(t, srv) != before {
								t.Fatalf("%s %v: refused, but a task was written", r.model, ask)
							}
						default:
							t.Fatalf("%s %v: %d %s", r.model, ask, resp.Status, resp.Body)
						}
					}
				}
				if len(accepted) == 0 {
					t.Fatal("nothing was accepted")
				}
				if kind == "ark" {
					// Seedance 2.0's reference audio, judged by the probed duration of each file (an MP3 by
					// its frames, a WAV by its data): 2 to 15 s each, 15 s together.
					for _, c := range []struct {
						audio      []string
						param, msg string
					}{
						{[]string{short}, "audio_urls[0]", "lasts 1 s"},
						{[]string{voice, long}, "audio_urls[1]", "lasts 16 s"},
						{[]string{voice, voice, voice}, "audio_urls", "add up to 18 s"},
					} {
						resp := srv.Do(t, "POST", "/v1/videos", acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "a choir",
							"seconds": 8, "video_urls": []string{small}, "audio_urls": c.audio})
						if resp.Status != 400 || resp.ErrorCode() != "unsupported_value" || resp.JSON(t)["error"].(map[string]any)["param"] != c.param ||
							!strings.Contains(string(resp.Body), c.msg) {
							t.Errorf("reference audio %v: %d %s; want 400 unsupported_value on %s saying %q", c.audio, resp.Status, resp.Body, c.param, c.msg)
						}
					}
				}
				// Every accepted create reaches the provider and is taken; none fails (a refusal upstream
				// would fail it upstream_rejected).
				testkit.Eventually(t, 60*time.Second, "every accepted task taken by the simulator", func() bool {
					// Distinct prompts: a submission whose answer was lost is made again, and a provider
					// without an idempotency key (Gemini, Ark) then holds two operations of it.
					taken := map[string]bool{}
					for _, task := range s.Tasks() {
						if _, ok := accepted[task.Prompt]; ok {
							taken[task.Prompt] = true
						}
					}
					for prompt, id := range accepted {
						if task := testkit.Task(t, srv.DB, id); task.Status == "failed" {
							t.Fatalf("%q: accepted by the product, refused by the provider: %s %s", prompt, deref(task.ErrorCode), deref(task.ErrorMessage))
						}
					}
					return len(taken) == len(accepted)
				}, func() string {
					return fmt.Sprintf("%d accepted, simulator has %d tasks", len(accepted), len(s.Tasks()))
				})
			})
		}
	})
}

// TestProviderErrorsInTheirClass: a provider's refusal that needs someone to act on one model closes
// that route and fails the task at once with its money released (Ark's SetLimitExceeded, with no other
// route: model_unavailable, and the model leaves /v1/models), never retried until RUN_TIMEOUT; Veo's
// audio filter is worth one more submission on the same route, which renders; and what the video echoes
// is what was sent: no seed where the provider takes none, the sound a model always renders.
func TestProviderErrorsInTheirClass(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		arkSim := startSim(t, "ark", 50*time.Millisecond, 8, "key-ark")
		veoSim := startSim(t, "gemini", 50*time.Millisecond, 8, "key-veo")
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("ark", "ark", arkSim.Base, "key-ark", 4, route("videogen-2.0-720p", "dreamina-seedance-2-0-260128", "0.1"))+
			cred("veo", "gemini", veoSim.Base, "key-veo", 4, route("videogen-2.0-fast-720p", "veo-3.1-generate-preview", "0.1")))
		s := testkit.Start(t, dbURL, upstreamEnv(file, map[string]string{"RUN_TIMEOUT": "1h"}))
		acct := s.NewAccount(t, "100")

		limited := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "[sim:set-limit] a kite", "seconds": 5})["id"].(string)
		v := s.WaitStatus(t, acct.Key, limited, 30*time.Second, "failed", "completed")
		e, _ := v["error"].(map[string]any)
		if v["status"] != "failed" || e["code"] != "model_unavailable" || v["billing"].(map[string]any)["state"] != "released" {
			t.Fatalf("a task on a route the provider closed: %v", v)
		}
		for _, m := range s.Do(t, "GET", "/v1/models", acct.Key, nil).JSON(t)["data"].([]any) {
			if m.(map[string]any)["id"] == "videogen-2.0-720p" {
				t.Fatal("the closed route's model is still listed")
			}
		}

		// /v1/models and /pricing word the rules of the route that renders the model now.
		var rules string
		for _, m := range s.Do(t, "GET", "/v1/models", acct.Key, nil).JSON(t)["data"].([]any) {
			if m := m.(map[string]any); m["id"] == "videogen-2.0-fast-720p" {
				rules = fmt.Sprint(m["rules"])
			}
		}
		if !strings.Contains(rules, "first + last frame: 8 s only") || !strings.Contains(rules, "reference images: 8 s, 16:9 only") {
			t.Fatalf("the Veo model's rules in /v1/models: %q", rules)
		}
		pricing := s.Do(t, "GET", "/pricing", "", nil)
		page := html.UnescapeString(string(pricing.Body))
		if pricing.Status != 200 || !strings.Contains(page, "first + last frame: 8 s only") || !strings.Contains(page, "reference images: 8 s, 16:9 only") {
			t.Fatalf("/pricing does not word the Veo model's rules: %d", pricing.Status)
		}

		seed := 42
		filtered := s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-fast-720p", "prompt": "[sim:audio-filter-once] a choir", "seconds": 8, "seed": seed})["id"].(string)
		v = s.WaitStatus(t, acct.Key, filtered, 30*time.Second, "completed", "failed")
		if v["status"] != "completed" {
			t.Fatalf("an audio-filtered video was not submitted once more: %v", v)
		}
		if seed, present := v["seed"]; !present || seed != nil || v["generate_audio"] != true {
			t.Fatalf("the video echoes seed %v (want null) and generate_audio %v; Veo was sent no seed and always renders sound", v["seed"], v["generate_audio"])
		}
		var log []string
		if err := s.DB.R.Table("task_events").Where("task_id = ?", filtered).Order("id").Pluck("detail", &log).Error; err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(log, "\n")
		for _, want := range []string{"seed not sent: veo-3.1-generate-preview takes no seed", "submitting once more on upstream credential veo"} {
			if !strings.Contains(joined, want) {
				t.Fatalf("task log lacks %q:\n%s", want, joined)
			}
		}
		if n := len(veoSim.Tasks()); n != 2 {
			t.Fatalf("Veo got %d operations, want 2 (the filtered one and its one retry)", n)
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
