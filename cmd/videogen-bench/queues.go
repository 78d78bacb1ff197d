package main

import (
	"bytes"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// beforeRiver is the last commit whose e-mail, webhook and payment queues were hand-made (outbox tables
// with lease columns, one loop each); the next moved them onto River (docs/jobs.md).
const beforeRiver = "30f8d24"

// queuesBench is the benchmark both trees run: the same file, copied into the older tree.
const queuesBench = "internal/testkit/queues_bench_test.go"

// queueCases are BenchmarkQueues' cases, in the order they are reported.
var queueCases = []struct{ name, unit string }{
	{"mail/sqlite", "mails/s"}, {"mail/postgres", "mails/s"},
	{"webhooks/sqlite", "deliveries/s"}, {"webhooks/postgres", "deliveries/s"},
}

// measureQueues measures e-mails per second to a local Resend stand-in and webhook deliveries per second
// to a local receiver, on this tree and on the tree before River (checked out of git beside it), in
// turns: before, after, before, after, before, after; each case's median is compared. Both run
// BenchmarkQueues from this tree's file, with n items a run.
func (b *bench) measureQueues(pgURL string, n int) string {
	root, err := os.Getwd()
	if err != nil {
		log.Fatal(err)
	}
	before := filepath.Join(b.work, "before-river")
	if out, err := exec.Command("git", "-C", root, "worktree", "add", "--detach", before, beforeRiver).CombinedOutput(); err != nil {
		log.Fatalf("check out %s beside this tree (the queues' before): %v\n%s", beforeRiver, err, out)
	}
	defer func() { _ = exec.Command("git", "-C", root, "worktree", "remove", "--force", before).Run() }()
	src, err := os.ReadFile(filepath.Join(root, queuesBench))
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(before, queuesBench), src, 0o644); err != nil {
		log.Fatal(err)
	}
	figures := map[string]map[string][]float64{"before": {}, "after": {}}
	for run := 0; run < 3; run++ {
		for _, side := range []struct{ name, dir string }{{"before", before}, {"after", root}} {
			log.Printf("queues: %s River, run %d of 3", side.name, run+1)
			for c, v := range runQueuesBench(side.dir, pgURL, n) {
				figures[side.name][c] = append(figures[side.name][c], v.rate)
				figures[side.name][c+" first"] = append(figures[side.name][c+" first"], v.first)
			}
		}
	}
	var w strings.Builder
	fmt.Fprintf(&w, "### Queued work before and after River\n\n")
	fmt.Fprintf(&w, "BenchmarkQueues (%s), %d items a run, on this tree and on %s (the hand-made queues), "+
		"checked out beside it; three runs each, in turns; the median. Production's pace (JOBS_POLL_INTERVAL 1s). "+
		"The rate is from the first item received to the last; the first's wait, from the start of queueing, is "+
		"beside it (the hand-made queues were woken by the commit on their instance; River polls).\n\n", queuesBench, n, beforeRiver)
	w.WriteString("| case | before (hand-made) | after (River) | after / before | first item, before | first item, after |\n|---|---:|---:|---:|---:|---:|\n")
	for _, c := range queueCases {
		bf, af := median(figures["before"][c.name]), median(figures["after"][c.name])
		share := 0.0
		if bf > 0 {
			share = 100 * af / bf
		}
		fmt.Fprintf(&w, "| %s | %s | %s | %.0f%% | %.0f ms | %.0f ms |\n", c.name, figure(bf, c.unit), figure(af, c.unit), share,
			median(figures["before"][c.name+" first"]), median(figures["after"][c.name+" first"]))
		b.ratios = append(b.ratios, ratio{Measure: "queued " + c.name + ", River against the hand-made queues", Ours: af, Limit: bf,
			Unit: c.unit, Target: 1, Note: "the same benchmark on " + beforeRiver + ", in the same run"})
	}
	return w.String()
}

var benchLine = regexp.MustCompile(`^BenchmarkQueues/(\S+?)(?:-\d+)?\s+\d+\s+\d+ ns/op\s+([\d.]+) \S+/s\s+([\d.]+) ms-to-first`)

// queueFigure is one case of one run: its rate, and the first item's wait in milliseconds.
type queueFigure struct{ rate, first float64 }

// runQueuesBench runs BenchmarkQueues in dir and returns each case's figures.
func runQueuesBench(dir, pgURL string, n int) map[string]queueFigure {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", "^BenchmarkQueues$", "-benchtime", strconv.Itoa(n)+"x", "-count", "1", "./internal/testkit/")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TEST_DATABASE_URL="+pgURL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		log.Fatalf("BenchmarkQueues in %s: %v\n%s", dir, err, out.String())
	}
	got := map[string]queueFigure{}
	for _, line := range strings.Split(out.String(), "\n") {
		if m := benchLine.FindStringSubmatch(line); m != nil {
			rate, _ := strconv.ParseFloat(m[2], 64)
			first, _ := strconv.ParseFloat(m[3], 64)
			got[m[1]] = queueFigure{rate, first}
		}
	}
	if len(got) != len(queueCases) {
		log.Fatalf("BenchmarkQueues in %s gave %d of %d cases:\n%s", dir, len(got), len(queueCases), out.String())
	}
	return got
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[len(s)/2]
}
