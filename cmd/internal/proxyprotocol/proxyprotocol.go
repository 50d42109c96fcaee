// Package proxyprotocol believes the PROXY protocol header (v1 and v2, as
// HAProxy's proxy-protocol.txt writes them) from the TCP load balancers
// and TLS terminators in front of a listener, and only from them: the
// client address that a header carries becomes the connection's
// RemoteAddr for everything above the listener (per-client caps, logs,
// the client's location).
//
// The threat model: anyone can write a PROXY header, so a header is read
// only from a trusted peer, and a trusted peer must send one (a balancer
// that sends none is misconfigured; believing its own address for every
// client would cap and locate all of them as one). A connection from any
// other peer is passed on untouched: a header it sends is just the first
// bytes of a bad request. The header is read in a goroutine of its own
// under a bounded deadline, so a slow or silent peer delays only its own
// connection, never the Accept of the others. The header's parsing is
// github.com/pires/go-proxyproto's; what to trust, the deadline and what
// is counted are here.
package proxyprotocol

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/pires/go-proxyproto"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultHeaderTimeout bounds the wait for a trusted peer's header.
const DefaultHeaderTimeout = 5 * time.Second

// The results that Options.Count is called with, one per connection read
// or sniffed.
const (
	// Accepted: a PROXY header carried the client's TCP address.
	Accepted = "accepted"
	// Local: a LOCAL command (a health check) or a header that carries no
	// TCP client (v1 UNKNOWN, v2 UNSPEC or UNIX); the peer's own address
	// is kept.
	Local = "local"
	// Missing: a trusted peer sent something else first; closed.
	Missing = "missing"
	// Malformed: a trusted peer's header did not parse; closed.
	Malformed = "malformed"
	// Timeout: a trusted peer's header did not arrive in time; closed.
	Timeout = "timeout"
	// Untrusted: a peer that is not trusted began with a PROXY signature,
	// which was not believed (it is served as the bytes of a request).
	Untrusted = "untrusted"
)

// Results is the bounded label set of the result counter.
var Results = []string{Accepted, Local, Missing, Malformed, Timeout, Untrusted}

// Options say whose headers are read and how.
type Options struct {
	// Trusted are the peers that must send a header (an empty list wraps
	// nothing).
	Trusted []netip.Prefix
	// HeaderTimeout bounds the wait for a header (0: DefaultHeaderTimeout).
	HeaderTimeout time.Duration
	// Count, when not nil, is called with each result (a metric's Inc).
	Count func(result string)
}

// Wrap returns the listener wrapper of o, to be applied to a raw TCP
// listener, beneath anything that reads the client's address (a
// per-client cap) or the connection's bytes (TLS). Without trusted peers
// it returns its listener unchanged.
func Wrap(o Options) func(net.Listener) net.Listener {
	if o.HeaderTimeout <= 0 {
		o.HeaderTimeout = DefaultHeaderTimeout
	}
	if o.Count == nil {
		o.Count = func(string) {}
	}
	return func(ln net.Listener) net.Listener {
		if len(o.Trusted) == 0 {
			return ln
		}
		return newListener(ln, o)
	}
}

// trusted reports whether a, a remote address, is one of o's peers.
func (o *Options) trusted(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return false
	}
	ip, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return false
	}
	ip = ip.Unmap()
	for _, p := range o.Trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// readHeader reads c's header within timeout and returns the connection
// to serve, or nil for one to close, with the result to count.
func readHeader(c net.Conn, timeout time.Duration) (net.Conn, string) {
	deadline := time.Now().Add(timeout)
	if err := c.SetReadDeadline(deadline); err != nil {
		return nil, Malformed
	}
	br := bufio.NewReader(c)
	h, err := proxyproto.Read(br)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(deadline):
		return nil, Timeout
	case errors.Is(err, proxyproto.ErrNoProxyProtocol):
		return nil, Missing
	default:
		return nil, Malformed
	}
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		return nil, Malformed
	}
	pc := &conn{Conn: c, r: br, remote: c.RemoteAddr()}
	src, _, ok := h.TCPAddrs()
	if h.Command.IsLocal() || !ok {
		return pc, Local
	}
	ip, _ := netip.AddrFromSlice(src.IP)
	pc.remote = net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip.Unmap(), uint16(src.Port)))
	return pc, Accepted
}

// startsWithHeader reports whether b, the first bytes a peer sent, begin
// with a PROXY v1 or v2 signature.
func startsWithHeader(b []byte) bool {
	return bytes.HasPrefix(b, []byte("PROXY ")) || bytes.HasPrefix(b, proxyproto.SIGV2)
}

// errNoRawConn: the connection has no descriptor, or still holds bytes
// read past its header, which its descriptor alone would lose.
var errNoRawConn = errors.New("proxyprotocol: connection has no usable file descriptor")

var (
	_ syscall.Conn = (*conn)(nil)
	_ syscall.Conn = (*untrustedConn)(nil)
)

// conn is a trusted peer's connection after its header: RemoteAddr is the
// client the header carried, and Read returns first what was read past
// the header.
type conn struct {
	net.Conn
	r      *bufio.Reader // nil once drained
	remote net.Addr
}

// RemoteAddr returns the client's address (the peer's for Local).
func (c *conn) RemoteAddr() net.Addr { return c.remote }

// Read reads the bytes buffered past the header, then the connection's.
func (c *conn) Read(b []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(b)
		}
		c.r = nil
	}
	return c.Conn.Read(b)
}

// untrustedConn is the connection of a peer that is not trusted, served
// as it is; the first bytes it sends are checked for a PROXY signature to
// count it.
type untrustedConn struct {
	net.Conn
	once  sync.Once
	count func(string)
}

// Read reads from the connection and counts a PROXY signature at its start.
func (c *untrustedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.once.Do(func() {
			if startsWithHeader(b[:n]) {
				c.count(Untrusted)
			}
		})
	}
	return n, err
}

// SyscallConn returns the connection's raw descriptor (for a connection
// handed off to another process), unless bytes read past the header are
// still buffered here.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if c.r != nil && c.r.Buffered() > 0 {
		return nil, errNoRawConn
	}
	return rawConn(c.Conn)
}

// SyscallConn returns the connection's raw descriptor.
func (c *untrustedConn) SyscallConn() (syscall.RawConn, error) { return rawConn(c.Conn) }

// rawConn returns c's raw descriptor, if it has one.
func rawConn(c net.Conn) (syscall.RawConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errNoRawConn
	}
	return sc.SyscallConn()
}

// NewCounter registers the counter of results of daemon's listeners
// (transmirror_<daemon>_proxy_protocol_connections_total{result}), every
// result present from the start, and returns its Count.
func NewCounter(daemon string, reg prometheus.Registerer) (func(result string), error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: daemon, Name: "proxy_protocol_connections_total",
		Help: "Public connections by what their PROXY protocol header was (proxy_protocol): accepted, local (the balancer's own), missing, malformed or timeout (closed), untrusted (a header from a peer that is not trusted, not believed).",
	}, []string{"result"})
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("proxyprotocol: register metrics: %w", err)
	}
	for _, r := range Results {
		c.WithLabelValues(r)
	}
	return func(result string) { c.WithLabelValues(result).Inc() }, nil
}
