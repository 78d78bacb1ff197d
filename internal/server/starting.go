package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"videogen/handlers/web"
	"videogen/internal/infra/blob"
	"videogen/internal/infra/config"
	"videogen/internal/infra/db"
	reqids "videogen/internal/infra/ids"
	"videogen/internal/refusal"
)

// handoff shares the listening sockets between the server that answers while the instance starts and
// the real one after it: connections are accepted once, here, and handed to whichever view is open, so
// the port answers from the first moment — /healthz alive, /readyz 503 — and never refuses a connection
// while the database is connected and migrated. There are two sockets for ADDR=localhost:… (listen).
type handoff struct {
	lns   []net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error // the first listener's error, once done is closed
}

func newHandoff(lns ...net.Listener) *handoff {
	h := &handoff{lns: lns, conns: make(chan net.Conn), done: make(chan struct{})}
	for _, ln := range lns {
		go h.accept(ln)
	}
	return h
}

func (h *handoff) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			h.once.Do(func() { h.err = err; close(h.done) })
			return
		}
		select {
		case h.conns <- c:
		case <-h.done:
			_ = c.Close()
			return
		}
	}
}

// view is one server's side of the handoff; closing it (the server shutting down) stops its Accept.
// owner closes the sockets themselves with the view: the last server's.
func (h *handoff) view(owner bool) net.Listener {
	return &handoffView{h: h, closed: make(chan struct{}), owner: owner}
}

type handoffView struct {
	h      *handoff
	closed chan struct{}
	once   sync.Once
	owner  bool
}

func (v *handoffView) Accept() (net.Conn, error) {
	select {
	case c := <-v.h.conns:
		return c, nil
	case <-v.closed:
		return nil, net.ErrClosed
	case <-v.h.done:
		if v.h.err != nil {
			return nil, v.h.err
		}
		return nil, net.ErrClosed
	}
}

func (v *handoffView) Close() error {
	v.once.Do(func() { close(v.closed) })
	if !v.owner {
		return nil
	}
	v.h.once.Do(func() { close(v.h.done) })
	var errs []error
	for _, ln := range v.h.lns {
		errs = append(errs, ln.Close())
	}
	return errors.Join(errs...)
}

// Addr is the first socket's address (127.0.0.1's for localhost).
func (v *handoffView) Addr() net.Addr { return v.h.lns[0].Addr() }

// startingHandler answers while the instance connects to its database and migrates it: alive, not ready,
// and every other request 503 service_unavailable with Retry-After, which a proxy's health check keeps
// from arriving at all.
func startingHandler() http.Handler {
	mux := http.NewServeMux()
	writeJSON := func(w http.ResponseWriter, status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "reason": "starting"})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Support finds a request by its id, as on every other answer.
		rid := reqids.NewRequestID()
		w.Header().Set("X-Request-Id", rid)
		// Read what the client sends (within reason) so the answer reaches it (RFC 9112 §9.6).
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 8<<20))
		w.Header().Set("Retry-After", strconv.Itoa(refusal.DatabaseUnavailable.RetryAfter))
		if !web.IsAPIPath(r.URL.Path) {
			// A person at a browser: a page, not JSON.
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, startingPage)
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{
			"code": "service_unavailable", "type": "server_error", "param": nil, "request_id": rid,
			"message": "This instance is starting. Send the request again after Retry-After seconds."}})
	})
	return mux
}

// startingPage is what a browser gets from an instance still starting: plain, with no asset to load
// (the stylesheet is served by the real server only).
const startingPage = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>videogen is starting</title>` +
	`<meta name="viewport" content="width=device-width, initial-scale=1"></head><body style="font-family:sans-serif;max-width:36rem;margin:4rem auto">` +
	`<h1>videogen is starting</h1><p>This server is starting up and cannot show the page yet. Reload it in a few seconds.</p></body></html>`

// newWhenReachable is New, tried again while the database (or the storage) cannot be reached, or while
// another process holds the migration lock past its wait (a long migration on another replica): an
// instance started then waits, answering 503 "starting" meanwhile, instead of exiting into a restart loop.
// Any other error — a bad setting, a failed migration — ends the start at once.
func newWhenReachable(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Server, error) {
	wait := time.Second
	for {
		s, err := New(ctx, cfg, log)
		if err == nil || !(db.IsUnavailable(err) || blob.IsUnavailable(err) || errors.Is(err, db.ErrMigrationLocked)) || ctx.Err() != nil {
			return s, err
		}
		if errors.Is(err, db.ErrMigrationLocked) {
			log.Warn("cannot start yet: another process is still migrating the database; waiting for it", "in", wait, "err", err)
		} else {
			log.Warn("cannot start yet: a dependency is unreachable; trying again", "in", wait, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}
