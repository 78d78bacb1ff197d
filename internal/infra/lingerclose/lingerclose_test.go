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

// TestPastTheByteBoundTheAnswerIsNotReset: a client that sends more than Bytes at loopback speed, and
// whose reading goroutine gets its turn only later (an HTTP client's reader on a loaded machine), must not
// see its body's writes fail before it has read the answer: Go's client, like others, reports a failed
// write instead of an answer that arrived but was not read yet. Past the byte bound the server stops
// reading but does not reset the connection until Grace after the answer; the writes stall meanwhile.
// Without Grace the reset came right after the drain, a tenth of a second here.
func TestPastTheByteBoundTheAnswerIsNotReset(t *testing.T) {
	_, server, client := pair(t)
	lingerclose.Mark(server)
	if _, err := server.Write([]byte("413")); err != nil {
		t.Fatal(err)
	}
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() { // the body, well past the byte bound
		chunk := make([]byte, 1<<20)
		for i := 0; i < lingerclose.Bytes>>20+64; i++ {
			if _, err := client.Write(chunk); err != nil {
				failed <- err
				return
			}
		}
	}()
	time.Sleep(lingerclose.Grace / 4) // the reader's late turn: the condition under test is its lateness
	got := make([]byte, 3)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "413" {
		t.Fatalf("the client read %q, %v; want the answer", got, err)
	}
	select {
	case err := <-failed:
		t.Fatalf("the body's write failed before the client read the answer: %v", err)
	default:
	}
}

// plainListener hands out connections that offer nothing but net.Conn's methods (as a TLS wrapper does).
type plainListener struct{ net.Listener }

func (l plainListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return struct{ net.Conn }{c}, err
}

// TestReadFromSendsTheWholeFile: a file handed to a connection's ReadFrom (what fasthttp does with a
// streamed response body, through its write buffer) arrives whole and in order, on a TCP connection
// (which sends it with sendfile) and on one that can only Write.
func TestReadFromSendsTheWholeFile(t *testing.T) {
	want := make([]byte, 3<<20+17)
	for i := range want {
		want[i] = byte(i * 7 / 3)
	}
	path := t.TempDir() + "/video.mp4"
	if err := os.WriteFile(path, want, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, wrap := range map[string]func(net.Listener) net.Listener{
		"tcp":   func(l net.Listener) net.Listener { return l },
		"plain": func(l net.Listener) net.Listener { return plainListener{l} },
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			l := lingerclose.NewListener(wrap(ln))
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
			rf, ok := server.(io.ReaderFrom)
			if !ok {
				t.Fatal("the connection has no ReadFrom: a streamed body cannot reach sendfile")
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sent := make(chan error, 1)
			go func() {
				n, err := rf.ReadFrom(f)
				if err == nil && n != int64(len(want)) {
					err = errors.New("short send")
				}
				if cerr := server.Close(); err == nil {
					err = cerr
				}
				sent <- err
			}()
			got, err := io.ReadAll(client)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-sent; err != nil {
				t.Fatalf("ReadFrom: %v", err)
			}
			if string(got) != string(want) {
				t.Fatalf("received %d bytes, not the file's %d", len(got), len(want))
			}
		})
	}
}
