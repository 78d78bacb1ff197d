package deploycheck_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// alertNames are the alerts of deploy/prometheus/alerts.yml: an operator paged by one must
// find in docs/operations.md what it means and what to do.
var alertNames = []string{
	"VideogenLedgerDrift", "VideogenLedgerCheckStale", "VideogenQueueBacklogOld", "VideogenTasksOverdue",
	"VideogenUpstreamBreakerOpen", "VideogenUpstreamKeyRefused", "VideogenUpstreamOutOfCredit",
	"VideogenHigh5xxRate", "VideogenMailFailing", "VideogenJobsNotWorked", "VideogenStripeReconcileDifferences",
	"VideogenStorageErrors", "VideogenDatabaseUnavailable", "VideogenRateLimitsNotShared",
	"VideogenMetricsDatabaseDown", "VideogenInstanceDown",
}

// TestOperationsAnswersEveryAlert: docs/operations.md has a "### Name" section under "## Alerts" for
// each alert, and no section for an alert that does not exist. Where deploy/prometheus/alerts.yml is
// present, its alerts are held to the same list.
func TestOperationsAnswersEveryAlert(t *testing.T) {
	doc := repoFile(t, "docs/operations.md")
	_, alerts, ok := strings.Cut(doc, "\n## Alerts\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "## Alerts" section`)
	}
	if next := strings.Index(alerts, "\n## "); next >= 0 {
		alerts = alerts[:next]
	}
	var sections []string
	for _, m := range regexp.MustCompile(`(?m)^### (\S+)\s*$`).FindAllStringSubmatch(alerts, -1) {
		sections = append(sections, m[1])
	}
	for _, name := range alertNames {
		if !slices.Contains(sections, name) {
			t.Errorf("docs/operations.md has no \"### %s\" under \"## Alerts\"", name)
		}
	}
	for _, name := range sections {
		if !slices.Contains(alertNames, name) {
			t.Errorf("docs/operations.md answers %s, which is not an alert", name)
		}
	}

	rules, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^\s*-?\s*alert:\s*(\S+)`).FindAllStringSubmatch(string(rules), -1) {
		if !slices.Contains(sections, m[1]) {
			t.Errorf("deploy/prometheus/alerts.yml defines %s, which docs/operations.md does not answer", m[1])
		}
	}
}

// TestOperationsCommandsExist asks the binary about every command docs/operations.md tells an operator
// to run (`videogen …`, or `vg …`, its wrapper): the command, its subcommand and each flag given must
// exist, so the page never sends anyone to a command that is not there.
func TestOperationsCommandsExist(t *testing.T) {
	doc := repoFile(t, "docs/operations.md")
	var code []string // the text inside backticks and fenced blocks: where commands are written
	for i, part := range strings.Split(doc, "```") {
		if i%2 == 1 {
			code = append(code, part)
			continue
		}
		for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(part, -1) {
			code = append(code, m[1])
		}
	}
	root := subcommands(t)
	command := regexp.MustCompile(`(?:^|[\s(])(?:videogen|vg) ([a-z][a-z0-9-]*)((?: [a-z][a-z0-9-]*)?)([^;&|\n]*)`)
	checked := 0
	for _, c := range code {
		for _, m := range command.FindAllStringSubmatch(c, -1) {
			name, sub, rest := m[1], strings.TrimSpace(m[2]), m[3]
			if !root[name] {
				t.Errorf("docs/operations.md runs `videogen %s`, which the binary does not have", name)
				continue
			}
			path := []string{name}
			if subs := subcommands(t, name); len(subs) > 0 {
				if sub == "" {
					continue // the group named in prose ("`videogen accounts …`"), not a command line
				}
				if !subs[sub] {
					t.Errorf("docs/operations.md runs `videogen %s %s`, which the binary does not have", name, sub)
					continue
				}
				path = append(path, sub)
			} else {
				rest = m[2] + rest
			}
			help := videogenHelp(t, path...)
			for _, flag := range regexp.MustCompile(`--[a-z][a-z0-9-]*`).FindAllString(rest, -1) {
				if !strings.Contains(help, flag+" ") {
					t.Errorf("docs/operations.md gives `videogen %s` the flag %s, which it does not take", strings.Join(path, " "), flag)
				}
			}
			checked++
		}
	}
	if checked < 10 {
		t.Errorf("only %d commands found in docs/operations.md: the pattern no longer matches how it writes them", checked)
	}
}
