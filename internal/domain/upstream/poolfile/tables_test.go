package poolfile_test

import (
	"fmt"
	"strings"
	"testing"

	"videogen/internal/domain/upstream/poolfile"
	"videogen/internal/domain/upstream/providers"
	"videogen/models"
)

// tableRoute is a one-credential file of kind serving alias on model, with extra keys.
func tableRoute(kind, alias, model, keys string) string {
	return fmt.Sprintf("upstreams:\n  - id: a\n    kind: %s\n    base_url: https://x.example\n    secret_env: K\n    max_concurrency: 2\n    models:\n"+
		"      %s:\n        upstream_model: %s\n        cost_per_second: \"0.1\"\n%s", kind, alias, model, keys)
}

// TestDeclarationsOnlyNarrowTheTable: a route renders its model's row; a declaration may narrow it, and
// one wider than the row is refused at load with the line, the key and what the model renders; a model
// the kind's table does not list is refused unless the route declares what it renders in full.
func TestDeclarationsOnlyNarrowTheTable(t *testing.T) {
	opt := providers.Options(false)
	narrowed, err := poolfile.Parse("upstreams.yaml", []byte(tableRoute("openai", "videogen-2.0-720p", "sora-2", "        seconds: [4, 8]\n")), opt)
	if err != nil {
		t.Fatal(err)
	}
	if c := narrowed[0].Models["videogen-2.0-720p"].Caps; fmt.Sprint(c.Seconds) != "[4 8]" || fmt.Sprint(c.Sizes) != "[1280x720 720x1280]" || !c.AudioAlways {
		t.Fatalf("narrowed sora-2: %+v", c)
	}
	full := "        seconds: [5, 10]\n        sizes: [1280x720]\n        inputs: []\n        audio: false\n"
	unlisted, err := poolfile.Parse("upstreams.yaml", []byte(tableRoute("ark", "videogen-2.0-720p", "ep-20261129-abcde", full)), opt)
	if err != nil {
		t.Fatal(err)
	}
	if c := unlisted[0].Models["videogen-2.0-720p"].Caps; fmt.Sprint(c.Seconds) != "[5 10]" || c.Audio || len(c.Inputs) != 0 || !c.Seed {
		t.Fatalf("declared in full: %+v", c)
	}
	// A model the table does not know still keeps its provider's rules: Seedance takes frames or
	// references, not both.
	withInputs, err := poolfile.Parse("upstreams.yaml", []byte(tableRoute("ark", "videogen-2.0-720p", "ep-20261129-abcde",
		"        seconds: [5]\n        sizes: [1280x720]\n        inputs: [first_frame, reference_images]\n        audio: true\n")), opt)
	if err != nil {
		t.Fatal(err)
	}
	mixed := models.VideoRequest{Model: "videogen-2.0-720p", Seconds: 5, Size: "1280x720", TaskInputs: models.TaskInputs{StartImageURL: "f", ImageURLs: []string{"r"}}}
	if c := withInputs[0].Models["videogen-2.0-720p"].Caps; c.RuleRefusal(mixed) == nil || c.Renders(mixed) {
		t.Fatalf("an endpoint id takes frames with references: %+v", c.Rules)
	}
	for _, c := range []struct {
		name, kind, alias, model, keys, want string
	}{
		{"seconds wider", "openai", "videogen-2.0-720p", "sora-2", "        seconds: [4, 10]\n",
			"upstreams.yaml:11: upstreams[0].models.videogen-2.0-720p.seconds: 10 seconds is wider than the model's table; sora-2 renders seconds 4, 8, 12, sizes 1280x720, 720x1280, inputs first_frame, always with sound"},
		{"a size sora-2 does not render", "openai", "videogen-2.0-720p", "sora-2", "        sizes: [960x960]\n", "sizes: 960x960 is wider than the model's table"},
		{"inputs wider", "openai", "videogen-2.0-720p", "sora-2", "        inputs: [first_frame, last_frame]\n", "inputs: last_frame is wider than the model's table"},
		{"sound on a silent model", "ark", "videogen-2.0-720p", "seedance-1-0-pro-250528", "        audio: true\n", "audio: the model renders silent video only"},
		{"silence on a model that always sounds", "gemini", "videogen-2.0-720p", "veo-3.1-generate-preview", "        audio: false\n", "audio: the model renders sound whatever is asked"},
		{"15 s on Seedance 1.5 pro", "ark", "videogen-2.0-720p", "seedance-1-5-pro-251215", "        seconds: [12, 15]\n", "seconds: 15 seconds is wider than the model's table"},
		{"reference videos on Seedance 1.0", "ark", "videogen-2.0-720p", "seedance-1-0-pro-250528", "        inputs: [reference_videos]\n", "inputs: reference_videos is wider"},
		{"1080p on Seedance 2.0 fast", "ark", "videogen-2.0-1080p", "dreamina-seedance-2-0-fast-260128", "",
			"upstreams[0].models.videogen-2.0-1080p: dreamina-seedance-2-0-fast-260128 renders none of videogen-2.0-1080p's sizes"},
		{"Veo on a 480p alias", "gemini", "videogen-2.0-480p", "veo-3.1-generate-preview", "", "renders none of videogen-2.0-480p's sizes"},
		{"size map to a size the model does not render", "openai", "videogen-2.0-720p", "sora-2", "        size_map: {960x960: 1024x1024}\n", "size_map: 960x960 → 1024x1024: the model does not render 1024x1024"},
		{"an unlisted model", "openai", "videogen-2.0-720p", "sora-3", "        seconds: [4]\n",
			`upstreams[0].models.videogen-2.0-720p.upstream_model: "sora-3" is not in the openai model table (known: sora-2, sora-2-2025-10-06, sora-2-2025-12-08, sora-2-pro, sora-2-pro-2025-10-06); a route to another model must declare what it renders in full — add audio, inputs, sizes`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := poolfile.Parse("upstreams.yaml", []byte(tableRoute(c.kind, c.alias, c.model, c.keys)), opt)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant it to contain %q", err, c.want)
			}
		})
	}
}
