// Package lingerclose closes HTTP server connections the way RFC 9112 §9.6 asks when a request's body
// was not read: the answer is sent, the server stops sending (a FIN, not a reset), and it keeps reading
// and discarding what the client still sends for a bounded time and size before it closes.
//
// Closing a TCP socket that has unread bytes, or that receives bytes after it closed, makes the kernel
// answer with a reset, and a reset makes the client's kernel drop whatever it had not yet handed to the
// client — often the very answer that explained why the body was refused (413, 431, 401). Go's net/http
// server lingers the same way (closeWriteAndWait); fasthttp, under Fiber, closes at once.
package lingerclose

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of one lingering close. They follow nginx's lingering_time and lingering_timeout: a client that
// keeps sending is read for at most Total, one that goes quiet is given up after Idle, and no more than
// Bytes are read in all. A client that sends Bytes quickly (on a fast link, 64 MiB goes in a tenth of a
// second) is then left unread, not reset, until Grace after the answer: its writes stall on a full
// window while it reads the answer. Closing at once would reset the connection, and a reset discards an
// answer the client has received but not yet read — the loss lingering is there to prevent.
const (
	Total = 30 * time.Second
	Idle  = 5 * time.Second
	Bytes = 64 << 20
	Grace = 2 * time.Second
)

// maxLingering bounds the connections lingering at once; past it a connection is closed at once, so a
// flood of refused requests cannot pile up goroutines.
const maxLingering = 4096

// Listener hands out connections that can be marked to linger when they close, and keeps the open ones
// so that a shutdown can interrupt requests still reading their bodies.
type Listener struct {
	net.Listener
	lingering atomic.Int64

	mu   sync.Mutex
	open map[*Conn]struct{}
}

// NewListener wraps ln.
func NewListener(ln net.Listener) *Listener {
	return &Listener{Listener: ln, open: map[*Conn]struct{}{}}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &Conn{Conn: c, l: l}
	l.mu.Lock()
	l.open[lc] = struct{}{}
	l.mu.Unlock()
	return lc, nil
}

// InterruptReads makes every read in progress on an open connection return at once (a timeout error),
// and every later one until the reader sets a new deadline. A shutdown calls it once requests had their
// time: a handler still waiting for a body then answers instead of being cut off.
func (l *Listener) InterruptReads() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.open {
		c.interrupted.Store(true)
		_ = c.SetReadDeadline(time.Time{})
	}
}

// Conn is an accepted connection; Close lingers when the connection was marked.
type Conn struct {
	net.Conn
	l           *Listener
	linger      atomic.Bool
	closed      atomic.Bool
	interrupted atomic.Bool // by InterruptReads: no later deadline may push reads out again
}

// SetReadDeadline sets the read deadline — no later than now once reads were interrupted, so a handler
// that extends its deadline just after a shutdown interrupted it (an upload's pacing) cannot undo that.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.interrupted.Load() {
		t = time.Now()
	}
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines, with the read side held as SetReadDeadline holds it.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// ReadFrom hands a response body to the connection's own ReadFrom, so that a file streamed as a body (a
// download of a stored video) goes out with sendfile(2), from the page cache to the socket, rather than
// through fasthttp's 4 KiB write buffer, a read and a write system call per 4 KiB. The wrapper must
// offer it itself: embedding net.Conn hides the *net.TCPConn's ReadFrom from bufio.Writer.ReadFrom.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(onlyWriter{c.Conn}, r)
}

// onlyWriter hides every method but Write, so io.Copy cannot come back to ReadFrom.
type onlyWriter struct{ io.Writer }

// Mark asks for c to linger when it closes, because the server is about to answer without having read
// the whole request. Connections that are not from a Listener (a TLS wrapper, a test's pipe) are left
// as they are.
func Mark(c net.Conn) {
	if lc, ok := c.(*Conn); ok {
		lc.linger.Store(true)
	}
}

// Close closes at once, or — for a marked connection — half-closes, drains in the background and then
// closes. It returns at once either way, so the server's worker is never held.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.l.mu.Lock()
	delete(c.l.open, c)
	c.l.mu.Unlock()
	tcp, ok := c.Conn.(interface{ CloseWrite() error })
	if !c.linger.Load() || !ok {
		return c.Conn.Close()
	}
	if c.l.lingering.Add(1) > maxLingering {
		c.l.lingering.Add(-1)
		return c.Conn.Close()
	}
	if err := tcp.CloseWrite(); err != nil {
		c.l.lingering.Add(-1)
		return c.Conn.Close()
	}
	go c.drain()
	return nil
}

// drainBuffers are reused by drains, so a burst of refusals does not allocate a buffer each.
var drainBuffers = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// drain reads and discards until the client closes its side, goes quiet, or a bound is reached.
func (c *Conn) drain() {
	defer c.l.lingering.Add(-1)
	defer c.Conn.Close()
	start := time.Now()
	end := start.Add(Total)
	buf := drainBuffers.Get().(*[]byte)
	defer drainBuffers.Put(buf)
	var n int64
	for n < Bytes {
		deadline := time.Now().Add(Idle)
		if deadline.After(end) {
			deadline = end
		}
		// The raw connection's deadline: a shutdown's interruption must not cut a drain short.
		if c.Conn.SetReadDeadline(deadline) != nil {
			return
		}
		k, err := c.Conn.Read(*buf)
		n += int64(k)
		if err != nil {
			return
		}
	}
	time.Sleep(time.Until(start.Add(Grace))) // the byte bound was reached: see Grace
}
