package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/frontend"
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
	// NetHTTP serves HTTP/1.x with net/http's server rather than h1's
	// (tests compare the two; HTTP/2 is net/http's either way).
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
	s := &Server{o: o, handler: withRequestCheck(http.MaxBytesHandler(o.Handler, o.MaxBodyBytes)), log: o.Logger}
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
// the TLS config offers "h2" by ALPN, with r.TLS set. Then it
// stops accepting connections, closes idle ones and waits for the
// requests in flight to finish, at most ShutdownTimeout (on a fresh
// context, not the cancelled ctx); after that it closes the connections
// still open and returns an error wrapping context.DeadlineExceeded.
// Request contexts are not cancelled by ctx. Serve returns nil after a
// clean shutdown and the error otherwise, also when ln fails first.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base := context.WithoutCancel(ctx)
	hs := &http.Server{
		// A back end of a site in handoff mode reports the requests of
		// handed-off connections to the front end.
		Handler:                      withSendTimeout(frontend.ReportHandoffs(s.handler), s.o.SendTimeout, s.o.WriteTimeout, s.sendCut),
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
	addr := ln.Addr().String()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		hs.Close()
		return fmt.Errorf("mirror: serve %s: %w", addr, err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.ShutdownTimeout)
	defer cancel()
	err := hs.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if err != nil {
		hs.Close()
		return fmt.Errorf("mirror: shutdown %s: %w", addr, err)
	}
	return nil
}
