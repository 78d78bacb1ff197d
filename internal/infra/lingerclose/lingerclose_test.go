package lingerclose_test

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"videogen/internal/infra/lingerclose"
)

func pair(t *testing.T) (*lingerclose.Listener, net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := lingerclose.NewListener(ln)
	t.Cleanup(func() { l.Close() })
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return l, server, client
}

// TestInterruptedReadsStayInterrupted: after InterruptReads, a read in progress returns at once, and a
// later deadline set by the reader (an upload extending its pacing) cannot push reads out again.
func TestInterruptedReadsStayInterrupted(t *testing.T) {
	l, server, _ := pair(t)
	done := make(chan error, 1)
	go func() {
		_, err := server.Read(make([]byte, 1))
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // the read is blocked
	l.InterruptReads()
	if err := <-done; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("interrupted read: %v", err)
	}
	if err := server.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := server.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("a read after the deadline was pushed out: %v after %v", err, time.Since(start))
	}
}

// TestMarkedCloseDrains: closing a marked connection sends the client an end of stream (not a reset)
// while the client is still sending, and keeps reading what it sends; an unmarked one just closes.
func TestMarkedCloseDrains(t *testing.T) {
	_, server, client := pair(t)
	lingerclose.Mark(server)
	if _, err := server.Write([]byte("413")); err != nil {
		t.Fatal(err)
	}
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	// The client keeps sending a body well past any socket buffer: the server drains it.
	chunk := make([]byte, 64<<10)
	for i := 0; i < 64; i++ { // 4 MiB
		if _, err := client.Write(chunk); err != nil {
			t.Fatalf("write %d after a graceful close: %v", i, err)
		}
	}
	got, err := io.ReadAll(client)
	if err != nil || string(got) != "413" {
		t.Fatalf("the client read %q, %v; want the answer and an end of stream", got, err)
	}
}
