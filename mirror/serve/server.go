package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/h1"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Defaults of a Server (the mirror config's timeouts and limits).
const (
	// DefaultReadHeaderTimeout is timeouts.read_header.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultIdleTimeout is timeouts.idle.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultSendTimeout is timeouts.send.
	DefaultSendTimeout = 60 * time.Second
	// DefaultShutdownTimeout is timeouts.shutdown, the grace for requests
	// in flight at shutdown.
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultMaxHeaderBytes bounds request headers (ServerOptions.MaxHeaderBytes),
	// limits.max_header_bytes.
	DefaultMaxHeaderBytes = yamlconf.DefaultMaxHeaderBytes
	// DefaultMaxBodyBytes bounds request bodies (ServerOptions.MaxBodyBytes):
	// a mirror serves GET and HEAD, whose requests have none.
	DefaultMaxBodyBytes = 1 << 20
)

// ServerOptions configure a Server. Zero durations take the defaults
// documented on each field.
type ServerOptions struct {
	// Handler answers every request (e.g. a FileServer). Required.
	Handler http.Handler
	// Logger receives the HTTP server's own errors (default: discard).
	Logger *slog.Logger
	// Registerer, when not nil, gets the request metrics
	// (transmirror_mirror_*), and the Handler is instrumented with them.
	// The admin server passes nil.
	Registerer prometheus.Registerer

	// ReadHeaderTimeout bounds reading request headers
	// (default DefaultReadHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request (0: off).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response (0: off, for large files).
	WriteTimeout time.Duration
	// SendTimeout bounds each write of a response, the time a client may
	// take nothing of it (0: off; see withSendTimeout).
	SendTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long
	// (default DefaultIdleTimeout).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request headers (default DefaultMaxHeaderBytes);
	// larger requests get 431.
	MaxHeaderBytes int
	// MaxBodyBytes bounds the request body that a handler may read
	// (default DefaultMaxBodyBytes); reading past it fails, with 413
	// from handlers that report it.
	MaxBodyBytes int64
	// ShutdownTimeout is the grace that Serve gives requests in flight
	// once its context is done (default DefaultShutdownTimeout).
	ShutdownTimeout time.Duration
	// NetHTTP serves HTTP/1.x with net/http's server rather than
	// h1.Server (HTTP/2 is net/http's either way): the reference that
	// the conformance test (engine_test.go) compares h1 with.
	NetHTTP bool
}

// Server is an HTTP server with the mirror's timeouts, metrics and
// graceful shutdown. One Server may serve any number of listeners, each
// with its own Serve call.
type Server struct {
	o       ServerOptions
	handler http.Handler
	log     *slog.Logger
	sendCut prometheus.Counter // responses cut off by the send timeout; nil without metrics
	tlsErrs prometheus.Counter // failed TLS handshakes; nil without metrics
}

