package deploycheck_test

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// The unit files of deploy/systemd and what each is.
var (
	serverUnits  = []string{"videogen.service", "videogen@.service"}
	oneShotUnits = []string{"videogen-migrate.service", "videogen-backup.service"}
	timerUnits   = []string{"videogen-backup.timer"}
)

func allServices() []string { return slices.Concat(serverUnits, oneShotUnits) }

// unit is a parsed unit file: each section's settings in order, a key given several times kept as
// several values (as systemd adds them up).
type unit map[string][][2]string

func parseUnit(t *testing.T, name string) unit {
	t.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(repoFile(t, filepath.Join("deploy", "systemd", name))))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not key=value", name, line)
			}
			u[section] = append(u[section], [2]string{k, v})
		}
	}
	return u
}

// all returns every value of key in section.
func (u unit) all(section, key string) []string {
	var out []string
	for _, kv := range u[section] {
		if kv[0] == key {
			out = append(out, kv[1])
		}
	}
	return out
}

// one returns the value of key in section ("" and false when it is not set).
func (u unit) one(section, key string) (string, bool) {
	vs := u.all(section, key)
	if len(vs) == 0 {
		return "", false
	}
	return vs[len(vs)-1], true
}

// environment returns the variables the unit's Environment= lines set.
func (u unit) environment() map[string]string {
	env := map[string]string{}
	for _, line := range u.all("Service", "Environment") {
		for _, assign := range strings.Fields(line) {
			k, v, _ := strings.Cut(assign, "=")
			env[k] = v
		}
	}
	return env
}

// TestUnitsVerify runs systemd-analyze verify over every unit, as systemd would load them from
// /etc/systemd/system, and fails on anything it says. There is no running systemd here, so the units go
// into a root folder of their own (--root) with the distribution's units beside them and each program
// they run at its path: the real videogen binary at /usr/local/bin/videogen, and the host's own
// /bin/sh, /bin/kill, /usr/bin/find — which therefore must exist on a Debian host.
func TestUnitsVerify(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	root := t.TempDir()
	copyTree(t, "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/system"))
	etc := filepath.Join(root, "etc/systemd/system")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	programs := map[string]bool{}
	for _, name := range slices.Concat(allServices(), timerUnits) {
		copyFile(t, filepath.Join(repoRoot(t), "deploy", "systemd", name), filepath.Join(etc, name), 0o644)
		for _, section := range parseUnit(t, name) {
			for _, kv := range section {
				if strings.HasPrefix(kv[0], "Exec") {
					programs[execPath(kv[1])] = true
				}
			}
		}
	}
	for program := range programs {
		if program == "/usr/local/bin/videogen" {
			linkOrCopy(t, videogenBinary(t), filepath.Join(root, program))
			continue
		}
		real, err := filepath.EvalSymlinks(program) // /bin/sh is a link to dash
		if err != nil {
			t.Errorf("a unit runs %s, which this Debian host does not have: %v", program, err)
			continue
		}
		copyFile(t, real, filepath.Join(root, program), 0o755)
	}

	// The template is verified as the instances the Caddyfile balances by default.
	names := []string{"videogen.service", "videogen@8081.service", "videogen@8082.service"}
	names = append(names, oneShotUnits...)
	names = append(names, timerUnits...)
	args := append([]string{"verify", "--root=" + root, "--man=no", "--generators=no"}, names...)
	out, err := exec.Command(analyze, args...).CombinedOutput()
	// systemd-analyze verify exits 0 on many complaints (an unknown key, a value it cannot parse is
	// "ignoring"): anything it prints is a finding.
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify (%v):\n%s", err, out)
	}
}

// TestUnitsExposure holds the sandbox to systemd's own measure: `systemd-analyze security` scores what
// a unit leaves open from 0 (nothing) to 10. Ours are at 1.4, and the little left open is what a
// network service needs (the network, its own users' view, the @resources calls Go makes).
func TestUnitsExposure(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	dir := t.TempDir()
	for _, name := range allServices() {
		copyFile(t, filepath.Join(repoRoot(t), "deploy", "systemd", name), filepath.Join(dir, name), 0o644)
	}
	for _, name := range allServices() {
		// --threshold counts tenths: 20 is an exposure of 2.0, "OK" in systemd's words.
		out, err := exec.Command(analyze, "security", "--offline=yes", "--threshold=20", "--no-pager", filepath.Join(dir, name)).CombinedOutput()
		if err != nil {
			t.Errorf("%s: systemd-analyze security scores its exposure above 2.0 (%v):\n%s", name, err, out)
		}
	}
}

