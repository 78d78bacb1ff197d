package poolfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"videogen/internal/domain/upstream/poolfile"
	"videogen/internal/domain/upstream/providers"
	"videogen/internal/money"
)

var kinds = poolfile.Options{Kinds: []string{"ark", "gemini", "openai", "sim"}}

// A pool file as docs/upstreams.md shows one, verbatim in shape.
const example = `upstreams:
  - id: ark-main                 # stable; stored on tasks; never reused for another account
    name: BytePlus ModelArk (main)
    kind: ark                    # sim | openai | ark
    base_url: https://ark.example.com/api/v3
    secret_env: ARK_MAIN_KEY     # or secret_file: /run/secrets/ark-main; secret: only outside production
    max_concurrency: 8
    models:                      # the aliases it serves
      videogen-2.0-720p: {upstream_model: seedance-2-0-pro, cost_per_second: "0.18"}
      videogen-2.0-fast-720p: {upstream_model: seedance-2-0-fast, cost_per_second: "0.09"}
  - id: openai-backup
    kind: openai
    base_url: http://127.0.0.1:9090/
    secret: sk-test
    max_concurrency: 2
    draining: true
    models:
      videogen-2.0-720p: {upstream_model: sora-2, cost_per_second: 0.1, cost_per_million_tokens: "1.5"}
`

func TestParseExample(t *testing.T) {
	specs, err := poolfile.Parse("upstreams.yaml", []byte(example), kinds)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 {
		t.Fatalf("%d specs", len(specs))
	}
	a, b := specs[0], specs[1]
	if a.ID != "ark-main" || a.Name != "BytePlus ModelArk (main)" || a.Kind != "ark" || a.BaseURL != "https://ark.example.com/api/v3" ||
		a.SecretEnv != "ARK_MAIN_KEY" || a.MaxConcurrency != 8 || a.Draining || a.Line != 2 {
		t.Fatalf("first spec %+v", a)
	}
	if m := a.Models["videogen-2.0-720p"]; m.UpstreamModel != "seedance-2-0-pro" || m.CostPerSecond != 180_000 {
		t.Fatalf("720p route %+v", m)
	}
	if m := a.Models["videogen-2.0-fast-720p"]; m.UpstreamModel != "seedance-2-0-fast" || m.CostPerSecond != 90_000 {
		t.Fatalf("fast route %+v", m)
	}
	// Unquoted numbers are read from their text, exactly; the trailing slash is dropped; the name defaults to the id.
	if b.Name != "openai-backup" || b.BaseURL != "http://127.0.0.1:9090" || !b.Draining || b.Secret != "sk-test" {
		t.Fatalf("second spec %+v", b)
	}
	if m := b.Models["videogen-2.0-720p"]; m.CostPerSecond != 100_000 || m.CostPerMillionTokens != money.Micros(1_500_000) {
		t.Fatalf("second route %+v", m)
	}
}

