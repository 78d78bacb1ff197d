package deploycheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"videogen/internal/domain/media"
)

// caddyEnv is an environment for caddy made from nothing but PATH, folders of the test's own (caddy
// writes its state and certificates under HOME and the XDG folders: nothing may land outside the test)
// and the given placeholders. No VIDEOGEN_ variable of the developer's shell leaks in.
func caddyEnv(t *testing.T, placeholders map[string]string) []string {
	t.Helper()
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config")}
	for k, v := range placeholders {
		env = append(env, k+"="+v)
	}
	return env
}

// loopbackPlaceholders run the Caddyfile unmodified on loopback: plain HTTP on port, the replicas
// given, no admin endpoint.
func loopbackPlaceholders(port int, replicas ...string) map[string]string {
	return map[string]string{
		"VIDEOGEN_SITE":        fmt.Sprintf("http://127.0.0.1:%d", port),
		"VIDEOGEN_REPLICAS":    strings.Join(replicas, " "),
		"VIDEOGEN_CADDY_ADMIN": "off",
	}
}

func caddyfile(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "Caddyfile") }

// TestCaddyfileValidates has caddy load the file as production would (every placeholder at its
// default: a public name, automatic HTTPS, two local replicas) and as the tests run it. caddy validate
// provisions every module, so a directive 2.6 does not know, or a value it refuses, fails here. The
// file must also be as `caddy fmt` writes it.
func TestCaddyfileValidates(t *testing.T) {
	caddy := tool(t, "caddy")
	for name, placeholders := range map[string]map[string]string{
		"production defaults": nil,
		"loopback":            loopbackPlaceholders(freePort(t), "127.0.0.1:18081", "127.0.0.1:18082"),
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(caddy, "validate", "--config", caddyfile(t), "--adapter", "caddyfile")
			cmd.Env = caddyEnv(t, placeholders)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "Valid configuration") {
				t.Fatalf("caddy validate: %v\n%s", err, out)
			}
			// Caddy's warnings (an unformatted file, a directive it ignores) are JSON lines of level warn.
			if strings.Contains(string(out), `"level":"warn"`) {
				t.Errorf("caddy validate warns:\n%s", out)
			}
		})
	}
	cmd := exec.Command(caddy, "fmt", caddyfile(t))
	cmd.Env = caddyEnv(t, nil)
	formatted, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(formatted) != repoFile(t, "deploy/Caddyfile") {
		t.Error("deploy/Caddyfile is not as `caddy fmt` writes it: run `caddy fmt --overwrite deploy/Caddyfile`")
	}
}

// adapted is the part of Caddy's JSON configuration the checks read.
type adapted struct {
	Admin struct {
		Listen   string `json:"listen"`
		Disabled bool   `json:"disabled"`
	} `json:"admin"`
	Apps struct {
		HTTP struct {
			Servers map[string]struct {
				Listen      []string        `json:"listen"`
				ReadTimeout time.Duration   `json:"read_timeout"`
				WriteTime   time.Duration   `json:"write_timeout"`
				Routes      json.RawMessage `json:"routes"`
				Errors      json.RawMessage `json:"errors"`
			} `json:"servers"`
		} `json:"http"`
	} `json:"apps"`
}

// handler is one HTTP handler of the configuration, with the fields of those the checks read.
type handler struct {
	Handler      string          `json:"handler"`
	MaxSize      int64           `json:"max_size"`
	Routes       json.RawMessage `json:"routes"`
	HealthChecks struct {
		Active struct {
			URI          string        `json:"uri"`
			Interval     time.Duration `json:"interval"`
			Timeout      time.Duration `json:"timeout"`
			ExpectStatus int           `json:"expect_status"`
		} `json:"active"`
		Passive struct {
			FailDuration time.Duration `json:"fail_duration"`
		} `json:"passive"`
	} `json:"health_checks"`
	LoadBalancing struct {
		TryDuration time.Duration `json:"try_duration"`
	} `json:"load_balancing"`
	Upstreams []struct {
		Dial string `json:"dial"`
	} `json:"upstreams"`
	Headers json.RawMessage `json:"headers"`
}

// handlers returns every handler of a route list, subroutes included.
func handlers(t *testing.T, routes json.RawMessage) []handler {
	t.Helper()
	var rs []struct {
		Handle []json.RawMessage `json:"handle"`
	}
	if len(routes) == 0 {
		return nil
	}
	if err := json.Unmarshal(routes, &rs); err != nil {
		t.Fatal(err)
	}
	var out []handler
	for _, r := range rs {
		for _, raw := range r.Handle {
			var h handler
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatal(err)
			}
			out = append(out, h)
			out = append(out, handlers(t, h.Routes)...)
		}
	}
	return out
}

