package h1

import (
	"context"
	"crypto/tls"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Server serves HTTP/1.0 and HTTP/1.1 with an http.Handler, as
// net/http's Server does (the same request parsing, through
// http.ReadRequest, the same checks of the request, the same canned
// errors, the same response heads byte for byte but the Date's value)
// at a fraction of its cost per request: a response's head and a body
// of up to writeBufferSize go out in one write, the send timeout is armed
// at most once per send/16 on a connection rather than before every
// write, the read deadlines once per event rather than three times per
// request (see waitNext), and the request's context is cancelled when
// the client leaves by a read that starts only once a request has been
// running for leaveCheckAfter (to twice it, by a timer armed once per
// leaveCheckAfter on a busy connection), not by one per request. A TLS
// connection that negotiates a protocol of NextProto by ALPN (HTTP/2) is
// handed to it; one that negotiates another protocol (acme-tls/1) is
// closed after the handshake.
//
// What a request may do is what net/http's allows: bodies by
// Content-Length or chunked, Expect: 100-continue, trailers declared by
// the handler, Flush, Hijack, http.ResponseController's deadlines,
// io.ReaderFrom (sendfile and splice through the connection's ReadFrom).
// Not supported: HTTP/2 without TLS (h2c), ResponseController's
// EnableFullDuplex.
type Server struct {
	Handler http.Handler
	// ReadHeaderTimeout bounds the reading of a request head from its
	// first byte (and of a TLS handshake); 0: none.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds the reading of a whole request; 0: none.
	ReadTimeout time.Duration
	// WriteTimeout bounds the writing of a response from the end of its
	// request head; 0: none.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long; 0: none.
	IdleTimeout time.Duration
	// SendTimeout bounds each write of a response: the time a client
	// may take nothing of it; 0: none.
	SendTimeout time.Duration
	// SendCut, when set, is called for each response cut off by the
	// send timeout.
	SendCut func()
	// MaxHeaderBytes bounds a request head (431 past it); 0: 1 MiB, as
	// net/http's.
	MaxHeaderBytes int
	// MaxBodyBytes bounds the request body a handler may read, as
	// http.MaxBytesHandler does: past it, the body's Read fails with
	// *http.MaxBytesError and the connection closes after the
	// response; 0: none.
	MaxBodyBytes int64
	// BaseContext is the parent of every request's context
	// (default context.Background).
	BaseContext context.Context
	// ConnContext, when set, derives a connection's context from
	// BaseContext.
	ConnContext func(context.Context, net.Conn) context.Context
	// ErrorLog receives what net/http's server logs (the same messages,
	// "http: TLS handshake error from ..." among them); nil: discarded.
	ErrorLog *log.Logger
	// NextProto serves the TLS connections that negotiate its protocols.
	NextProto map[string]func(*tls.Conn)

	mu         sync.Mutex
	listeners  map[net.Listener]struct{}
	conns      map[*serverConn]struct{}
	inShutdown atomic.Bool
	date       dateCache
}

// ErrServerClosed is http.ErrServerClosed: Serve after Shutdown or Close.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on ln and serves each in a goroutine of its
// own until Shutdown or Close, then returns ErrServerClosed; or returns
// the listener's error. It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln) {
		ln.Close()
		return ErrServerClosed
	}
	defer s.untrack(ln)
	base := s.BaseContext
	if base == nil {
		base = context.Background()
	}
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return ErrServerClosed
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() { // as net/http: EMFILE and the like
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("http: Accept error: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		ctx := base
		if s.ConnContext != nil {
			ctx = s.ConnContext(ctx, nc)
		}
		c := s.newConn(nc)
		if c == nil {
			nc.Close()
			continue
		}
		go c.serve(ctx)
	}
}

func (s *Server) track(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return false
	}
	if s.listeners == nil {
		s.listeners = make(map[net.Listener]struct{})
	}
	s.listeners[ln] = struct{}{}
	return true
}

func (s *Server) untrack(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.listeners, ln)
	ln.Close()
}

// newConn tracks a new connection; nil once the server shuts down.
func (s *Server) newConn(nc net.Conn) *serverConn {
	c := &serverConn{s: s, rwc: nc, remote: nc.RemoteAddr().String()}
	c.state.Store(int64(stateNew))
	c.since.Store(time.Now().Unix())
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return nil
	}
	if s.conns == nil {
		s.conns = make(map[*serverConn]struct{})
	}
	s.conns[c] = struct{}{}
	return c
}

func (s *Server) forget(c *serverConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

// Shutdown stops accepting, closes idle connections and those that
// become idle, and returns when no connection is left, or with ctx's
// error when ctx ends first (the connections then stay open: Close
// closes them). Hijacked connections and those handed to NextProto are
// not its.
func (s *Server) Shutdown(ctx context.Context) error {
	s.inShutdown.Store(true)
	s.closeListeners()
	wait := time.Millisecond
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		if s.closeIdle() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			wait = min(2*wait, 500*time.Millisecond)
			timer.Reset(wait)
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.inShutdown.Store(true)
	s.closeListeners()
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.rwc.Close()
		delete(s.conns, c)
	}
	return nil
}

func (s *Server) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ln := range s.listeners {
		ln.Close()
	}
}

// closeIdle closes the idle connections (and those new for 5 s without
// a request, as net/http does) and reports whether none is left.
func (s *Server) closeIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := time.Now().Unix() - 5
	for c := range s.conns {
		st := connState(c.state.Load())
		if st == stateIdle || st == stateNew && c.since.Load() < old {
			c.rwc.Close()
			delete(s.conns, c)
		}
	}
	return len(s.conns) == 0
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	}
}

func (s *Server) maxHeaderBytes() int64 {
	if s.MaxHeaderBytes > 0 {
		return int64(s.MaxHeaderBytes)
	}
	return http.DefaultMaxHeaderBytes
}

// dateCache is the Date field's value, formatted once a second.
type dateCache struct {
	mu   sync.Mutex
	sec  int64
	text []byte
}

// append appends the Date of now to b.
func (d *dateCache) append(b []byte, now time.Time) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if sec := now.Unix(); sec != d.sec || d.text == nil {
		d.sec = sec
		d.text = now.UTC().AppendFormat(d.text[:0], http.TimeFormat)
	}
	return append(b, d.text...)
}
