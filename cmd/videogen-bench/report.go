package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// ratio is one line of the table every run ends with: one of our figures set against its limit, both
// measured in the same run on the same machine.
type ratio struct {
	Measure     string  // what was measured
	Ours, Limit float64 // in Unit
	Unit        string  // "/s", "tasks/s", "MB/s", "MiB", "ms"
	// LowerIsBetter is set for sizes and latencies: the target is Ours ≤ Target×Limit, not ≥.
	LowerIsBetter bool
	Target        float64 // the share of Limit ours must reach (or stay under)
	Note          string  // what the limit is, when not obvious
}

// Met reports whether the figure meets its target.
func (r ratio) Met() bool {
	if r.LowerIsBetter {
		return r.Ours <= r.Target*r.Limit
	}
	return r.Ours >= r.Target*r.Limit
}

func (r ratio) row() string {
	share := 0.0
	if r.Limit > 0 {
		share = 100 * r.Ours / r.Limit
	}
	op, verdict := "≥", "no"
	if r.LowerIsBetter {
		op = "≤"
	}
	if r.Met() {
		verdict = "yes"
	}
	return fmt.Sprintf("| %s | %s | %s | %.0f%% | %s %.0f%% | %s |", r.Measure, figure(r.Ours, r.Unit), figure(r.Limit, r.Unit), share, op, 100*r.Target, verdict)
}

func figure(v float64, unit string) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case v >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

// ratiosTable is the table of every ratio taken in this run, with what each limit is.
func ratiosTable(rs []ratio) string {
	var w strings.Builder
	w.WriteString("| measure | ours | limit | ratio | target | met |\n|---|---:|---:|---:|---|---|\n")
	for _, r := range rs {
		w.WriteString(r.row() + "\n")
	}
	var notes []string
	for _, r := range rs {
		if r.Note != "" {
			notes = append(notes, "- "+r.Measure+": "+r.Note)
		}
	}
	if len(notes) > 0 {
		w.WriteString("\n" + strings.Join(notes, "\n") + "\n")
	}
	return w.String()
}

// machine describes where the figures were taken: a figure means nothing without it.
func machine() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s on %s (%s, %d cores, %s RAM, %s/%s), %s", time.Now().UTC().Format("2006-01-02 15:04 MST"), host, cpuModel(),
		runtime.NumCPU(), memTotal(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func memTotal() string {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "?"
	}
	var kb int64
	_, _ = fmt.Sscanf(between(string(b), "MemTotal:", "\n"), "%d", &kb)
	return fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
}

// writeRegion replaces the part of file between the markers of region with content, leaving the rest of
// the file — the hand-written history of the work, its profiles — as it is. A file without the markers
// gets the region appended.
func writeRegion(file, region, content string) error {
	begin, end := "<!-- "+region+": begin (written by make bench; edits here are lost) -->", "<!-- "+region+": end -->"
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("read %s: %w", file, err)
	}
	block := begin + "\n" + content + "\n" + end
	var out []byte
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i >= 0 && j > i {
		out = append(append(append([]byte{}, old[:i]...), block...), old[j+len(end):]...)
	} else {
		out = append(append(old, '\n'), block+"\n"...)
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