// TestCaddyfileAdapted reads the configuration caddy makes of the file in production (`caddy adapt`,
// every placeholder at its default) for what the deployment promises: health checks on /readyz often
// enough for the drain delay, two replicas, a body limit above the API's largest upload, and
// X-Forwarded-For left as Caddy sets it.
func TestCaddyfileAdapted(t *testing.T) {
	cmd := exec.Command(tool(t, "caddy"), "adapt", "--config", caddyfile(t), "--adapter", "caddyfile")
	cmd.Env = caddyEnv(t, nil)
	cmd.Stderr = io.Discard
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("caddy adapt: %v", err)
	}
	var cfg adapted
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Listen != "localhost:2019" {
		t.Errorf("admin listens on %q, want localhost:2019 (the default; never a public address)", cfg.Admin.Listen)
	}
	if len(cfg.Apps.HTTP.Servers) != 1 {
		t.Fatalf("%d servers, want the one site", len(cfg.Apps.HTTP.Servers))
	}
	for name, srv := range cfg.Apps.HTTP.Servers {
		if len(srv.Listen) != 1 || srv.Listen[0] != ":443" {
			t.Errorf("server %s listens on %v, want :443 (a public name: automatic HTTPS)", name, srv.Listen)
		}
		// The API lets an upload run for 30 minutes (uploadMax, handlers/api/uploads_files.go, unexported):
		// the proxy must not cut it first.
		for what, d := range map[string]time.Duration{"read": srv.ReadTimeout, "write": srv.WriteTime} {
			if d != 0 && d <= 30*time.Minute {
				t.Errorf("server %s: %s timeout %v cuts an upload the API still accepts (30 minutes)", name, what, d)
			}
		}
		all := handlers(t, srv.Routes)
		var proxies, bodies []handler
		for _, h := range all {
			switch h.Handler {
			case "reverse_proxy":
				proxies = append(proxies, h)
			case "request_body":
				bodies = append(bodies, h)
			}
		}
		if len(proxies) != 1 || len(bodies) != 1 {
			t.Fatalf("%d reverse_proxy and %d request_body handlers, want one of each", len(proxies), len(bodies))
		}
		// The API's largest body is an upload: media.MaxRequestBytes of files and the multipart framing
		// (1 MiB, multipartAllowance in handlers/api, unexported). The proxy's limit must be above both,
		// so the API answers an oversized upload itself.
		if want := int64(media.MaxRequestBytes + media.MiB); bodies[0].MaxSize < want {
			t.Errorf("request_body max_size %d is below the API's largest upload, %d bytes", bodies[0].MaxSize, want)
		}
		p := proxies[0]
		if p.HealthChecks.Active.URI != "/readyz" || p.HealthChecks.Active.ExpectStatus != 2 {
			t.Errorf("active health check %s expecting %dxx, want /readyz expecting 2xx", p.HealthChecks.Active.URI, p.HealthChecks.Active.ExpectStatus)
		}
		// A stopping replica answers 503 on /readyz and serves on for SHUTDOWN_DRAIN_DELAY: the checks
		// must notice well within it.
		_, example := envExample(t)
		if drain := envDuration(t, example, "SHUTDOWN_DRAIN_DELAY"); p.HealthChecks.Active.Interval <= 0 || 2*p.HealthChecks.Active.Interval > drain {
			t.Errorf("health_interval %v: two checks must fit in SHUTDOWN_DRAIN_DELAY (%v)", p.HealthChecks.Active.Interval, drain)
		}
		if p.HealthChecks.Active.Timeout <= 0 || p.HealthChecks.Passive.FailDuration <= 0 || p.LoadBalancing.TryDuration <= 0 {
			t.Errorf("health_timeout %v, fail_duration %v, lb_try_duration %v: want each set", p.HealthChecks.Active.Timeout,
				p.HealthChecks.Passive.FailDuration, p.LoadBalancing.TryDuration)
		}
		if len(p.Upstreams) < 2 {
			t.Errorf("%d upstreams by default, want at least two replicas", len(p.Upstreams))
		}
		if strings.Contains(strings.ToLower(string(p.Headers)), "x-forwarded-for") {
			t.Errorf("the proxy changes X-Forwarded-For (%s): the replicas need it as Caddy sets it", p.Headers)
		}
	}
}

