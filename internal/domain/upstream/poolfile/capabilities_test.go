package poolfile_test

import (
	"strings"
	"testing"

	"videogen/internal/domain/upstream/poolfile"
)

// route is a one-credential file whose 720p route carries the given capability keys.
func route(keys string) string {
	return "upstreams:\n  - id: a\n    kind: openai\n    base_url: https://x.example\n    secret_env: K\n    max_concurrency: 2\n    models:\n" +
		"      videogen-2.0-720p:\n        upstream_model: sora-2\n        cost_per_second: \"0.1\"\n" + keys
}

func TestParseCapabilities(t *testing.T) {
	specs, err := poolfile.Parse("upstreams.yaml", []byte(route(
		"        seconds: [4, 8, 12]\n        sizes: [1280x720, 720x1280]\n        inputs: [first_frame]\n        audio: false\n"+
			"        size_map: {960x960: 1024x1024}\n")), kinds)
	if err != nil {
		t.Fatal(err)
	}
	m := specs[0].Models["videogen-2.0-720p"]
	if got := m.Seconds; len(got) != 3 || got[0] != 4 || got[1] != 8 || got[2] != 12 {
		t.Fatalf("seconds %v", got)
	}
	if got := strings.Join(m.Sizes, ","); got != "1280x720,720x1280" {
		t.Fatalf("sizes %s", got)
	}
	if got := strings.Join(m.Inputs, ","); got != "first_frame" {
		t.Fatalf("inputs %s", got)
	}
	if m.Audio == nil || *m.Audio {
		t.Fatalf("audio %v", m.Audio)
	}
	if m.SizeMap["960x960"] != "1024x1024" || len(m.SizeMap) != 1 {
		t.Fatalf("size map %v", m.SizeMap)
	}

	// Left out, each takes the kind's defaults: nil here, not empty.
	specs, err = poolfile.Parse("upstreams.yaml", []byte(route("")), kinds)
	if err != nil {
		t.Fatal(err)
	}
	if m := specs[0].Models["videogen-2.0-720p"]; m.Seconds != nil || m.Sizes != nil || m.Inputs != nil || m.Audio != nil || m.SizeMap != nil {
		t.Fatalf("undeclared capabilities %+v", m)
	}
}

// TestParseCapabilityRefusals: each mistake is refused with its line, its key, and what is accepted.
func TestParseCapabilityRefusals(t *testing.T) {
	cases := []struct {
		name, keys string
		want       string
	}{
		{"seconds out of range", "        seconds: [3, 8]\n", `upstreams.yaml:11: upstreams[0].models.videogen-2.0-720p.seconds: "3" must be a whole number of seconds from 4 to 15`},
		{"seconds not a number", "        seconds: [eight]\n", `"eight" must be a whole number of seconds from 4 to 15`},
		{"seconds twice", "        seconds: [8, 8]\n", "seconds: 8 is listed twice"},
		{"seconds not a list", "        seconds: 8\n", "seconds: must be a list, e.g. [4, 8]"},
		{"seconds empty", "        seconds: []\n", "seconds: must not be empty (leave the key out for the kind's defaults)"},
		{"size malformed", "        sizes: [1280*720]\n", `sizes: "1280*720" must be a size as WIDTHxHEIGHT, e.g. 1280x720`},
		{"size the alias does not sell", "        sizes: [1792x1024]\n", "sizes: 1792x1024 is not a size of videogen-2.0-720p (its sizes: 1470x630, 1280x720, 1112x834, 960x960, 834x1112, 720x1280); to sell one of those as 1792x1024, use size_map"},
		{"unknown input", "        inputs: [first_frame, mask]\n", `inputs: "mask" is not an input (inputs: first_frame, last_frame, reference_images, reference_videos, reference_audio)`},
		{"audio not a boolean", "        audio: sometimes\n", "audio: must be true (the model can render sound) or false"},
		{"size map from a size not sold", "        size_map: {1920x1080: 1792x1024}\n", "size_map.1920x1080: 1920x1080 is not a size of videogen-2.0-720p"},
		{"size map to a malformed size", "        size_map: {960x960: square}\n", `size_map.960x960: "square" must be the size the model renders instead, as WIDTHxHEIGHT`},
		{"unknown capability key", "        fps: 24\n", "videogen-2.0-720p.fps: unknown key (allowed: upstream_model, cost_per_second, cost_per_million_tokens, seconds, sizes, inputs, audio, size_map)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := poolfile.Parse("upstreams.yaml", []byte(route(c.keys)), kinds)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}
