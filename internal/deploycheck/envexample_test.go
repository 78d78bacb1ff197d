package deploycheck_test

import (
	"regexp"
	"slices"
	"testing"

	"videogen/internal/infra/config"
)

// setByUnits are the settings the systemd units set (Environment=): the example shows each commented
// out, with the value videogen.service gives, because a value in the file would override the unit's.
var setByUnits = []string{"ADDR", "METRICS_ADDR", "DATA_DIR"}

// TestEnvExampleNamesEverySetting holds deploy/videogen.env.example to config.Config both ways: every
// setting of the service is in it, and everything in it is a setting of the service (or an upstream key
// named by secret_env in docs/examples/upstreams.yaml, which it shows how to provide). A setting shown
// commented out shows its default, so that default must be the code's.
func TestEnvExampleNamesEverySetting(t *testing.T) {
	names, values := envExample(t)
	defaults := map[string]string{}
	for _, v := range config.Variables() {
		defaults[v.Name] = v.Default
		if _, ok := values[v.Name]; !ok {
			t.Errorf("deploy/videogen.env.example does not name %s (%s)", v.Name, v.Help)
		}
	}
	upstreamKeys := map[string]bool{}
	for _, m := range regexp.MustCompile(`secret_env: *([A-Z][A-Z0-9_]*)`).FindAllStringSubmatch(repoFile(t, "docs/examples/upstreams.yaml"), -1) {
		upstreamKeys[m[1]] = true
	}
	for _, name := range names {
		_, known := defaults[name]
		if !known && !upstreamKeys[name] {
			t.Errorf("deploy/videogen.env.example names %s, which is not a setting of the service", name)
		}
	}
	commented := commentedSettings(t)
	unitEnv := parseUnit(t, "videogen.service").environment()
	for _, name := range setByUnits {
		if !commented[name] || values[name] != unitEnv[name] {
			t.Errorf("deploy/videogen.env.example: %s must be commented out with videogen.service's value %q (the unit sets it)", name, unitEnv[name])
		}
	}
	for name := range commented {
		def, known := defaults[name]
		if known && !slices.Contains(setByUnits, name) && values[name] != def {
			t.Errorf("deploy/videogen.env.example shows %s=%s commented out, as if it were the default; the default is %q", name, values[name], def)
		}
	}

	// Production's own settings, as docs/operations.md describes the deployment.
	for name, want := range map[string]string{"APP_ENV": "production", "TRUSTED_PROXIES": "127.0.0.1"} {
		if commented[name] || values[name] != want {
			t.Errorf("deploy/videogen.env.example: %s=%s, want %s set", name, values[name], want)
		}
	}
}

// commentedSettings are the settings the example shows commented out.
func commentedSettings(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# ([A-Z][A-Z0-9_]*)=`).FindAllStringSubmatch(repoFile(t, "deploy/videogen.env.example"), -1) {
		out[m[1]] = true
	}
	return out
}