// NewServer returns a Server, with its metrics registered when
// o.Registerer is set.
func NewServer(o ServerOptions) (*Server, error) {
	if o.Handler == nil {
		return nil, errors.New("mirror: server: no handler")
	}
	if o.ReadHeaderTimeout <= 0 {
		o.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = DefaultShutdownTimeout
	}
	s := &Server{o: o, handler: withRequestCheck(o.Handler), log: o.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if o.Registerer != nil {
		m, err := newMetrics(o.Registerer)
		if err != nil {
			return nil, fmt.Errorf("mirror: register metrics: %w", err)
		}
		s.handler = m.instrument(s.handler)
		s.sendCut = m.sendCut
		s.tlsErrs = m.tlsErrs
	}
	return s, nil
}

// Serve serves HTTP on ln, which it closes, until ctx is done; on a
// listener of crypto/tls (tls.NewListener) it serves HTTPS, HTTP/2 when
// the TLS config offers "h2" by ALPN, with r.TLS set. HTTP/1.x is
// served by h1.Server (net/http's server with NetHTTP), HTTP/2 by
// net/http's. Then it stops accepting connections, closes idle ones and
// waits for the requests in flight to finish, at most ShutdownTimeout
// (on a fresh context, not the cancelled ctx); after that it closes the
// connections still open and returns an error wrapping
// context.DeadlineExceeded. Request contexts are not cancelled by ctx.
// Serve returns nil after a clean shutdown and the error otherwise, also
// when ln fails first.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base := context.WithoutCancel(ctx)
	hs := &http.Server{
		// A back end of a site in handoff mode reports the requests of
		// handed-off connections to the front end.
		Handler:                      http.MaxBytesHandler(withSendTimeout(frontend.ReportHandoffs(s.handler), s.o.SendTimeout, s.o.WriteTimeout, s.sendCut), s.o.MaxBodyBytes),
		ConnContext:                  frontend.HandoffConnContext,
		ReadHeaderTimeout:            s.o.ReadHeaderTimeout,
		ReadTimeout:                  s.o.ReadTimeout,
		WriteTimeout:                 s.o.WriteTimeout,
		IdleTimeout:                  s.o.IdleTimeout,
		MaxHeaderBytes:               s.o.MaxHeaderBytes,
		DisableGeneralOptionsHandler: true, // "OPTIONS *" is withRequestCheck's
		ErrorLog:                     errorLog(s.log, s.tlsErrs),
		BaseContext:                  func(net.Listener) context.Context { return base },
	}
	if s.o.NetHTTP {
		return serveUntil(ctx, ln.Addr().String(), s.o.ShutdownTimeout, hs, func() error { return hs.Serve(ln) })
	}
	h2 := newConnQueue(ln.Addr())
	h := &h1.Server{
		Handler:           frontend.ReportHandoffs(s.handler),
		ReadHeaderTimeout: s.o.ReadHeaderTimeout,
		ReadTimeout:       s.o.ReadTimeout,
		WriteTimeout:      s.o.WriteTimeout,
		IdleTimeout:       s.o.IdleTimeout,
		SendTimeout:       s.o.SendTimeout,
		MaxHeaderBytes:    s.o.MaxHeaderBytes,
		MaxBodyBytes:      s.o.MaxBodyBytes,
		BaseContext:       base,
		ConnContext:       frontend.HandoffConnContext,
		ErrorLog:          hs.ErrorLog,
		NextProto:         map[string]func(*tls.Conn){"h2": h2.push},
	}
	if s.sendCut != nil {
		h.SendCut = s.sendCut.Inc
	}
	go func() { _ = hs.Serve(h2) }()
	defer hs.Close()
	return serveUntil(ctx, ln.Addr().String(), s.o.ShutdownTimeout, both{h, hs}, func() error { return h.Serve(ln) })
}

// server is what serveUntil shuts down.
type server interface {
	Shutdown(context.Context) error
	Close() error
}

// both are the HTTP/1.x and the HTTP/2 server of a listener.
type both struct{ h1, h2 server }

func (b both) Shutdown(ctx context.Context) error {
	return errors.Join(b.h1.Shutdown(ctx), b.h2.Shutdown(ctx))
}

func (b both) Close() error { return errors.Join(b.h1.Close(), b.h2.Close()) }

// serveUntil runs serve until ctx is done, then shuts srv down within
// grace (closing it after).
func serveUntil(ctx context.Context, addr string, grace time.Duration, srv server, serve func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		srv.Close()
		return fmt.Errorf("mirror: serve %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		srv.Close()
		return fmt.Errorf("mirror: shutdown %s: %w", addr, err)
	}
	return nil
}

// connQueue is a net.Listener of the TLS connections that h1.Server
// hands over for HTTP/2.
type connQueue struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue(addr net.Addr) *connQueue {
	return &connQueue{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (q *connQueue) push(c *tls.Conn) {
	select {
	case q.ch <- c:
	case <-q.done:
		c.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return q.addr }
