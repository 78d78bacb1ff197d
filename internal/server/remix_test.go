package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// TestRemixRoutesTheSource: a remix hands the provider the source as the route can take it. On Ark
// (which takes reference videos) the submission carries the source video as a reference_video content
// item, whose URL serves the source's very bytes; on an OpenAI-style route (a first frame only) the
// source's first frame goes up as input_reference; where no route of the model takes either, 400
// remix_not_supported says why, and nothing is reserved.
func TestRemixRoutesTheSource(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		arkSim := startSim(t, "ark", 200*time.Millisecond, 4, "ark-remix-secret")
		oaiSim := startSim(t, "openai", 200*time.Millisecond, 4, "oai-remix-secret")
		file := writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			cred("ark", "ark", arkSim.Base, "ark-remix-secret", 4, route("videogen-2.0-1080p", "dreamina-seedance-2-0-260128", "0.5")+
				route("videogen-2.0-480p", "dreamina-seedance-2-0-260128", "0.1")+
				"      videogen-2.0-fast-720p:\n        upstream_model: dreamina-seedance-2-0-fast-260128\n        cost_per_second: \"0.1\"\n        inputs: []\n")+
			cred("oai", "openai", oaiSim.Base, "oai-remix-secret", 4, route("videogen-2.0-720p", "sora-2", "0.1")))
		s := testkit.Start(t, dbURL, upstreamEnv(file, nil))
		acct := s.NewAccount(t, "100")
		content := func(id, variant string) []byte {
			r := s.Do(t, "GET", "/v1/videos/"+id+"/content?variant="+variant, acct.Key, nil)
			if r.Status != 200 {
				t.Fatalf("%s of %s: %d %s", variant, id, r.Status, r.Body)
			}
			return r.Body
		}
		completed := func(body map[string]any) string {
			id := s.CreateVideo(t, acct.Key, body)["id"].(string)
			if v := s.WaitStatus(t, acct.Key, id, 30*time.Second, "completed", "failed"); v["status"] != "completed" {
				t.Fatalf("source %v", v)
			}
			return id
		}
		remix := func(id, prompt string) map[string]any {
			r := s.Do(t, "POST", "/v1/videos/"+id+"/remix", acct.Key, map[string]any{"prompt": prompt})
			if r.Status != 200 {
				t.Fatalf("remix of %s: %d %s", id, r.Status, r.Body)
			}
			v := r.JSON(t)
			if v["remixed_from_video_id"] != id {
				t.Fatalf("remix %v", v)
			}
			if done := s.WaitStatus(t, acct.Key, v["id"].(string), 30*time.Second, "completed", "failed"); done["status"] != "completed" {
				t.Fatalf("remix ended %v", done)
			}
			return v
		}

		// Ark: the source video as a reference video, where Seedance takes its size (a 480p video's
		// 428,544 pixels are within 409,600 to 927,408).
		arkSrc := completed(map[string]any{"model": "videogen-2.0-480p", "prompt": "a lighthouse", "seconds": 5})
		remix(arkSrc, "the lighthouse in fog")
		var refURL string
		for _, st := range arkSim.Tasks() {
			if st.Prompt == "the lighthouse in fog" {
				if len(st.Media) != 1 || st.Media[0].Role != "reference_video" || st.InputBytes == 0 {
					t.Fatalf("Ark got media %+v (%d bytes fetched), want the source as one reference_video", st.Media, st.InputBytes)
				}
				refURL = st.Media[0].URL
			}
		}
		if refURL == "" {
			t.Fatal("the remix never reached Ark")
		}
		resp, err := http.Get(refURL)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := content(arkSrc, "video"); resp.StatusCode != 200 || string(got) != string(want) {
			t.Fatalf("the reference video Ark was given (%d, %d bytes) is not the source (%d bytes)", resp.StatusCode, len(got), len(want))
		}

		// A 1080p source (2,073,600 pixels) is more than Seedance takes as a reference video: its first
		// frame goes instead, never a reference Ark would refuse after the reservation.
		bigSrc := completed(map[string]any{"model": "videogen-2.0-1080p", "prompt": "a harbour", "seconds": 5})
		remix(bigSrc, "the harbour at night")
		sentAs := ""
		for _, st := range arkSim.Tasks() {
			if st.Prompt == "the harbour at night" && len(st.Media) == 1 {
				sentAs = st.Media[0].Role
			}
		}
		if sentAs != "first_frame" {
			t.Fatalf("the 1080p source went to Ark as %q, want first_frame", sentAs)
		}

		// OpenAI-style: the source's first frame as input_reference.
		oaiSrc := completed(map[string]any{"model": "videogen-2.0-720p", "prompt": "a windmill", "seconds": 4})
		remix(oaiSrc, "the windmill at dusk")
		frame := sha256.Sum256(content(oaiSrc, "thumbnail"))
		found := false
		for _, st := range oaiSim.Tasks() {
			if st.Prompt == "the windmill at dusk" {
				found = true
				if st.InputReference == nil || st.InputReference.SHA256 != hex.EncodeToString(frame[:]) {
					t.Fatalf("OpenAI got input_reference %+v, want the source's first frame", st.InputReference)
				}
			}
		}
		if !found {
			t.Fatal("the remix never reached the OpenAI-style provider")
		}

		// No route takes a reference video or a first frame: refused, nothing reserved or stored.
		plain := completed(map[string]any{"model": "videogen-2.0-fast-720p", "prompt": "a field", "seconds": 4})
		before := taskCount(t, s)
		_, rowsBefore := s.MediaOnDisk(t)
		r := s.Do(t, "POST", "/v1/videos/"+plain+"/remix", acct.Key, map[string]any{"prompt": "the field in snow"})
		if r.Status != 400 || r.ErrorCode() != "remix_not_supported" || !strings.Contains(string(r.Body), "reference video") {
			t.Fatalf("remix where no route can: %d %s", r.Status, r.Body)
		}
		if taskCount(t, s) != before {
			t.Fatal("a refused remix wrote a task")
		}
		if _, rows := s.MediaOnDisk(t); rows != rowsBefore {
			t.Fatal("a refused remix left a file")
		}
	})
}
