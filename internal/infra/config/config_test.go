package config

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestREADMEDocumentsEverySetting keeps the README's configuration table in step with the code.
func TestREADMEDocumentsEverySetting(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range Variables() {
		if !strings.Contains(string(readme), "`"+v.Name+"`") {
			t.Errorf("README.md does not document %s", v.Name)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // "" = valid
	}{
		{"defaults", map[string]string{}, ""},
		{"drain delay of a minute", map[string]string{"SHUTDOWN_DRAIN_DELAY": "1m"}, ""},
		{"drain delay too long", map[string]string{"SHUTDOWN_DRAIN_DELAY": "2m"}, "SHUTDOWN_DRAIN_DELAY"},
		{"negative drain delay", map[string]string{"SHUTDOWN_DRAIN_DELAY": "-1s"}, "SHUTDOWN_DRAIN_DELAY"},
		{"connect timeout under a second", map[string]string{"DATABASE_CONNECT_TIMEOUT": "500ms"}, "DATABASE_CONNECT_TIMEOUT"},
		{"test top-ups on loopback", map[string]string{"TEST_TOPUPS": "1"}, ""},
		{"test top-ups on a public host", map[string]string{"TEST_TOPUPS": "1", "PUBLIC_BASE_URL": "https://videogen.example"}, "loopback"},
		{"production defaults", map[string]string{"APP_ENV": "production"}, "RESEND_API_KEY"},
		{"production http base", map[string]string{"APP_ENV": "production", "APP_SECRET": "s", "RESEND_API_KEY": "re_x"}, "https"},
		{"production ok", map[string]string{"APP_ENV": "production", "APP_SECRET": "s", "RESEND_API_KEY": "re_x", "PUBLIC_BASE_URL": "https://v.example",
			"STRIPE_SECRET_KEY": "sk_live_x", "STRIPE_WEBHOOK_SECRET": "whsec_x"}, ""},
		{"production without Stripe", map[string]string{"APP_ENV": "production", "APP_SECRET": "s", "RESEND_API_KEY": "re_x", "PUBLIC_BASE_URL": "https://v.example"}, "STRIPE_SECRET_KEY and STRIPE_WEBHOOK_SECRET"},
		{"production without a webhook secret", map[string]string{"APP_ENV": "production", "APP_SECRET": "s", "RESEND_API_KEY": "re_x", "PUBLIC_BASE_URL": "https://v.example",
			"STRIPE_SECRET_KEY": "sk_live_x"}, "STRIPE_WEBHOOK_SECRET"},
		{"Stripe key without webhook secret", map[string]string{"STRIPE_SECRET_KEY": "sk_test_x"}, "go together"},
		{"upstreams file with the old variables", map[string]string{"UPSTREAMS_FILE": "u.yaml", "UPSTREAM_BASE_URL": "https://x.example", "UPSTREAM_API_KEYS": "k"}, "UPSTREAMS_FILE replaces UPSTREAM_BASE_URL and UPSTREAM_API_KEYS"},
		{"old base URL without keys", map[string]string{"UPSTREAM_BASE_URL": "https://x.example"}, "UPSTREAMS_FILE"},
		{"upstreams file alone", map[string]string{"UPSTREAMS_FILE": "u.yaml"}, ""},
		{"breaker without failures", map[string]string{"UPSTREAM_BREAKER_FAILURES": "0"}, "UPSTREAM_BREAKER_FAILURES"},
		{"top-up bounds reversed", map[string]string{"TOPUP_MIN": "50", "TOPUP_MAX": "10"}, "TOPUP_MAX"},
		{"top-up bound in fractions of a cent", map[string]string{"TOPUP_MIN": "5.001"}, "whole cents"},
		{"top-up bound unreadable", map[string]string{"TOPUP_MAX": "lots"}, "TOPUP_MIN and TOPUP_MAX"},
		{"test top-up bounds reversed", map[string]string{"TEST_TOPUP_MIN": "50", "TEST_TOPUP_MAX": "10"}, "TEST_TOPUP_MAX"},
		{"test top-up bound not positive", map[string]string{"TEST_TOPUP_MIN": "0"}, "TEST_TOPUP_MIN must be positive"},
		{"test top-up bound unreadable", map[string]string{"TEST_TOPUP_MAX": "plenty"}, "TEST_TOPUP_MIN and TEST_TOPUP_MAX"},
		{"no recharges a day", map[string]string{"AUTO_RECHARGE_MAX_PER_DAY": "0"}, "AUTO_RECHARGE_MAX_PER_DAY"},
		{"production test top-ups", map[string]string{"APP_ENV": "production", "APP_SECRET": "s", "RESEND_API_KEY": "re_x", "PUBLIC_BASE_URL": "https://127.0.0.1", "TEST_TOPUPS": "1"}, "TEST_TOPUPS"},
		{"unknown env", map[string]string{"APP_ENV": "staging"}, "APP_ENV"},
		{"bad base", map[string]string{"PUBLIC_BASE_URL": "localhost:8080"}, "PUBLIC_BASE_URL"},
		{"upstream without keys", map[string]string{"UPSTREAM_BASE_URL": "https://up.example"}, "UPSTREAM_API_KEYS"},
		{"zero rate", map[string]string{"RATE_LIMIT_RPS": "0"}, "RATE_LIMIT_RPS"},
		{"poll max below min", map[string]string{"POLL_INTERVAL_MIN": "5s", "POLL_INTERVAL_MAX": "1s"}, "POLL_INTERVAL"},
		{"zero lease", map[string]string{"LEASE_DURATION": "0s"}, "LEASE_DURATION"},
		{"tiny lease", map[string]string{"LEASE_DURATION": "10ms"}, "LEASE_DURATION"},
		{"negative run timeout", map[string]string{"RUN_TIMEOUT": "-1s"}, "RUN_TIMEOUT"},
		{"no backlog", map[string]string{"MAX_QUEUED_PER_ACCOUNT": "0"}, "MAX_QUEUED_PER_ACCOUNT"},
		{"negative poll cache", map[string]string{"POLL_CACHE_TTL": "-1s"}, "POLL_CACHE_TTL"},
	} {
		c, err := Load(tc.env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = c.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := Load(map[string]string{"SIM_DURATION": "soon"}); err == nil {
		t.Error("an unreadable duration must be refused")
	}
}

func TestSecretsRotation(t *testing.T) {
	c := &Config{AppSecret: "new, old ,"}
	if got := c.Secrets(); len(got) != 2 || got[0] != "new" || got[1] != "old" {
		t.Fatalf("secrets %q", got)
	}
	dir := t.TempDir()
	c = &Config{DataDir: dir}
	if err := c.EnsureSecret(); err != nil || len(c.AppSecret) != 64 {
		t.Fatalf("generated %q %v", c.AppSecret, err)
	}
	again := &Config{DataDir: dir}
	if err := again.EnsureSecret(); err != nil || again.AppSecret != c.AppSecret {
		t.Fatal("the development secret must be stable across restarts")
	}
}

// TestSecretCreatedOnceAcrossStarts: processes starting together on a new DATA_DIR (a server and a
// command, two servers) end with one development secret — the one in the file — never one each, which
// left one of them signing cookies and links the file's secret does not verify.
func TestSecretCreatedOnceAcrossStarts(t *testing.T) {
	for round := range 20 {
		dir := filepath.Join(t.TempDir(), "data")
		const n = 8
		got := make([]string, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				c := &Config{DataDir: dir}
				if err := c.EnsureSecret(); err != nil {
					t.Error(err)
				}
				got[i] = c.AppSecret
			}()
		}
		close(start)
		wg.Wait()
		file, err := os.ReadFile(filepath.Join(dir, "app_secret"))
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range got {
			if s != strings.TrimSpace(string(file)) {
				t.Fatalf("round %d: start %d uses %q, the file holds %q", round, i, s, file)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".app_secret-*")); len(left) != 0 {
			t.Fatalf("round %d: temporary files left: %v", round, left)
		}
	}
}

// TestDrainDelayDefault: unset, the drain lasts 5 s in every environment (a developer's Ctrl-C twice
// cuts it short); set, it is what it says, 0 included.
func TestDrainDelayDefault(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "5s"},
		{map[string]string{"APP_ENV": "production"}, "5s"},
		{map[string]string{"APP_ENV": "production", "SHUTDOWN_DRAIN_DELAY": "0"}, "0s"},
		{map[string]string{"SHUTDOWN_DRAIN_DELAY": "0"}, "0s"},
		{map[string]string{"SHUTDOWN_DRAIN_DELAY": "3s"}, "3s"},
	} {
		c, err := Load(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ShutdownDrain.String(); got != tc.want {
			t.Errorf("%v: drain %s, want %s", tc.env, got, tc.want)
		}
	}
}

// TestAddrDefault: unset, ADDR is this machine only outside production (localhost: both loopback
// addresses) and every interface in production; set, it is what it says in either.
func TestAddrDefault(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "localhost:8080"},
		{map[string]string{"APP_ENV": "development"}, "localhost:8080"},
		{map[string]string{"APP_ENV": "production"}, ":8080"},
		{map[string]string{"ADDR": ":9090"}, ":9090"},
		{map[string]string{"APP_ENV": "production", "ADDR": "127.0.0.1:8081"}, "127.0.0.1:8081"},
	} {
		c, err := Load(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if c.Addr != tc.want {
			t.Errorf("%v: ADDR %q, want %q", tc.env, c.Addr, tc.want)
		}
	}
	for _, v := range Variables() {
		if v.Name == "ADDR" && !strings.Contains(v.Default, "localhost:8080") {
			t.Errorf("serve --help shows ADDR's default as %q", v.Default)
		}
	}
}
