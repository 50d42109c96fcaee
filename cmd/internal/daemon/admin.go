package daemon

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/cmd/internal/connlimit"
)

// The admin servers' settings, the same in both daemons. Bodies are
// bounded again by the handlers that read one (dnsd's API: 64 KiB).
const (
	// AdminReadHeaderTimeout bounds reading a request's headers: a client
	// that drips them is cut off after it.
	AdminReadHeaderTimeout = 5 * time.Second
	// AdminReadTimeout bounds reading a whole request.
	AdminReadTimeout = 30 * time.Second
	// AdminWriteTimeout bounds writing a response; the dashboard's event
	// stream sets a deadline of its own before each event.
	AdminWriteTimeout = 60 * time.Second
	// AdminIdleTimeout closes keep-alive connections idle this long.
	AdminIdleTimeout = 60 * time.Second
	// AdminMaxBody bounds any request body an admin handler reads.
	AdminMaxBody = 1 << 20
	// AdminShutdownGrace is how long a stopping admin server drains.
	AdminShutdownGrace = 5 * time.Second
)

// Listener names, the values of the listener label of
// transmirror_<daemon>_http_refused_connections_total.
const (
	ListenerAdmin  = "admin"
	ListenerPublic = "public"
)

// AdminAddr returns the address an admin listener binds for addr as
// configured: a bare port (":8053") is the loopback address
// 127.0.0.1:8053, so that the admin API is never exposed by accident;
// any written host is kept ("0.0.0.0:8053", "[::]:8053").
func AdminAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// Refused returns transmirror_<daemon>_http_refused_connections_total
// by listener, registered with reg, with both label values present.
func Refused(daemon string, reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: daemon, Name: "http_refused_connections_total",
		Help: "HTTP connections closed on accept because their client address already held limits' max_conns_per_client, by listener (public, admin).",
	}, []string{"listener"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("%s: register listener metrics: %w", daemon, err)
	}
	c.WithLabelValues(ListenerAdmin)
	if daemon == "mirror" {
		c.WithLabelValues(ListenerPublic)
	}
	return c, nil
}

// ListenOptions say how an HTTP listener is opened.
type ListenOptions struct {
	// MaxConnsPerClient caps each client's open connections (an IPv4
	// address, an IPv6 /64; 0: no cap); Refused counts the ones closed for it.
	MaxConnsPerClient int
	Refused           prometheus.Counter
	// TLS, when not nil, serves TLS (1.2 or later) with its certificate.
	TLS *certs.Keypair
	// Wrap, when not nil, wraps the raw TCP listener beneath the cap and
	// TLS (a PROXY protocol reader: the cap then counts the client it
	// carries, and its header comes before the TLS handshake).
	Wrap func(net.Listener) net.Listener
}

// Listen opens a TCP listener on addr with o's wrapper, per-client cap
// and TLS, in this order from the socket up (the cap counts TCP
// connections, before any handshake).
func Listen(addr string, o ListenOptions) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if o.Wrap != nil {
		ln = o.Wrap(ln)
	}
	var refused func()
	if o.Refused != nil {
		refused = o.Refused.Inc
	}
	ln = connlimit.New(ln, o.MaxConnsPerClient, refused)
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS.ServerConfig())
	}
	return ln, nil
}

// ListenAdmin opens the admin listener of addr as configured (see
// AdminAddr) and logs where it listens; it warns when that is not a
// loopback address and TLS is off.
func ListenAdmin(addr string, o ListenOptions, logger *slog.Logger) (net.Listener, error) {
	ln, err := Listen(AdminAddr(addr), o)
	if err != nil {
		return nil, err
	}
	bound := ln.Addr().String()
	logger.Info("admin listening", "addr", bound, "tls", o.TLS != nil)
	if ap, err := netip.ParseAddrPort(bound); err == nil && !ap.Addr().IsLoopback() && o.TLS == nil {
		logger.Warn("admin API reachable beyond this host without TLS: set admin_tls, or bind it to a loopback address", "addr", bound)
	}
	return ln, nil
}

// NewAdminServer returns the http.Server of an admin listener: h with
// request bodies bounded by AdminMaxBody, headers by maxHeaderBytes (0:
// Go's default) and the Admin* timeouts, its errors logged at Warn.
func NewAdminServer(h http.Handler, maxHeaderBytes int, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           http.MaxBytesHandler(h, AdminMaxBody),
		ReadHeaderTimeout: AdminReadHeaderTimeout,
		ReadTimeout:       AdminReadTimeout,
		WriteTimeout:      AdminWriteTimeout,
		IdleTimeout:       AdminIdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}