// TestUnitsHardened reads each service for the settings the deployment promises
// (docs/operations.md): a user of its own, the file system read-only but for the state folder, no new
// privileges, no capabilities, a system-call filter, and the settings file.
func TestUnitsHardened(t *testing.T) {
	want := map[string]string{
		"DynamicUser":             "yes",
		"User":                    "videogen",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "",
		"RestrictSUIDSGID":        "yes",
		"SystemCallArchitectures": "native",
		"UMask":                   "0077",
		"EnvironmentFile":         "/etc/videogen/videogen.env",
	}
	for _, name := range allServices() {
		u := parseUnit(t, name)
		for key, value := range want {
			if got, ok := u.one("Service", key); !ok || got != value {
				t.Errorf("%s: %s=%s, want %s=%s", name, key, got, key, value)
			}
		}
		if dirs, _ := u.one("Service", "StateDirectory"); !slices.Contains(strings.Fields(dirs), "videogen") {
			t.Errorf("%s: StateDirectory=%s, want the data folder videogen among them", name, dirs)
		}
		if got := u.environment()["DATA_DIR"]; got != "/var/lib/videogen" {
			t.Errorf("%s: DATA_DIR=%q, want /var/lib/videogen, the StateDirectory", name, got)
		}
		if len(u.all("Service", "SystemCallFilter")) == 0 || len(u.all("Service", "RestrictAddressFamilies")) == 0 {
			t.Errorf("%s: no SystemCallFilter or RestrictAddressFamilies", name)
		}
		if got, _ := u.one("Service", "ExecStart"); !strings.Contains(got, "/usr/local/bin/videogen ") {
			t.Errorf("%s: ExecStart=%s does not run /usr/local/bin/videogen", name, got)
		}
	}

	_, example := envExample(t)
	for _, name := range serverUnits {
		u := parseUnit(t, name)
		for key, value := range map[string]string{"Type": "exec", "Restart": "on-failure", "KillSignal": "SIGTERM",
			"ExecStart": "/usr/local/bin/videogen serve"} {
			if got, _ := u.one("Service", key); got != value {
				t.Errorf("%s: %s=%s, want %s", name, key, got, value)
			}
		}
		if got, _ := u.one("Install", "WantedBy"); got != "multi-user.target" {
			t.Errorf("%s: WantedBy=%s, want multi-user.target", name, got)
		}
		if got, _ := u.one("Service", "LimitNOFILE"); got == "" {
			t.Errorf("%s: no LimitNOFILE", name)
		}
		// systemd sends SIGKILL after TimeoutStopSec: it must outlast the drain and the shutdown budget
		// the environment file sets, or a stop would cut requests and tasks the budget promises to finish.
		stop := unitDuration(t, name, u, "TimeoutStopSec")
		budget := envDuration(t, example, "SHUTDOWN_DRAIN_DELAY") + envDuration(t, example, "SHUTDOWN_TIMEOUT")
		if stop <= budget {
			t.Errorf("%s: TimeoutStopSec=%v is not above SHUTDOWN_DRAIN_DELAY + SHUTDOWN_TIMEOUT = %v", name, stop, budget)
		}
		env := u.environment()
		if !strings.HasPrefix(env["ADDR"], "127.0.0.1:") || !strings.HasPrefix(env["METRICS_ADDR"], "127.0.0.1:") {
			t.Errorf("%s: ADDR=%q METRICS_ADDR=%q, want both on loopback (Caddy is the public face)", name, env["ADDR"], env["METRICS_ADDR"])
		}
	}

	migrate := parseUnit(t, "videogen-migrate.service")
	if got, _ := migrate.one("Service", "ExecStart"); got != "/usr/local/bin/videogen migrate" {
		t.Errorf("videogen-migrate.service runs %q, want /usr/local/bin/videogen migrate", got)
	}
	backup := parseUnit(t, "videogen-backup.service")
	if dirs, _ := backup.one("Service", "StateDirectory"); !slices.Contains(strings.Fields(dirs), "videogen-backups") {
		t.Errorf("videogen-backup.service: StateDirectory=%s, want videogen-backups among them", dirs)
	}
	for _, name := range oneShotUnits {
		if got, _ := parseUnit(t, name).one("Service", "Type"); got != "oneshot" {
			t.Errorf("%s: Type=%s, want oneshot", name, got)
		}
	}
	timer := parseUnit(t, "videogen-backup.timer")
	for key, value := range map[string]string{"Persistent": "true"} {
		if got, _ := timer.one("Timer", key); got != value {
			t.Errorf("videogen-backup.timer: %s=%s, want %s", key, got, value)
		}
	}
	if got, _ := timer.one("Timer", "OnCalendar"); got == "" {
		t.Error("videogen-backup.timer has no OnCalendar")
	}
}

