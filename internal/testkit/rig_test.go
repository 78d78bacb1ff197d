package testkit

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestPeerHasRead: bytes sent to a server that has not accepted the connection, or accepted it and not
// read them, are not read; once it reads them all, they are.
func TestPeerHasRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	// Loopback delivers at once; the bytes wait in the kernel for a server that has not accepted yet.
	Eventually(t, 5*time.Second, "the connection in the table", func() bool { return inTable(t, conn) })
	if PeerHasRead(t, conn) {
		t.Fatal("read before the server accepted the connection")
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if PeerHasRead(t, conn) {
		t.Fatal("read once accepted, before any read")
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(server, buf); err != nil {
		t.Fatal(err)
	}
	if PeerHasRead(t, conn) {
		t.Fatal("read after 4 bytes of 10")
	}
	if _, err := io.ReadFull(server, make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	if !PeerHasRead(t, conn) {
		t.Fatal("not read after all 10 bytes")
	}
}

// inTable reports whether /proc/net/tcp lists the server end of conn.
func inTable(t *testing.T, conn net.Conn) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 2 && procAddr(f[1]).String() == conn.RemoteAddr().String() && procAddr(f[2]).String() == conn.LocalAddr().String() {
			return true
		}
	}
	return false
}

// TestEventually: it returns as soon as the condition holds, asking again until then (less often as the
// wait goes on), and fails the test with what it waited for, and the detail, when the time is up.
func TestEventually(t *testing.T) {
	n := 0
	start := time.Now()
	Eventually(t, 5*time.Second, "the third ask", func() bool { n++; return n == 3 })
	if n != 3 || time.Since(start) > 4*time.Second {
		t.Fatalf("asked %d times in %s", n, time.Since(start))
	}
	// A longer wait is asked less often: about 33 times in its first second, not a hundred.
	n, start = 0, time.Now()
	Eventually(t, 10*time.Second, "a second gone", func() bool { n++; return time.Since(start) > time.Second })
	if n > 45 {
		t.Fatalf("asked %d times in a second", n)
	}

	rec := &recorder{TB: t}
	done := make(chan struct{})
	go func() { // t.Fatalf ends its goroutine, as it ends a test's
		defer close(done)
		Eventually(rec, 50*time.Millisecond, "never", func() bool { return false }, func() string { return "last seen: nothing" })
	}()
	<-done
	if want := "not within 50ms: never; last seen: nothing"; rec.fatal != want {
		t.Fatalf("failure %q, want %q", rec.fatal, want)
	}
}

// recorder keeps the message of a Fatalf instead of failing the test.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
