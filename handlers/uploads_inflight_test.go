package handlers_test

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"videogen/internal/testkit"
	"videogen/models"
)

// TestUploadsInFlightAreBounded: an account may run MAX_UPLOADS_PER_ACCOUNT uploads or imports at once
// and the instance MAX_UPLOADS; past either, the next is refused with 429 rate_limited and Retry-After,
// and a slot comes free when an upload ends.
func TestUploadsInFlightAreBounded(t *testing.T) {
	s := testkit.Start(t, testkit.SQLiteURL(t), map[string]string{"WORKERS": "false", "MAX_UPLOADS_PER_ACCOUNT": "2", "MAX_UPLOADS": "3"})
	a, b := s.NewAccount(t, "10"), s.NewAccount(t, "10")
	// slow starts an upload whose body keeps the server waiting; closing the connection ends it.
	slow := func(key string) net.Conn {
		t.Helper()
		conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		part := "--b\r\nContent-Disposition: form-data; name=\"video_files\"; filename=\"v.mp4\"\r\nContent-Type: video/mp4\r\n\r\n" +
			"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom" + strings.Repeat("\x00", 64<<10)
		_, _ = conn.Write([]byte("POST /uploads/v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
			"\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: " + strconv.Itoa(50<<20) + "\r\n\r\n" + part))
		return conn
	}
	// running waits until n uploads are storing their file (each has its pending row).
	running := func(n int64) {
		t.Helper()
		var rows int64
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d uploads running", n), func() bool {
			s.DB.R.Model(&models.Media{}).Where("state = ?", models.MediaPending).Count(&rows)
			return rows == n
		}, func() string { return fmt.Sprintf("%d running", rows) })
	}
	small := func(key string) *testkit.Resp {
		return s.Upload(t, key, "", testkit.File("image_files", "a.png", testkit.PNG(t, 8, 8)))
	}
	refused := func(r *testkit.Resp, why string) {
		t.Helper()
		if r.Status != 429 || r.ErrorCode() != "rate_limited" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: %d %s (Retry-After %q), want 429 rate_limited", why, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}

	first := slow(a.Key)
	slow(a.Key)
	running(2)
	refused(small(a.Key), "a third upload of one account")
	if r := s.Do(t, "POST", "/uploads/v1/import", a.Key, map[string]any{"image_urls": []string{"https://example.com/a.png"}}); r.Status != 429 {
		t.Fatalf("an import beside two uploads: %d %s", r.Status, r.Body)
	}
	slow(b.Key)
	running(3)
	refused(small(b.Key), "a fourth upload on the instance")

	first.Close() // one of a's uploads ends (cut off by its client)
	running(2)
	testkit.Eventually(t, 10*time.Second, "an upload taken once another ended", func() bool {
		r := small(b.Key)
		if r.Status != 200 && r.Status != 429 {
			t.Fatalf("after an upload ended: %d %s", r.Status, r.Body)
		}
		return r.Status == 200
	})
}
