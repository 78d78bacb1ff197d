package handlers_test

import (
	"html"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"videogen/internal/testkit"
)

// TestDashboardCurlRuns pastes the dashboard's first request into bash, as the page asks, with the key
// in VIDEOGEN_API_KEY (the one name the README, the docs and the CLI use): it creates the video. Each
// line but the last ends with a backslash, so the shell reads one command.
func TestDashboardCurlRuns(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("the test needs curl: %v", err)
	}
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"TEST_TOPUPS": "1", "WORKERS": "false"})
	b := signUpVerified(t, s, "paste@example.com")
	addFunds(t, b, "5")
	key := createKey(t, b, "terminal")
	p := b.get("/console")
	p.contains(t, "export VIDEOGEN_API_KEY=vg_…")
	p.lacks(t, "VIDEOGEN_KEY")
	m := regexp.MustCompile(`(?s)<pre class="code shell" id="first-curl">(.*?)</pre>`).FindStringSubmatch(p.Body)
	if m == nil {
		t.Fatal("no curl command on the dashboard")
	}
	command := html.UnescapeString(m[1])
	lines := strings.Split(command, "\n")
	for i, l := range lines {
		if (i < len(lines)-1) != strings.HasSuffix(l, " \\") {
			t.Errorf("line %d of the command %q: every line but the last ends with a backslash", i+1, l)
		}
	}
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "curl "+s.Cfg.PublicBaseURL+"/v1/videos") || !strings.Contains(command, "$VIDEOGEN_API_KEY") {
		t.Fatalf("the dashboard's command:\n%s", command)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", command)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "VIDEOGEN_API_KEY=" + key}
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`"id":"video_\w+"`).Match(out) || !strings.Contains(string(out), `"status":"queued"`) {
		t.Fatalf("the pasted command: %v\n%s", err, out)
	}
}
