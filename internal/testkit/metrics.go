package testkit

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Sample is one line of a Prometheus text exposition: a series and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples is a whole scrape.
type Samples struct {
	List []Sample
	Text string // the exposition as served
}

// Find returns the samples of name whose labels include every pair of want (name, value, …).
func (s Samples) Find(name string, want ...string) []Sample {
	var out []Sample
next:
	for _, sm := range s.List {
		if sm.Name != name {
			continue
		}
		for i := 0; i+1 < len(want); i += 2 {
			if sm.Labels[want[i]] != want[i+1] {
				continue next
			}
		}
		out = append(out, sm)
	}
	return out
}

// Value returns the value of the one sample of name with the labels want, and whether there is exactly
// one.
func (s Samples) Value(name string, want ...string) (float64, bool) {
	found := s.Find(name, want...)
	if len(found) != 1 {
		return 0, false
	}
	return found[0].Value, true
}

// ScrapeMetrics reads GET /metrics from the server's metrics listener (METRICS_ADDR, which tests set to
// 127.0.0.1:0 for a free port); it fails the test unless the answer is 200.
func (s *Server) ScrapeMetrics(t testing.TB) Samples {
	t.Helper()
	addr := s.MetricsAddr()
	if addr == "" {
		t.Fatal("the server has no metrics listener: start it with METRICS_ADDR=127.0.0.1:0")
	}
	return Scrape(t, "http://"+addr+"/metrics")
}

// Scrape reads a Prometheus text exposition from url.
func Scrape(t testing.TB, url string) Samples {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain") // the text format, not protobuf
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape %s: %d %v %s", url, resp.StatusCode, err, truncate(b))
	}
	return ParseSamples(t, string(b))
}

var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// ParseSamples reads the text exposition format: comments are skipped, each other line is a series and
// its value.
func ParseSamples(t testing.TB, text string) Samples {
	t.Helper()
	out := Samples{Text: text}
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("metrics: a line without a value: %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics: %q: %v", line, err)
		}
		series := line[:i]
		sm := Sample{Name: series, Labels: map[string]string{}, Value: v}
		if j := strings.IndexByte(series, '{'); j >= 0 {
			sm.Name = series[:j]
			for _, m := range labelRE.FindAllStringSubmatch(series[j:], -1) {
				val, err := strconv.Unquote(`"` + m[2] + `"`)
				if err != nil {
					val = m[2]
				}
				sm.Labels[m[1]] = val
			}
		}
		out.List = append(out.List, sm)
	}
	return out
}
