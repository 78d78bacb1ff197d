package config

import (
	"strings"
	"testing"
)

// TestOpsSettings: METRICS_ADDR is off by default and never the public listener; CALL_LOG_RETENTION is
// 90 days by default and never shorter than a day (nor off); LEDGER_CHECK_INTERVAL is an hour by
// default, 0 turns it off.
func TestOpsSettings(t *testing.T) {
	c, err := Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if c.MetricsAddr != "" || c.CallLogRetention.Hours() != 90*24 || c.LedgerCheckEvery.Hours() != 1 {
		t.Fatalf("defaults: METRICS_ADDR %q, CALL_LOG_RETENTION %s, LEDGER_CHECK_INTERVAL %s", c.MetricsAddr, c.CallLogRetention, c.LedgerCheckEvery)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string // "" = valid
	}{
		{map[string]string{"METRICS_ADDR": "127.0.0.1:9090"}, ""},
		{map[string]string{"METRICS_ADDR": ":9090"}, ""},
		{map[string]string{"METRICS_ADDR": "127.0.0.1:0"}, ""},
		{map[string]string{"ADDR": "127.0.0.1:8080", "METRICS_ADDR": "10.0.0.5:8080"}, ""}, // another interface
		{map[string]string{"METRICS_ADDR": ":8080"}, "must not be the public listen address"},
		{map[string]string{"METRICS_ADDR": "127.0.0.1:8080"}, "must not be the public listen address"},
		{map[string]string{"ADDR": "127.0.0.1:8080", "METRICS_ADDR": "0.0.0.0:8080"}, "must not be the public listen address"},
		{map[string]string{"ADDR": "[::]:8080", "METRICS_ADDR": "[::1]:8080"}, "must not be the public listen address"},
		{map[string]string{"ADDR": "localhost:8080", "METRICS_ADDR": "[::1]:8080"}, "must not be the public listen address"}, // localhost is both loopbacks
		{map[string]string{"ADDR": "127.0.0.1:8080", "METRICS_ADDR": "localhost:8080"}, "must not be the public listen address"},
		{map[string]string{"METRICS_ADDR": "9090"}, "host:port"},
		{map[string]string{"CALL_LOG_RETENTION": "720h"}, ""},
		{map[string]string{"CALL_LOG_RETENTION": "0"}, "CALL_LOG_RETENTION"},
		{map[string]string{"CALL_LOG_RETENTION": "12h"}, "CALL_LOG_RETENTION"},
		{map[string]string{"LEDGER_CHECK_INTERVAL": "0"}, ""},
		{map[string]string{"LEDGER_CHECK_INTERVAL": "-1m"}, "LEDGER_CHECK_INTERVAL"},
		{map[string]string{"LEDGER_CHECK_INTERVAL": "10ms"}, "LEDGER_CHECK_INTERVAL"},
	} {
		c, err := Load(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: refused: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want an error naming %q", tc.env, err, tc.want)
		}
	}
}
