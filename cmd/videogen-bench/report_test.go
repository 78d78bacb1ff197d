package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"videogen/internal/domain/upstream/poolfile"
	"videogen/internal/domain/upstream/providers"
)

// TestBenchDescribesItsUpstreamsAsTheProduct: the worker and bytes runs describe their upstreams with an
// UPSTREAMS_FILE the product itself reads (poolfile, as `videogen serve` loads it), never with the
// deprecated UPSTREAM_* settings, whose use the server logs as a warning.
func TestBenchDescribesItsUpstreamsAsTheProduct(t *testing.T) {
	b := &bench{work: t.TempDir()}
	env := b.upstreamsEnv("worker",
		simCred{id: "bench-sim", url: "http://127.0.0.1:1", models: []string{"videogen-2.0-mini-480p"}, max: 1000},
		simCred{id: "bench-sim-2", url: "http://127.0.0.1:2", models: []string{"videogen-2.0-mini-480p", "videogen-2.0-480p"}, max: 3})
	var file string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "UPSTREAM_") {
			t.Errorf("the bench sets the deprecated %s", k)
		}
		if k == "UPSTREAMS_FILE" {
			file = v
		}
	}
	if file == "" {
		t.Fatalf("no UPSTREAMS_FILE in %q", env)
	}
	specs, err := poolfile.Load(file, providers.Options(false), os.Getenv)
	if err != nil {
		t.Fatalf("the product refuses the bench's upstreams file: %v", err)
	}
	if len(specs) != 2 || specs[0].ID != "bench-sim" || specs[0].Kind != "sim" || specs[0].MaxConcurrency != 1000 ||
		specs[1].BaseURL != "http://127.0.0.1:2" || len(specs[1].Models) != 2 || specs[1].MaxConcurrency != 3 {
		t.Fatalf("the file describes %+v", specs)
	}
}

// TestRatiosSayWhereAndWhen: the table every run ends with sets each figure against its limit with the
// right verdict either way round, lists what each limit is, and is printed under the date, the machine
// and the Go version it was measured with.
func TestRatiosSayWhereAndWhen(t *testing.T) {
	table := ratiosTable([]ratio{
		{Measure: "poll", Ours: 30000, Limit: 120000, Unit: "/s", Target: 0.75, Note: "against the bare handler"},
		{Measure: "worker", Ours: 562, Limit: 500, Unit: "tasks/s", Target: 1},
		{Measure: "RSS", Ours: 131, Limit: 256, Unit: "MiB", Target: 1, LowerIsBetter: true},
	})
	for _, want := range []string{
		"| measure | ours | limit | ratio | target | met |",
		"| poll | 30000 /s | 120000 /s | 25% | ≥ 75% | no |",
		"| worker | 562 tasks/s | 500 tasks/s | 112% | ≥ 100% | yes |",
		"| RSS | 131 MiB | 256 MiB | 51% | ≤ 100% | yes |",
		"- poll: against the bare handler",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
	where := machine()
	for _, want := range []string{time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.GOOS + "/" + runtime.GOARCH, " cores"} {
		if !strings.Contains(where, want) {
			t.Errorf("%q does not say %q", where, want)
		}
	}
}

// TestWriteRegionKeepsTheRest: a run rewrites only its own region of docs/performance.md — the
// hand-written steps around it stay — and appends the region to a file that has none yet.
func TestWriteRegionKeepsTheRest(t *testing.T) {
	file := filepath.Join(t.TempDir(), "performance.md")
	begin, end := "<!-- bench: begin (written by make bench; edits here are lost) -->", "<!-- bench: end -->"
	other := "<!-- bench-scale: begin (written by make bench; edits here are lost) -->\nscale figures\n<!-- bench-scale: end -->"
	if err := os.WriteFile(file, []byte("# Performance\n\n"+begin+"\nold figures\n"+end+"\n\n"+other+"\n\n## Steps\nby hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeRegion(file, "bench", "new figures"); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(file)
	if want := "# Performance\n\n" + begin + "\nnew figures\n" + end + "\n\n" + other + "\n\n## Steps\nby hand\n"; string(got) != want {
		t.Fatalf("after the rewrite:\n%s\nwant:\n%s", got, want)
	}
	fresh := filepath.Join(t.TempDir(), "new.md")
	if err := writeRegion(fresh, "bench", "first figures"); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(fresh); !strings.Contains(string(got), begin+"\nfirst figures\n"+end) {
		t.Fatalf("a file without the region: %q", got)
	}
}
