package main_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"videogen/internal/testkit"
)

// fresh sends one request on a connection of its own and returns the answer with its body read, or the
// error of the connection. The request asks for nothing about the connection (no "Connection: close"),
// so a "Connection: close" in the answer is the server's own.
func fresh(method, url, key string) (*http.Response, string, error) {
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return nil, "", err
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// closes reports whether an answer asked for its connection to be closed.
func closes(resp *http.Response) bool {
	return resp.Close || strings.EqualFold(resp.Header.Get("Connection"), "close")
}

// TestDrainAnswersThenRefuses: with SHUTDOWN_DRAIN_DELAY at its default (5 s, in development too), a
// SIGTERM first takes the server out of rotation while it still accepts and serves: polled on new
// connections, /readyz answers 503 "shutting down" and the API answers as usual, each answer with
// "Connection: close"; then the port closes, every new connection is refused, and the process exits 0
// (docs/operations.md, "Health endpoints").
func TestDrainAnswersThenRefuses(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		env := map[string]string{"DATABASE_URL": dbURL}
		run(t, dir, env, "accounts", "create", "--email", "drain@example.com", "--password", "paper-boats-float-42")
		key, _, _ := run(t, dir, env, "keys", "create", "--email", "drain@example.com")
		key = strings.TrimSpace(key)
		env["SHUTDOWN_DRAIN_DELAY"] = "" // empty: the default
		p := serve(t, dir, env)
		resp, _, err := fresh("GET", p.url+"/v1/models", key)
		if err != nil || resp.StatusCode != 200 || closes(resp) {
			t.Fatalf("before SIGTERM: %v %v, want 200 on a connection kept open", resp, err)
		}

		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var draining, served, refused int
		deadline := time.Now().Add(60 * time.Second)
		for refused < 3 && time.Now().Before(deadline) {
			resp, body, err := fresh("GET", p.url+"/readyz", "")
			switch {
			case err != nil:
				if !errors.Is(err, syscall.ECONNREFUSED) {
					t.Fatalf("after %d answers while draining: %v, want the connection refused or an answer", draining, err)
				}
				refused++
			case refused > 0:
				t.Fatalf("an answer (%d) after the port had refused a connection: %s", resp.StatusCode, body)
			case resp.StatusCode == 200 && draining == 0:
				// The signal is not handled yet.
			case resp.StatusCode != 503 || !strings.Contains(body, "shutting down") || !closes(resp):
				t.Fatalf("/readyz while draining: %d %q Connection %q, want 503 shutting down with Connection: close",
					resp.StatusCode, body, resp.Header.Get("Connection"))
			default:
				draining++
				// Every request is still served, and told to close its connection.
				api, body, err := fresh("GET", p.url+"/v1/models", key)
				switch {
				case errors.Is(err, syscall.ECONNREFUSED):
					refused++ // the drain ended between the two requests
				case err != nil || api.StatusCode != 200 || !closes(api):
					t.Fatalf("the API while draining: %v %v %q, want 200 with Connection: close", api, err, body)
				default:
					served++
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		if draining < 2 || served == 0 || refused == 0 {
			t.Fatalf("after SIGTERM: %d /readyz 503, %d API answers while draining, %d refusals; want several 503 and served "+
				"requests, then refusals\n%s", draining, served, refused, p.stderr.String())
		}
		t.Logf("after SIGTERM: %d /readyz 503 and %d API answers while draining, then %d refusals", draining, served, refused)
		select {
		case <-p.exited:
			if p.err != nil {
				t.Fatalf("exit after the drain: %v\n%s", p.err, p.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no exit 30 s after the port closed")
		}
	})
}

// TestSecondSignalEndsTheDrain: Ctrl-C twice stops at once. The first SIGINT begins a drain of a
// minute; the second ends it, and the process shuts down and exits 0 long before the minute is out.
func TestSecondSignalEndsTheDrain(t *testing.T) {
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		p := serve(t, t.TempDir(), map[string]string{"DATABASE_URL": dbURL, "SHUTDOWN_DRAIN_DELAY": "1m"})
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "/readyz 503 after the first SIGINT", func() bool {
			resp, _, err := fresh("GET", p.url+"/readyz", "")
			return err == nil && resp.StatusCode == 503
		})
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.exited:
			if p.err != nil {
				t.Fatalf("exit after the second SIGINT: %v\n%s", p.err, p.stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no exit 30 s after the second SIGINT: the drain of a minute went on\n%s", p.stderr.String())
		}
		if !strings.Contains(p.stderr.String(), "drain cut short by a second signal") {
			t.Errorf("the log does not say the drain was cut short:\n%s", p.stderr.String())
		}
	})
}

// TestDevelopmentListensOnThisMachine: outside production a server on every interface (":port", the old
// default) warns at start, naming what it exposes and the fix; one on localhost (the default host) does
// not, and answers on both loopback addresses, so http://localhost:8080 works whichever the client's
// resolver gives first.
func TestDevelopmentListensOnThisMachine(t *testing.T) {
	port := func() string { _, p, _ := net.SplitHostPort(testkit.FreeAddr(t)); return p }
	warning := "a development server is listening beyond this machine"

	open := serve(t, t.TempDir(), map[string]string{"ADDR": ":" + port()})
	logged := open.stderr.String()
	if !strings.Contains(logged, "level=WARN") || !strings.Contains(logged, warning) ||
		!strings.Contains(logged, "APP_ENV=production") || !strings.Contains(logged, "ADDR=127.0.0.1:8080") {
		t.Errorf("ADDR=:port in development: no warning at start naming what is exposed and the fix:\n%s", logged)
	}

	p := port()
	local := serve(t, t.TempDir(), map[string]string{"ADDR": "localhost:" + p})
	if logged := local.stderr.String(); strings.Contains(logged, warning) {
		t.Errorf("ADDR=localhost:port warned:\n%s", logged)
	}
	hosts := []string{"127.0.0.1"}
	if probe, err := net.Listen("tcp", "[::1]:0"); err == nil {
		_ = probe.Close()
		hosts = append(hosts, "[::1]")
	}
	for _, h := range hosts {
		if resp, body, err := fresh("GET", "http://"+h+":"+p+"/readyz", ""); err != nil || resp.StatusCode != 200 {
			t.Errorf("ADDR=localhost:%s: /readyz on %s: %v %v %s", p, h, resp, err, body)
		}
	}
}