// TestBackupFolderIsDated runs the backup unit's command line as systemd would hand it to the shell,
// with a stand-in videogen that prints its arguments: each run names a new folder by the UTC time.
func TestBackupFolderIsDated(t *testing.T) {
	u := parseUnit(t, "videogen-backup.service")
	line, _ := u.one("Service", "ExecStart")
	script, ok := strings.CutPrefix(line, "/bin/sh -c '")
	if !ok || !strings.HasSuffix(script, "'") {
		t.Fatalf("ExecStart=%s: want /bin/sh -c '…'", line)
	}
	// systemd's escapes: %% is %, $$ is $ (no other specifier or variable is used).
	script = strings.NewReplacer("%%", "%", "$$", "$").Replace(strings.TrimSuffix(script, "'"))
	if strings.ContainsAny(strings.NewReplacer("%Y", "", "%m", "", "%d", "", "%H", "", "%M", "", "%S", "").Replace(script), "%") {
		t.Fatalf("the command line has a %% that systemd would read as a specifier: %s", line)
	}
	stub := filepath.Join(t.TempDir(), "videogen")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nprintf '%s\\n' \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UTC().Truncate(time.Second)
	out, err := exec.Command("/bin/sh", "-c", strings.ReplaceAll(script, "/usr/local/bin/videogen", stub)).Output()
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Fields(string(out))
	if len(args) != 3 || args[0] != "backup" || args[1] != "--out" {
		t.Fatalf("videogen got %q, want backup --out DIR", args)
	}
	dir, name := filepath.Split(args[2])
	if dir != "/var/lib/videogen-backups/" {
		t.Errorf("backup folder %s is not under /var/lib/videogen-backups", args[2])
	}
	at, err := time.Parse("2006-01-02T150405Z", name)
	if err != nil || at.Before(before) || at.After(time.Now().UTC()) {
		t.Errorf("backup folder %q is not named by the UTC time of the run (%v)", name, err)
	}
}

// TestTemplateIsTheService: videogen@.service is videogen.service with the port as the instance, so the
// hardening of one is the hardening of the other. Only the description, the comments and the addresses
// may differ, and the template's addresses must follow its instance.
func TestTemplateIsTheService(t *testing.T) {
	single, template := parseUnit(t, "videogen.service"), parseUnit(t, "videogen@.service")
	for _, section := range []string{"Unit", "Service", "Install"} {
		strip := func(u unit) [][2]string {
			var out [][2]string
			for _, kv := range u[section] {
				if kv[0] != "Description" && kv[0] != "Environment" {
					out = append(out, kv)
				}
			}
			return out
		}
		if a, b := strip(single), strip(template); !slices.Equal(a, b) {
			t.Errorf("[%s] differs between videogen.service and videogen@.service:\n%q\n%q", section, a, b)
		}
	}
	env := template.environment()
	if env["ADDR"] != "127.0.0.1:%i" || env["METRICS_ADDR"] != "127.0.0.1:1%i" {
		t.Errorf("videogen@.service: ADDR=%q METRICS_ADDR=%q, want 127.0.0.1:%%i and 127.0.0.1:1%%i", env["ADDR"], env["METRICS_ADDR"])
	}
	if got := single.environment(); got["ADDR"] != "127.0.0.1:8081" || got["METRICS_ADDR"] != "127.0.0.1:18081" {
		t.Errorf("videogen.service: ADDR=%q METRICS_ADDR=%q, want what videogen@8081 gets", got["ADDR"], got["METRICS_ADDR"])
	}
}

// TestUnitCommandsExist asks the binary for each subcommand the units run, so a renamed command cannot
// leave a unit that fails only on the server.
func TestUnitCommandsExist(t *testing.T) {
	commands := map[string]bool{}
	for _, name := range allServices() {
		for _, kv := range parseUnit(t, name)["Service"] {
			if !strings.HasPrefix(kv[0], "Exec") {
				continue
			}
			if m := regexp.MustCompile(`/usr/local/bin/videogen ([a-z-]+)`).FindStringSubmatch(kv[1]); m != nil {
				commands[m[1]] = true
			}
		}
	}
	known := subcommands(t)
	for command := range commands {
		if !known[command] {
			t.Errorf("a unit runs `videogen %s`, which the binary does not have", command)
		}
	}
}

// subcommands returns the commands `videogen [parent…] --help` lists under "Available Commands:".
func subcommands(t *testing.T, parent ...string) map[string]bool {
	t.Helper()
	_, list, _ := strings.Cut(videogenHelp(t, parent...), "Available Commands:\n")
	known := map[string]bool{}
	for _, line := range strings.Split(list, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		if f := strings.Fields(line); len(f) > 0 {
			known[f[0]] = true
		}
	}
	return known
}

// execPath is the program of an Exec*= value, without systemd's prefixes (-, @, +, !, :).
func execPath(value string) string {
	f := strings.Fields(value)
	if len(f) == 0 {
		return ""
	}
	return strings.TrimLeft(f[0], "-@+!:")
}

// unitDuration reads a unit's time span setting ("45s", "2min", "1h"; a bare number is seconds).
func unitDuration(t *testing.T, name string, u unit, key string) time.Duration {
	t.Helper()
	v, _ := u.one("Service", key)
	v = strings.NewReplacer("min", "m", "sec", "s").Replace(v)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		v += "s"
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %s=%q: %v", name, key, v, err)
	}
	return d
}

// envDuration reads a duration the environment example sets.
func envDuration(t *testing.T, example map[string]string, name string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(example[name])
	if err != nil {
		t.Fatalf("deploy/videogen.env.example: %s=%q: %v", name, example[name], err)
	}
	return d
}

// copyTree copies a folder, keeping symbolic links as links (the distribution's unit folder is full of
// aliases).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, 0o644)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// linkOrCopy puts the file src at dst, hard-linked when both are on one file system (the binary built
// with the race detector is large).
func linkOrCopy(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Link(src, dst) != nil {
		copyFile(t, src, dst, 0o755)
	}
}

// copyFile copies one file.
func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}
