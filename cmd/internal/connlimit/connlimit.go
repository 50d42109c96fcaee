// Package connlimit caps the connections that one client address holds
// open on a listener at once, so that a flood of idle or slow connections
// from one host can not take every file descriptor and goroutine of a
// server. The connections beyond the cap are closed as soon as they are
// accepted, before a byte is read, and counted.
package connlimit

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"
)

// Listener is a net.Listener whose Accept closes, instead of returning, a
// connection from a client address that already holds Max open ones.
// Clients are told apart by IPv4 address and by IPv6 /64 (the smallest
// network a host is given: one host holds all of its addresses, and a
// cap per IPv6 address would cap nothing); an IPv4-mapped IPv6 address is
// its IPv4 address. A connection without an IP address (a Unix socket) is
// never limited.
type Listener struct {
	net.Listener
	max     int
	refused func()

	bufs sync.Pool // *[]byte: the copies of conn.ReadFrom

	mu   sync.Mutex
	open map[netip.Addr]int
}

var _ net.Listener = (*Listener)(nil)

// New returns ln with at most max concurrent connections per client
// address; max <= 0 is no limit. refused, when not nil, is called once
// for each connection closed for the cap (a metric's Inc).
func New(ln net.Listener, max int, refused func()) *Listener {
	if refused == nil {
		refused = func() {}
	}
	return &Listener{Listener: ln, max: max, refused: refused, open: make(map[netip.Addr]int)}
}

// Accept waits for the next connection whose client is under the cap and
// returns it; closing it frees its client's place. Connections over the
// cap are closed and counted meanwhile. Its errors are the inner
// listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, ok := clientAddr(c)
		if !ok || l.max <= 0 {
			return c, nil
		}
		if !l.acquire(ip) {
			l.refused() // before the close, which the client may see at once
			c.Close()
			continue
		}
		return &conn{Conn: c, release: sync.OnceFunc(func() { l.release(ip) }), bufs: &l.bufs}, nil
	}
}

// Open returns the number of connections that the client at ip holds
// (for IPv6, its /64).
func (l *Listener) Open(ip netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[clientOf(ip)]
}

// clientOf returns the client that ip is counted for: ip itself for IPv4
// (mapped or not), the first address of its /64 for IPv6.
func clientOf(ip netip.Addr) netip.Addr {
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.WithZone("").Prefix(64)
		return p.Addr()
	}
	return ip
}

func (l *Listener) acquire(ip netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] >= l.max {
		return false
	}
	l.open[ip]++
	return true
}

func (l *Listener) release(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] <= 1 {
		delete(l.open, ip) // the map holds only clients with connections
		return
	}
	l.open[ip]--
}

// clientAddr returns the client of c's remote end (see clientOf).
func clientAddr(c net.Conn) (netip.Addr, bool) {
	a, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	return clientOf(ip), ok
}

// conn frees its client's place once, on the first Close.
type conn struct {
	net.Conn
	release func()
	bufs    *sync.Pool // nil: io.Copy's own buffer
}

var (
	_ syscall.Conn  = (*conn)(nil)
	_ io.ReaderFrom = (*conn)(nil)
)

// errNoRawConn: the accepted connection has no file descriptor.
var errNoRawConn = errors.New("connlimit: connection has no file descriptor")

// SyscallConn returns the inner connection's raw descriptor, so that a
// connection handed off to another process (mirror/frontend's handoff)
// can be passed on. A handed-off connection is closed here, which frees
// its client's place.
func (c *conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errNoRawConn
	}
	return sc.SyscallConn()
}

// ReadFrom passes another socket's bytes to the inner connection's
// ReadFrom (a *net.TCPConn splices them, the site front end's relay of a
// large body through net/http's response writer) and copies anything
// else, a file among them, through a buffer, as net/http does when its
// connection has no ReadFrom. Measured on loopback (2 cores, wrk
// with 32 connections), splice cut the front end's CPU per MiB relayed to 0.7×, and
// sendfile raised a mirror's per MiB served to 1.3–1.5× a copy's: it is
// not used.
func (c *conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok && fromSocket(r) {
		return rf.ReadFrom(r)
	}
	if c.bufs == nil {
		return io.Copy(writerOnly{c.Conn}, readerOnly{r})
	}
	bp, _ := c.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 32<<10)
		bp = &b
	}
	defer c.bufs.Put(bp)
	return io.CopyBuffer(writerOnly{c.Conn}, readerOnly{r}, *bp)
}

// fromSocket reports whether r reads a network connection (or a limited
// part of one), which a TCP connection's ReadFrom splices.
func fromSocket(r io.Reader) bool {
	if lr, ok := r.(*io.LimitedReader); ok {
		r = lr.R
	}
	_, ok := r.(net.Conn)
	return ok
}

// writerOnly and readerOnly hide ReadFrom and WriteTo, so that io.Copy
// neither calls them again nor sends a file with sendfile.
type (
	writerOnly struct{ io.Writer }
	readerOnly struct{ io.Reader }
)

// Close closes the connection and frees its client's place.
func (c *conn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
