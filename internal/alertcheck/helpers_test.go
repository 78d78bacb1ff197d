package alertcheck_test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"videogen/internal/testkit"
)

// families scrapes the server's /metrics (METRICS_ADDR) in the text format and parses it with
// Prometheus' own parser, as Prometheus reads it.
func families(t *testing.T, s *testkit.Server) map[string]*dto.MetricFamily {
	t.Helper()
	if s.MetricsAddr() == "" {
		t.Fatal("the server has no metrics listener: start it with METRICS_ADDR=127.0.0.1:0")
	}
	req, err := http.NewRequest("GET", "http://"+s.MetricsAddr()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the one series of the family name whose labels include every pair of
// want (name, value, …), and whether there is exactly one.
func value(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var found []*dto.Metric
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue next
			}
		}
		found = append(found, m)
	}
	if len(found) != 1 {
		return 0, false
	}
	switch m := found[0]; {
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Untyped != nil:
		return m.GetUntyped().GetValue(), true
	}
	return 0, false
}

// exported reports whether a rule's metric name is one the scrape has: a family, or a histogram's or
// summary's _bucket, _count or _sum series.
func exported(fams map[string]*dto.MetricFamily, name string) bool {
	if fams[name] != nil {
		return true
	}
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if f := fams[strings.TrimSuffix(name, suffix)]; strings.HasSuffix(name, suffix) && f != nil &&
			(f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
			return suffix != "_bucket" || f.GetType() == dto.MetricType_HISTOGRAM
		}
	}
	return false
}

var (
	exprString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	exprMatchers = regexp.MustCompile(`\{[^}]*\}`)
	exprRange    = regexp.MustCompile(`\[[^\]]*\]`)
	exprGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	exprName     = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*(?:\s*\()?`)
	exprKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "Inf": true, "NaN": true}
)

// ruleMetrics returns the metric names a PromQL expression reads: what is left of it once strings,
// label matchers, ranges, grouping label lists, function calls and operators are taken out. It is a
// reading of the expression, not a parser (github.com/prometheus/prometheus would bring in all of
// Prometheus for this); TestRuleMetricsReading checks it on the shapes the rules use.
func ruleMetrics(expr string) []string {
	s := exprString.ReplaceAllString(expr, `""`)
	s = exprMatchers.ReplaceAllString(s, " ")
	s = exprRange.ReplaceAllString(s, " ")
	s = exprGrouping.ReplaceAllString(s, " ")
	var out []string
	for _, m := range exprName.FindAllString(s, -1) {
		if strings.HasSuffix(m, "(") || exprKeywords[m] {
			continue // a function, an aggregation or an operator
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// TestRuleMetricsReading: the reading of expressions finds every metric and nothing else — not label
// names, label values, functions, aggregations, operators or numbers.
func TestRuleMetricsReading(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum without (instance, method) (rate(videogen_http_requests_total{status=~"5..", route="/v1/x"}[5m])) / ` +
			`sum without (instance) (rate(videogen_http_requests_total[5m])) > 0.01 and on (job) up{job="videogen"} == 0`: {
			"videogen_http_requests_total", "up"},
		`max without (instance) (avg_over_time(videogen_upstream_breaker_open[10m])) > 0.5`:                     {"videogen_upstream_breaker_open"},
		`time() - max(videogen_ledger_check_timestamp_seconds) > 2 * 3600 or histogram_quantile(0.9, x_bucket)`: {"videogen_ledger_check_timestamp_seconds", "x_bucket"},
		`videogen_a > 1e3 unless videogen_b offset 5m`:                                                          {"videogen_a", "videogen_b"},
		`sum(increase(videogen_storage_errors_total[10m])) by (op) > 2`:                                         {"videogen_storage_errors_total"},
		`label_replace(node_load1, "dst", "$1", "src", "(.*)") > 0`:                                             {"node_load1"},
	} {
		if got := ruleMetrics(expr); !slices.Equal(got, want) {
			t.Errorf("ruleMetrics(%s) = %v, want %v", expr, got, want)
		}
	}
}

// aheadClock is a server clock that runs with real time, ahead by however far the test moves it.
type aheadClock struct{ ahead atomic.Int64 }

func (c *aheadClock) Now() time.Time           { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *aheadClock) Advance(by time.Duration) { c.ahead.Add(int64(by)) }
