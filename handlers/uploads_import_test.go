package handlers_test

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/internal/infra/mediafetch"
	"videogen/internal/server"
	"videogen/internal/testkit"
)

// importRig is a TLS server on 127.0.0.1 serving the files imports fetch (its certificate is valid for
// example.com, which the test's DNS server resolves to 127.0.0.1), and two import policies: prod is
// production's guard with the test's roots and resolver; allow also exempts 127.0.0.1 and the server's
// port — explicitly, and nothing else.
type importRig struct {
	base        string // https://example.com:<port>
	prod, allow mediafetch.Policy
}

func newImportRig(t *testing.T) *importRig {
	t.Helper()
	png, jpg, wav := testkit.PNG(t, 16, 16), testkit.JPEG(t, 16, 16), testkit.WAV(200)
	var mp4 strings.Builder
	_, _ = io.Copy(&mp4, testkit.MP4Stream(8192))
	serve := func(ctype string, body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			_, _ = w.Write(body)
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/cat.png", serve("image/png", png))
	mux.HandleFunc("/cat.jpg", serve("image/jpeg", jpg))
	mux.HandleFunc("/clip.mp4", serve("video/mp4", []byte(mp4.String())))
	mux.HandleFunc("/tune.wav", serve("audio/wav", wav))
	mux.HandleFunc("/page.png", serve("text/html", []byte("<!DOCTYPE html><html><body>a cat</body></html>")))
	mux.HandleFunc("/lying.png", serve("image/png", jpg))
	mux.HandleFunc("/html-as.png", serve("image/png", []byte("<!DOCTYPE html><html><script>alert(1)</script></html>")))
	mux.HandleFunc("/svg.png", serve("image/svg+xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)))
	mux.HandleFunc("/big.png", func(w http.ResponseWriter, r *http.Request) { // announced: refused before download
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Content-Length", strconv.Itoa(21<<20))
		_, _ = io.Copy(w, testkit.PNGStream(21<<20))
	})
	mux.HandleFunc("/big-chunked.png", func(w http.ResponseWriter, r *http.Request) { // no length: cut off while streaming
		w.Header().Set("Content-Type", "image/png")
		w.(http.Flusher).Flush()
		_, _ = io.Copy(w, testkit.PNGStream(21<<20))
	})
	mux.HandleFunc("/missing.png", http.NotFound)
	mux.HandleFunc("/untyped.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // no Content-Type at all (Go would otherwise sniff one)
		_, _ = w.Write(png)
	})
	mux.HandleFunc("/empty.png", serve("image/png", nil))
	mux.HandleFunc("/silent.png", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("/stall.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Content-Length", "100000")
		_, _ = w.Write(png[:40])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/hop/{n}", func(w http.ResponseWriter, r *http.Request) {
		if n, _ := strconv.Atoi(r.PathValue("n")); n > 0 {
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", n-1), http.StatusFound)
			return
		}
		serve("image/png", png)(w, r)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	portN, _ := strconv.ParseUint(port, 10, 16)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	a := netip.MustParseAddr
	resolver := testkit.StartDNS(t, map[string][]netip.Addr{
		"example.com":  {a("127.0.0.1")},
		"private.test": {a("10.0.0.5")},
		"mixed.test":   {a("93.184.215.14"), a("192.168.4.4")},
	})
	prod := mediafetch.Policy{RootCAs: roots, Resolver: resolver, ConnectTimeout: 2 * time.Second,
		HeaderTimeout: 500 * time.Millisecond, IdleTimeout: 300 * time.Millisecond, TotalTimeout: 10 * time.Second}
	allow := prod
	allow.AllowPrefixes = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	allow.Ports = []uint16{uint16(portN)}
	return &importRig{base: "https://example.com:" + port, prod: prod, allow: allow}
}

// TestImport fetches files by link through the address guard and stores them like uploads; every link
// the guard refuses, every remote that does not give a usable file and every limit is a 400 with a
// reason, with nothing stored — not even the good links of the same request.
func TestImport(t *testing.T) {
	rig := newImportRig(t)
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.StartWith(t, dbURL, map[string]string{"WORKERS": "false"}, server.Options{ImportPolicy: &rig.allow})
		acct := s.NewAccount(t, "10")

		t.Run("happy path", func(t *testing.T) {
			r := s.Do(t, "POST", "/uploads/v1/import", acct.Key, map[string]any{
				"image_urls": []string{rig.base + "/cat.png", rig.base + "/redirect?to=/cat.jpg"},
				"video_urls": []string{rig.base + "/clip.mp4"}, "audio_urls": []string{rig.base + "/tune.wav?token=secret"}})
			a := r.Answer(t)
			if len(a.Files) != 4 || len(a.ImageURLs) != 2 || len(a.VideoURLs) != 1 || len(a.AudioURLs) != 1 {
				t.Fatalf("answer %s", r.Body)
			}
			types := []string{"image/png", "image/jpeg", "video/mp4", "audio/wav"}
			for i, f := range a.Files {
				if f.ContentType != types[i] || f.SourceURL == nil || strings.Contains(*f.SourceURL, "secret") {
					t.Errorf("file %d: %+v (source %v)", i, f, f.SourceURL)
				}
				if got := get(t, f.URL); got.Status != 200 || int64(len(got.Body)) != f.Bytes || got.Header.Get("Content-Type") != types[i] {
					t.Errorf("GET file %d: %d, %d bytes", i, got.Status, len(got.Body))
				}
			}
			if *a.Files[1].SourceURL != rig.base+"/cat.jpg" {
				t.Errorf("source of a redirected link is %s, want where the file came from", *a.Files[1].SourceURL)
			}
			row := callRow(t, s, r.Header.Get("X-Request-Id"))
			var total int64
			for _, f := range a.Files {
				total += f.Bytes
			}
			if row.Files != 4 || row.BytesIn < total || row.Path != "/uploads/v1/import" {
				t.Errorf("call log row %+v: want 4 files and at least %d bytes in", row, total)
			}
			// The imported image works in a create request.
			s.CreateVideo(t, acct.Key, map[string]any{"model": "videogen-2.0-720p", "prompt": "imported", "start_image_url": a.ImageURLs[0]})
			// Start the refusals from empty storage.
			s.DB.W.Exec("DELETE FROM task_media")
			s.DB.W.Exec("DELETE FROM media")
			if err := os.RemoveAll(filepath.Join(s.Cfg.DataDir, "media")); err != nil {
				t.Fatal(err)
			}
		})

		refusals := []struct {
			name, url, code string
		}{
			{"redirect to 10/8", rig.base + "/redirect?to=https://10.1.2.3/x.png", "url_not_allowed"},
			{"redirect to loopback", rig.base + "/redirect?to=https://127.0.0.2/x.png", "url_not_allowed"},
			{"redirect to [::1]", rig.base + "/redirect?to=https://[::1]/x.png", "url_not_allowed"},
			{"redirect to localhost", rig.base + "/redirect?to=https://localhost/x.png", "url_not_allowed"},
			{"redirect to metadata", rig.base + "/redirect?to=https://169.254.169.254/latest/meta-data/", "url_not_allowed"},
			{"redirect to 172.16/12", rig.base + "/redirect?to=https://172.16.0.1/x.png", "url_not_allowed"},
			{"redirect to 192.168/16", rig.base + "/redirect?to=https://192.168.0.1/x.png", "url_not_allowed"},
			{"redirect to 100.64/10", rig.base + "/redirect?to=https://100.64.0.1/x.png", "url_not_allowed"},
			{"redirect to 0.0.0.0", rig.base + "/redirect?to=https://0.0.0.0/x.png", "url_not_allowed"},
			{"redirect to IPv4-mapped", rig.base + "/redirect?to=https://[::ffff:10.0.0.1]/x.png", "url_not_allowed"},
			{"redirect to decimal IPv4", rig.base + "/redirect?to=https://2130706433/x.png", "url_not_allowed"},
			{"redirect to a private name", rig.base + "/redirect?to=https://private.test/x.png", "url_not_allowed"},
			{"redirect to http", rig.base + "/redirect?to=http://example.com/cat.png", "url_not_allowed"},
			{"6 hops", rig.base + "/hop/6", "url_not_allowed"},
			{"HTML served", rig.base + "/page.png", "import_failed"},
			{"SVG served", rig.base + "/svg.png", "import_failed"},
			{"JPEG bytes declared PNG", rig.base + "/lying.png", "import_failed"},
			{"HTML bytes declared PNG", rig.base + "/html-as.png", "import_failed"},
			{"over 20 MiB, announced", rig.base + "/big.png", "import_failed"},
			{"over 20 MiB, streamed", rig.base + "/big-chunked.png", "import_failed"},
			{"404", rig.base + "/missing.png", "import_failed"},
			{"no content type", rig.base + "/untyped.png", "import_failed"},
			{"empty file", rig.base + "/empty.png", "import_failed"},
			{"no answer", rig.base + "/silent.png", "import_failed"},
			{"body stalls", rig.base + "/stall.png", "import_failed"},
		}
		for _, tc := range refusals {
			t.Run(tc.name, func(t *testing.T) {
				// A good link first: it is fetched and stored, then removed when the bad one fails.
				r := s.Do(t, "POST", "/uploads/v1/import", acct.Key, map[string]any{"image_urls": []string{rig.base + "/cat.png", tc.url}})
				checkRefused(t, s, r, tc.code, "image_urls[1]")
			})
		}
		t.Run("5 hops are fine", func(t *testing.T) {
			r := s.Do(t, "POST", "/uploads/v1/import", acct.Key, map[string]any{"image_urls": []string{rig.base + "/hop/5"}})
			if len(r.Answer(t).Files) != 1 {
				t.Fatal("no file")
			}
		})
		t.Run("limits", func(t *testing.T) {
			ten := make([]string, 10)
			for i := range ten {
				ten[i] = rig.base + "/cat.png"
			}
			for name, body := range map[string]map[string]any{
				"too_many_images": {"image_urls": ten},
				"too_many_videos": {"video_urls": ten[:4]},
				"too_many_audios": {"audio_urls": ten[:4]},
			} {
				r := s.Do(t, "POST", "/uploads/v1/import", acct.Key, body)
				if r.Status != 400 || r.ErrorCode() != name {
					t.Errorf("%s: got %d %s", name, r.Status, r.Body)
				}
			}
			for body, code := range map[string]string{`{}`: "missing_field", `{"image_urls":"x"}`: "invalid_request", `{"files":[]}`: "unknown_field", `[`: "invalid_json"} {
				if r := s.Do(t, "POST", "/uploads/v1/import", acct.Key, body); r.Status != 400 || r.ErrorCode() != code {
					t.Errorf("%s: got %d %s, want %s", body, r.Status, r.Body, code)
				}
			}
			if r := rawPost(t, s.URL, "/uploads/v1/import", acct.Key, "application/json", 2<<20); r.Status != 413 {
				t.Errorf("2 MiB import body: %d", r.Status)
			}
		})
	})
}

// TestImportGuard holds production's guard (no exemptions, port 443 only) to every form of address it
// must refuse. Each is refused before or at connect time, so nothing is ever fetched.
func TestImportGuard(t *testing.T) {
	rig := newImportRig(t)
	testkit.EachDB(t, func(t *testing.T, dbURL string) {
		s := testkit.StartWith(t, dbURL, map[string]string{"WORKERS": "false"}, server.Options{ImportPolicy: &rig.prod})
		acct := s.NewAccount(t, "10")
		for _, u := range []string{
			"http://example.com/cat.png",
			"https://user:secret@example.com/cat.png",
			"https://localhost/cat.png",
			"https://127.0.0.1/cat.png",
			"https://[::1]/cat.png",
			"https://10.0.0.1/cat.png",
			"https://172.16.0.1/cat.png",
			"https://172.31.255.255/cat.png",
			"https://192.168.1.1/cat.png",
			"https://169.254.169.254/latest/meta-data/",
			"https://100.64.0.1/cat.png",
			"https://0.0.0.0/cat.png",
			"https://[::ffff:127.0.0.1]/cat.png",
			"https://[::ffff:a00:1]/cat.png",
			"https://2130706433/cat.png",
			"https://0177.0.0.1/cat.png",
			"https://0x7f.0.0.1/cat.png",
			"https://0x7f000001/cat.png",
			"https://127.1/cat.png",
			"https://private.test/cat.png",
			"https://mixed.test/cat.png",
			"https://example.com:8443/cat.png",
			rig.base + "/cat.png", // the test server itself: loopback, on a port that is not 443
		} {
			t.Run(u, func(t *testing.T) {
				r := s.Do(t, "POST", "/uploads/v1/import", acct.Key, map[string]any{"audio_urls": []string{u}})
				checkRefused(t, s, r, "url_not_allowed", "audio_urls[0]")
				if strings.Contains(string(r.Body), "secret") {
					t.Errorf("the answer repeats the URL's password: %s", r.Body)
				}
			})
		}
	})
}

func checkRefused(t *testing.T, s *testkit.Server, r *testkit.Resp, code, param string) {
	t.Helper()
	var body struct {
		Error struct {
			Code, Message string
			Param         *string
		}
	}
	_ = json.Unmarshal(r.Body, &body)
	if r.Status != 400 || body.Error.Code != code || body.Error.Param == nil || *body.Error.Param != param {
		t.Fatalf("got %d %s, want 400 %s for %s", r.Status, r.Body, code, param)
	}
	if len(body.Error.Message) < len(param)+15 {
		t.Errorf("message %q gives no reason", body.Error.Message)
	}
	if files, rows := s.MediaOnDisk(t); files != 0 || rows != 0 {
		t.Fatalf("a refused import left %d files and %d rows", files, rows)
	}
}