// TestParseRefusals: every refusal names the line and the key, and a file with several problems names
// them all.
func TestParseRefusals(t *testing.T) {
	entry := func(extra string) string {
		return "upstreams:\n  - id: a\n    kind: ark\n    base_url: https://x.example/api/v3\n    secret_env: K\n    max_concurrency: 2\n    models:\n      videogen-2.0-720p: {upstream_model: m, cost_per_second: \"0.1\"}\n" + extra
	}
	cases := []struct {
		name, text string
		opt        poolfile.Options
		want       []string // substrings of the error
	}{
		{"empty", "", kinds, []string{"upstreams.yaml: the file is empty"}},
		{"not yaml", "upstreams: [", kinds, []string{"upstreams.yaml: yaml: line 1"}},
		{"no list", "servers: []\n", kinds, []string{"upstreams.yaml:1: servers: unknown key", "upstreams.yaml:1: upstreams: missing"}},
		{"empty list", "upstreams: []\n", kinds, []string{"upstreams.yaml:1: upstreams: must be a non-empty list"}},
		{"unknown key", entry("    region: eu\n"), kinds, []string{"upstreams.yaml:9: upstreams[0].region: unknown key"}},
		{"bad kind", strings.Replace(entry(""), "kind: ark", "kind: runway", 1), kinds, []string{`upstreams.yaml:3: upstreams[0].kind: "runway" is not a known kind (known: ark, gemini, openai, sim)`}},
		{"missing kind", strings.Replace(entry(""), "    kind: ark\n", "", 1), kinds, []string{"upstreams.yaml:2: upstreams[0].kind: missing"}},
		{"bad id", strings.Replace(entry(""), "id: a", "id: Ark Main", 1), kinds, []string{`upstreams.yaml:2: upstreams[0].id: "Ark Main" must be`}},
		{"duplicate id", entry("  - id: a\n    kind: openai\n    base_url: https://y.example\n    secret: s\n    max_concurrency: 1\n    models:\n      videogen-2.0-480p: {upstream_model: m, cost_per_second: \"0\"}\n"), kinds,
			[]string{`upstreams.yaml:9: upstreams[1].id: "a" is already the id of the credential on line 2`}},
		{"base url scheme", strings.Replace(entry(""), "https://x.example/api/v3", "ftp://x.example", 1), kinds, []string{`upstreams.yaml:4: upstreams[0].base_url: "ftp://x.example" must be an absolute http(s) URL`}},
		{"base url with key", strings.Replace(entry(""), "https://x.example/api/v3", "https://k:s@x.example", 1), kinds, []string{"upstreams.yaml:4: upstreams[0].base_url: must not carry credentials"}},
		{"no secret", strings.Replace(entry(""), "    secret_env: K\n", "", 1), kinds, []string{"upstreams.yaml:2: upstreams[0]: needs one of secret_env, secret_file or secret"}},
		{"two secrets", entry("    secret: s\n"), kinds, []string{"upstreams.yaml:2: upstreams[0]: give exactly one of secret_env, secret_file or secret"}},
		{"bad env name", strings.Replace(entry(""), "secret_env: K", "secret_env: $K", 1), kinds, []string{`upstreams.yaml:5: upstreams[0].secret_env: "$K" is not an environment variable name`}},
		{"zero concurrency", strings.Replace(entry(""), "max_concurrency: 2", "max_concurrency: 0", 1), kinds, []string{"upstreams.yaml:6: upstreams[0].max_concurrency: must be a whole number from 1 to 10000"}},
		{"text concurrency", strings.Replace(entry(""), "max_concurrency: 2", "max_concurrency: many", 1), kinds, []string{"upstreams.yaml:6: upstreams[0].max_concurrency"}},
		{"no models", strings.Replace(entry(""), "    models:\n      videogen-2.0-720p: {upstream_model: m, cost_per_second: \"0.1\"}\n", "", 1), kinds, []string{"upstreams.yaml:2: upstreams[0].models: missing"}},
		{"unknown alias", strings.Replace(entry(""), "videogen-2.0-720p:", "videogen-9:", 1), kinds, []string{`upstreams.yaml:8: upstreams[0].models.videogen-9: "videogen-9" is not a public model alias`}},
		{"no upstream model", strings.Replace(entry(""), "upstream_model: m, ", "", 1), kinds, []string{"upstreams.yaml:8: upstreams[0].models.videogen-2.0-720p.upstream_model: missing"}},
		{"no cost", strings.Replace(entry(""), `, cost_per_second: "0.1"`, "", 1), kinds, []string{"upstreams.yaml:8: upstreams[0].models.videogen-2.0-720p.cost_per_second: missing"}},
		{"bad cost", strings.Replace(entry(""), `"0.1"`, `"0.1234567"`, 1), kinds, []string{`upstreams.yaml:8: upstreams[0].models.videogen-2.0-720p.cost_per_second: "0.1234567" must be a non-negative amount`}},
		{"negative cost", strings.Replace(entry(""), `"0.1"`, `"-1"`, 1), kinds, []string{"cost_per_second: \"-1\" must be a non-negative amount"}},
		{"model key", strings.Replace(entry(""), "upstream_model: m,", "upstream_model: m, price: 2,", 1), kinds, []string{"upstreams.yaml:8: upstreams[0].models.videogen-2.0-720p.price: unknown key"}},
		{"draining text", entry("    draining: sometimes\n"), kinds, []string{"upstreams.yaml:9: upstreams[0].draining: must be true or false"}},
		{"inline secret in production", strings.Replace(entry(""), "secret_env: K", "secret: s", 1), poolfile.Options{Kinds: kinds.Kinds, Production: true},
			[]string{"upstreams.yaml:5: upstreams[0].secret: an inline secret is refused in production"}},
		{"simulator in production", strings.Replace(entry(""), "kind: ark", "kind: sim", 1), poolfile.Options{Kinds: kinds.Kinds, Production: true},
			[]string{"upstreams.yaml:3: upstreams[0].kind: the simulator is not a provider"}},
		{"plain http in production", strings.Replace(entry(""), "https://x.example", "http://x.example", 1), poolfile.Options{Kinds: kinds.Kinds, Production: true},
			[]string{"upstreams.yaml:4: upstreams[0].base_url: must be https in production"}},
		{"several problems", strings.Replace(strings.Replace(entry(""), "kind: ark", "kind: x", 1), "max_concurrency: 2", "max_concurrency: -1", 1), kinds,
			[]string{"upstreams.yaml:3: upstreams[0].kind", "upstreams.yaml:6: upstreams[0].max_concurrency"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			specs, err := poolfile.Parse("upstreams.yaml", []byte(c.text), c.opt)
			if err == nil {
				t.Fatalf("accepted: %+v", specs)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
			if specs != nil {
				t.Errorf("a refused file still gave specs: %+v", specs)
			}
		})
	}
	// A file that is right in development is right.
	if _, err := poolfile.Parse("upstreams.yaml", []byte(entry("")), kinds); err != nil {
		t.Fatalf("the base entry is refused: %v", err)
	}
}

// TestResolveSecrets: secrets come from the environment or a file, and an error names the variable or
// file, never a secret.
func TestResolveSecrets(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte("file-secret-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, nil, 0o600)
	specs := []poolfile.Spec{{SecretEnv: "ARK_KEY", Line: 2}, {SecretFile: keyFile, Line: 9}, {Secret: "inline-secret", Line: 15}}
	env := map[string]string{"ARK_KEY": " env-secret-456 "}
	if err := poolfile.Resolve("u.yaml", specs, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if specs[0].Secret != "env-secret-456" || specs[1].Secret != "file-secret-123" || specs[2].Secret != "inline-secret" {
		t.Fatalf("secrets %q %q %q", specs[0].Secret, specs[1].Secret, specs[2].Secret)
	}
	bad := []poolfile.Spec{{SecretEnv: "UNSET_KEY", Line: 2}, {SecretFile: filepath.Join(dir, "missing"), Line: 9}, {SecretFile: empty, Line: 15}}
	err := poolfile.Resolve("u.yaml", bad, func(string) string { return "" })
	for _, w := range []string{"u.yaml:2: upstreams[0].secret_env: the environment variable UNSET_KEY is not set or empty",
		"u.yaml:9: upstreams[1].secret_file:", "u.yaml:15: upstreams[2].secret_file: " + empty + " is empty"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v does not contain %q", err, w)
		}
	}
}

// FuzzParse: no input makes the parser panic, and what it accepts is whole.
func FuzzParse(f *testing.F) {
	f.Add([]byte(example))
	f.Add([]byte("upstreams:\n  - id: a\n"))
	f.Add([]byte("upstreams: {a: b}"))
	f.Add([]byte("- - - x"))
	f.Add([]byte("upstreams:\n  - models: {videogen-2.0-720p: [1, 2]}\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		specs, err := poolfile.Parse("f.yaml", text, kinds)
		if err != nil {
			return
		}
		for _, s := range specs {
			if s.ID == "" || s.Kind == "" || s.BaseURL == "" || s.MaxConcurrency < 1 || len(s.Models) == 0 {
				t.Fatalf("accepted an incomplete spec %+v", s)
			}
		}
	})
}

// TestDocumentedExample: the example in docs/upstreams.md is docs/examples/upstreams.yaml, and it is
// accepted as it stands, in production too.
func TestDocumentedExample(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/upstreams.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../../../docs/examples/upstreams.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```yaml\n"+string(example)+"```") {
		t.Fatal("docs/upstreams.md does not show docs/examples/upstreams.yaml as its example")
	}
	specs, err := poolfile.Parse("upstreams.yaml", example, providers.Options(true))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 4 || !specs[2].Draining || specs[0].Models["videogen-2.0-1080p"].CostPerMillionTokens != 2_500_000 || specs[3].Kind != "gemini" {
		t.Fatalf("example specs %+v", specs)
	}
}
