// Package alertcheck_test holds the tests of the Prometheus alert rules (deploy/prometheus): promtool's
// own check and unit tests of the rules, their shape (names, severities, runbooks, a firing and a quiet
// case each), and that every metric a rule names is one a live /metrics exports — so a renamed metric
// cannot leave an alert that silently never fires. It has no code of its own.
package alertcheck_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// rulesDir is deploy/prometheus, from this package's folder (go test runs in it).
var rulesDir = filepath.Join("..", "..", "deploy", "prometheus")

// alertNames are the alerts the rules must define, no more and no fewer: docs/operations.md documents
// each under its name (### VideogenLedgerDrift), and runbook_url links there.
var alertNames = []string{
	"VideogenLedgerDrift", "VideogenLedgerCheckStale", "VideogenQueueBacklogOld", "VideogenTasksOverdue",
	"VideogenUpstreamBreakerOpen", "VideogenUpstreamKeyRefused", "VideogenUpstreamOutOfCredit", "VideogenHigh5xxRate",
	"VideogenMailFailing", "VideogenJobsNotWorked", "VideogenStripeReconcileDifferences", "VideogenStorageErrors",
	"VideogenDatabaseUnavailable", "VideogenRateLimitsNotShared", "VideogenMetricsDatabaseDown", "VideogenInstanceDown",
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// loadRules reads deploy/prometheus/alerts.yml.
func loadRules(t *testing.T) []rule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rulesDir, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Rules []rule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &file); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var out []rule
	for _, g := range file.Groups {
		out = append(out, g.Rules...)
	}
	if len(out) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return out
}

// promtool returns the path of promtool, failing the test when it is missing: the rules would go
// untested, and a skipped test reads like a passed one.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (Debian's prometheus package): run make test-deps")
	}
	return path
}

// TestAlertRulesPromtool: promtool accepts the rules (syntax, PromQL, templates) and every unit test of
// alerts_test.yml passes — each rule fires on the series it is meant for, with its labels and
// annotations, and stays quiet below its threshold or before its `for:` has run out.
func TestAlertRulesPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = rulesDir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
	}
}

// TestAlertRulesShape: the rules are the alerts operators are told of, each with a severity that says
// whether to wake someone, a summary, a description and the runbook section GitHub makes of its
// "### Name" heading in docs/operations.md; and alerts_test.yml has, for each, a case where it fires and
// one where it does not.
func TestAlertRulesShape(t *testing.T) {
	rules := loadRules(t)
	var got []string
	for _, r := range rules {
		got = append(got, r.Alert)
		if r.Alert == "" {
			t.Errorf("a recording rule or a rule without a name: %+v (the file holds alerts only)", r)
			continue
		}
		if s := r.Labels["severity"]; s != "page" && s != "ticket" {
			t.Errorf("%s: severity %q, want page or ticket", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s", r.Alert, a)
			}
		}
		if want := "/docs/operations.md#" + strings.ToLower(r.Alert); !strings.HasPrefix(r.Annotations["runbook_url"], "https://") ||
			!strings.HasSuffix(r.Annotations["runbook_url"], want) {
			t.Errorf("%s: runbook_url %q, want https://…%s", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
	want := slices.Clone(alertNames)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("alerts defined:\n %v\nwant:\n %v", got, want)
	}

	b, err := os.ReadFile(filepath.Join(rulesDir, "alerts_test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			Name  string `yaml:"name"`
			Cases []struct {
				Alert  string `yaml:"alertname"`
				Alerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(b, &tests); err != nil {
		t.Fatalf("alerts_test.yml: %v", err)
	}
	if !slices.Equal(tests.RuleFiles, []string{"alerts.yml"}) {
		t.Errorf("alerts_test.yml tests %v, want alerts.yml", tests.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, c := range tc.Cases {
			if len(c.Alerts) > 0 {
				fires[c.Alert] = true
			} else {
				quiet[c.Alert] = true
			}
		}
	}
	for _, name := range alertNames {
		if !fires[name] {
			t.Errorf("alerts_test.yml has no case where %s fires", name)
		}
		if !quiet[name] {
			t.Errorf("alerts_test.yml has no case where %s stays quiet", name)
		}
	}
}

// TestAlertRunbooks: once docs/operations.md exists, it has a section for every alert, which is where
// runbook_url points.
func TestAlertRunbooks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "operations.md"))
	if os.IsNotExist(err) {
		t.Skip("docs/operations.md is not written yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range alertNames {
		if !regexp.MustCompile(`(?m)^###\s+` + name + `\s*$`).Match(b) {
			t.Errorf("docs/operations.md has no \"### %s\" section for the alert's runbook_url", name)
		}
	}
}