// TestCaddyFrontsReplicas runs the Caddyfile, unmodified, on loopback in front of two stand-in replicas
// and checks what it claims: both replicas serve; the replica sees the client's address in
// X-Forwarded-For, not what the client claimed; an upload as large as the API accepts streams through whole and before it has all
// arrived; a replica whose /readyz says 503 gets nothing new, and gets requests again once ready; a
// stopped replica costs no request; with no replica left, API clients get the API's error body and a
// Retry-After; and the access log hides the query parameters that authorize.
func TestCaddyFrontsReplicas(t *testing.T) {
	caddy := tool(t, "caddy")
	a, b := startReplica(t, "a"), startReplica(t, "b")
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, caddy, "run", "--config", caddyfile(t), "--adapter", "caddyfile")
	cmd.Env = caddyEnv(t, loopbackPlaceholders(port, a.addr, b.addr))
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("caddy's output:\n%s", logs.String())
		}
	})
	client := &http.Client{Timeout: 30 * time.Second}
	eventually(t, 10*time.Second, "caddy never answered", func() bool {
		resp, err := client.Get(base + "/whoami")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	t.Run("both replicas serve", func(t *testing.T) {
		seen := map[string]bool{}
		for i := 0; i < 40 && len(seen) < 2; i++ {
			seen[get(t, client, base+"/whoami").replica] = true
		}
		if !seen["a"] || !seen["b"] {
			t.Errorf("40 requests reached %v, want both replicas", seen)
		}
	})

	t.Run("X-Forwarded-For is the client's address", func(t *testing.T) {
		req, _ := http.NewRequest("GET", base+"/whoami", nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var who whoami
		if err := json.NewDecoder(resp.Body).Decode(&who); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The replicas read X-Forwarded-For from the right (handlers/web/clientip.go). Caddy trusts no
		// proxy before it, so it drops what the client claimed and sends the address it saw: the client's.
		if who.forwardedFor != "127.0.0.1" {
			t.Errorf("the replica got X-Forwarded-For %q, want the client's address 127.0.0.1 alone", who.forwardedFor)
		}
	})

	t.Run("an upload as large as the API accepts streams through", func(t *testing.T) {
		size := int64(media.MaxRequestBytes + media.MiB) // the files and the multipart framing
		body, w := io.Pipe()
		req, _ := http.NewRequest("POST", base+"/uploads/v1/files", body)
		req.ContentLength = size
		answered := make(chan whoami, 1)
		defer func() {
			// On a failure below, end the request and wait for it, so nothing outlives the subtest.
			w.CloseWithError(io.ErrUnexpectedEOF)
			<-answered
		}()
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				answered <- whoami{}
				return
			}
			defer resp.Body.Close()
			var who whoami
			if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&who) != nil {
				t.Errorf("upload answered %d", resp.StatusCode)
			}
			answered <- who
		}()
		chunk := make([]byte, media.MiB)
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
		// The rest is held back until a replica has seen the first bytes: a proxy that buffered the body
		// would wait for all of it, and this would time out.
		select {
		case <-a.bodyStarted:
		case <-b.bodyStarted:
		case <-time.After(10 * time.Second):
			t.Fatal("no replica received any of the upload before all of it was sent: Caddy buffers request bodies")
		}
		for sent := int64(len(chunk)); sent < size; sent += int64(len(chunk)) {
			if _, err := w.Write(chunk); err != nil {
				t.Fatal(err)
			}
		}
		w.Close()
		who := <-answered
		answered <- who // for the deferred wait
		if who.bodyBytes != size {
			t.Errorf("the replica received %d bytes of %d", who.bodyBytes, size)
		}
	})

	t.Run("a replica that is not ready gets nothing new", func(t *testing.T) {
		b.ready.Store(false)
		eventually(t, 5*time.Second, "replica b still got requests after its /readyz said 503", func() bool {
			for i := 0; i < 20; i++ {
				if get(t, client, base+"/whoami").replica != "a" {
					return false
				}
			}
			return true
		})
		b.ready.Store(true)
		eventually(t, 5*time.Second, "replica b got nothing once ready again", func() bool {
			return get(t, client, base+"/whoami").replica == "b"
		})
	})

	t.Run("a request that reached a replica is not sent again", func(t *testing.T) {
		// b breaks the connection of every /drop request it gets, after reading it; a answers them.
		b.dropping.Store(true)
		var ok, unavailable int64
		for i := 0; i < 40 && b.drops.Load() == 0; i++ {
			resp, err := client.Post(base+"/drop", "application/json", strings.NewReader(`{"n":1}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
				ok++
			case 503:
				unavailable++
			default:
				t.Fatalf("POST /drop answered %d", resp.StatusCode)
			}
		}
		if b.drops.Load() == 0 {
			t.Fatal("no POST reached replica b")
		}
		// Each POST b broke was answered 503, never handed to a: it may have been acted on.
		if unavailable != b.drops.Load() || ok != a.answered.Load() {
			t.Errorf("b broke %d POSTs and a answered %d; the client got %d × 503 and %d × 200: a POST went to a second replica",
				b.drops.Load(), a.answered.Load(), unavailable, ok)
		}
	})

	t.Run("a stopped replica costs no request", func(t *testing.T) {
		b.stop()
		for i := 0; i < 20; i++ {
			if got := get(t, client, base+"/whoami").replica; got != "a" {
				t.Fatalf("request %d answered by %q", i, got)
			}
		}
	})

	t.Run("no replica: the API's error body", func(t *testing.T) {
		probes := a.probes.Load()
		a.ready.Store(false)
		// The second health check from now began after the change, and its 503 takes a out of rotation.
		eventually(t, 5*time.Second, "caddy stopped checking replica a", func() bool { return a.probes.Load() >= probes+2 })
		resp, err := client.Get(base + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Code, Type string } `json:"error"`
		}
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "5" || json.Unmarshal(body, &e) != nil ||
			e.Error.Code != "service_unavailable" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("with no replica ready: %d, Retry-After %q, %s; want 503, Retry-After 5 and the API's error body",
				resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	})

	t.Run("the access log hides what authorizes", func(t *testing.T) {
		a.ready.Store(true)
		eventually(t, 5*time.Second, "replica a never came back", func() bool { return a.inRotation(client, base) })
		req, _ := http.NewRequest("GET", base+"/media/file_logcheck?exp=1&sig=SIGNATURE-SECRET&token=TOKEN-SECRET", nil)
		req.Header.Set("Authorization", "Bearer vg_KEY-SECRET")
		req.Header.Set("Cookie", "vg_session=SESSION-SECRET")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		eventually(t, 5*time.Second, "no access-log line for the request", func() bool {
			return strings.Contains(logs.String(), "/media/file_logcheck")
		})
		for _, secret := range []string{"SIGNATURE-SECRET", "TOKEN-SECRET", "KEY-SECRET", "SESSION-SECRET"} {
			if strings.Contains(logs.String(), secret) {
				t.Errorf("caddy's log shows %s", secret)
			}
		}
	})
}

// replica is a stand-in for a videogen replica: /readyz answers as ready says; every other path answers
// which replica it is, the X-Forwarded-For it got and how many body bytes it read.
type replica struct {
	addr        string
	ready       atomic.Bool
	probes      atomic.Int64 // /readyz requests seen
	bodyStarted chan struct{}
	dropping    atomic.Bool  // /drop: close the connection without an answer
	drops       atomic.Int64 // /drop requests closed so
	answered    atomic.Int64 // /drop requests answered
	stop        func()
}

type whoami struct {
	replica      string
	forwardedFor string
	bodyBytes    int64
}

func (w *whoami) UnmarshalJSON(b []byte) error {
	var v struct {
		Replica      string `json:"replica"`
		ForwardedFor string `json:"forwarded_for"`
		BodyBytes    int64  `json:"body_bytes"`
	}
	err := json.Unmarshal(b, &v)
	*w = whoami{v.Replica, v.ForwardedFor, v.BodyBytes}
	return err
}

func startReplica(t *testing.T, name string) *replica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{addr: ln.Addr().String(), bodyStarted: make(chan struct{}, 1)}
	r.ready.Store(true)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/readyz" {
			r.probes.Add(1)
			if !r.ready.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		if req.URL.Path == "/drop" {
			if r.dropping.Load() {
				r.drops.Add(1)
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
			r.answered.Add(1)
		}
		var n int64
		buf := make([]byte, 64<<10)
		for {
			k, err := req.Body.Read(buf)
			if n == 0 && k > 0 {
				select {
				case r.bodyStarted <- struct{}{}:
				default:
				}
			}
			n += int64(k)
			if err != nil {
				break
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"replica": name, "forwarded_for": req.Header.Get("X-Forwarded-For"), "body_bytes": n})
	})}
	go func() { _ = srv.Serve(ln) }()
	r.stop = func() { _ = srv.Close() }
	t.Cleanup(r.stop)
	return r
}

// inRotation reports whether a request through the proxy can reach this replica now.
func (r *replica) inRotation(client *http.Client, base string) bool {
	for i := 0; i < 10; i++ {
		resp, err := client.Get(base + "/whoami")
		if err != nil {
			return false
		}
		var who whoami
		_ = json.NewDecoder(resp.Body).Decode(&who)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			return true
		}
	}
	return false
}

// get fetches url through the proxy and decodes the replica's answer.
func get(t *testing.T, client *http.Client, url string) whoami {
	t.Helper()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var who whoami
	if resp.StatusCode != 200 || json.Unmarshal(body, &who) != nil {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, bytes.TrimSpace(body))
	}
	return who
}

// eventually polls cond until it holds, failing the test with msg after within.
func eventually(t *testing.T, within time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort is a loopback port nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
