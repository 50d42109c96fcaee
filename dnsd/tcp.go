package dnsd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones"
)

// ServeTCP serves DNS over TCP on ln, which it closes on return, with at
// most max_tcp_connections connections open at once (the server's TCP
// connections on all listeners count together). It blocks like ServeUDP.
func (s *Server) ServeTCP(ctx context.Context, ln net.Listener) error {
	srv := s.dnsServer(ctx)
	srv.Listener = &capListener{Listener: ln, s: s}
	srv.IdleTimeout = func() time.Duration {
		if snap := s.snap.Load(); snap != nil {
			return snap.idle
		}
		return defaultTCPIdleTimeout
	}
	return s.run(ctx, srv, "tcp")
}

// dnsServer configures miekg's server for TCP; handlers get ctx's values
// but not its cancellation, so that queries in flight finish during
// shutdown.
func (s *Server) dnsServer(ctx context.Context) *dns.Server {
	return &dns.Server{
		Net:            "tcp",
		Handler:        edgeHandler{s: s, ctx: context.WithoutCancel(ctx)},
		MsgAcceptFunc:  acceptMsg,
		DecorateReader: func(r dns.Reader) dns.Reader { return &tcpReader{Reader: r, s: s} },
		TsigProvider:   tsigProvider{s: s},
	}
}

func (s *Server) run(ctx context.Context, srv *dns.Server, proto string) error {
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	errc := make(chan error, 1)
	go func() { errc <- srv.ActivateAndServe() }()
	select {
	case err := <-errc:
		return fmt.Errorf("dnsd: serve %s: %w", proto, err)
	case <-started:
	}
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("dnsd: serve %s: %w", proto, err)
		}
		return nil
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.shutdown)
	defer cancel()
	if err := srv.ShutdownContext(sctx); err != nil {
		return fmt.Errorf("dnsd: shutdown %s: %w", proto, err)
	}
	if err := <-errc; err != nil {
		return fmt.Errorf("dnsd: serve %s: %w", proto, err)
	}
	return nil
}

// capListener closes connections beyond the snapshot's max_tcp_connections,
// or beyond max_tcp_connections_per_client of one client (an IPv4 address,
// an IPv6 /64: tcpClient), right after accepting them.
type capListener struct {
	net.Listener
	s *Server
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		limit, perClient := int64(defaultMaxTCPConns), zones.DefaultMaxTCPConnectionsPerClient
		if snap := l.s.snap.Load(); snap != nil {
			limit, perClient = int64(snap.maxTCP), snap.perTCP
		}
		if l.s.tcpConns.Add(1) > limit {
			l.s.tcpConns.Add(-1)
			_ = c.Close()
			l.s.m.tcpRejected.Inc()
			continue
		}
		client := tcpClient(addrOf(c.RemoteAddr()))
		if !l.s.tcpClients.acquire(client, perClient) {
			l.s.tcpConns.Add(-1)
			_ = c.Close()
			l.s.m.tcpRejected.Inc()
			continue
		}
		return &capConn{Conn: c, s: l.s, client: client}, nil
	}
}

// capConn gives its slots back once, on the first Close, and counts the
// queries read on it.
type capConn struct {
	net.Conn
	s       *Server
	client  netip.Addr
	queries atomic.Int64
	once    sync.Once
}

func (c *capConn) Close() error {
	c.once.Do(func() {
		c.s.tcpConns.Add(-1)
		c.s.tcpClients.release(c.client)
	})
	return c.Conn.Close()
}

// tcpClient returns the client whose share of the TCP connections a
// connection from a takes: a itself for IPv4, its /64 for IPv6 (one host
// holds a whole /64, and could otherwise open the cap's worth from each of
// its addresses).
func tcpClient(a netip.Addr) netip.Addr {
	if a.Is6() && !a.Is4In6() {
		p, _ := a.WithZone("").Prefix(64)
		return p.Addr()
	}
	return a
}

// clientConns counts the open TCP connections of each client address. It
// holds only addresses with a connection open, so it is bounded by
// max_tcp_connections.
type clientConns struct {
	mu sync.Mutex
	n  map[netip.Addr]int
}

// acquire takes a slot for a, unless a has limit open already.
func (cc *clientConns) acquire(a netip.Addr, limit int) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.n == nil {
		cc.n = make(map[netip.Addr]int)
	}
	if cc.n[a] >= limit {
		return false
	}
	cc.n[a]++
	return true
}

func (cc *clientConns) release(a netip.Addr) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.n[a]--; cc.n[a] <= 0 {
		delete(cc.n, a)
	}
}

// acceptMsg is the server's MsgAcceptFunc: responses are ignored, every
// request is accepted, so that FORMERR and NOTIMP are written by the edge
// (with clean flags) and never by miekg/dns.
func acceptMsg(dh dns.Header) dns.MsgAcceptAction {
	if dh.Bits&flagQR != 0 {
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}

// tcpReader is the TCP listeners' reader: it enforces max_tcp_queries
// and the first query's read timeout, and drops messages that can not be
// unpacked before miekg/dns sees them (it would answer those with FORMERR
// echoing the request's flags), returning them emptied, which miekg
// discards as a short read. UDP never comes here: udp.go reads its
// sockets itself.
type tcpReader struct {
	dns.Reader
	s *Server
}

func (r *tcpReader) ReadTCP(conn net.Conn, timeout time.Duration) ([]byte, error) {
	if c, ok := conn.(*capConn); ok {
		limit, read := zones.DefaultMaxTCPQueries, zones.DefaultTCPReadTimeout
		if snap := r.s.snap.Load(); snap != nil {
			limit, read = snap.tcpQs, snap.tcpRead
		}
		n := c.queries.Add(1)
		if n > int64(limit) {
			return nil, io.EOF // max_tcp_queries: the server closes the connection
		}
		if n == 1 {
			timeout = read // miekg waits this long for the first query, the idle timeout for the next
		}
	}
	m, err := r.Reader.ReadTCP(conn, timeout)
	if err != nil {
		return m, err
	}
	return r.s.screen(m), nil
}

// screen returns m, or m[:0] when m is a request that can not be unpacked.
func (s *Server) screen(m []byte) []byte {
	if len(m) >= headerSize && m[2]&0x80 != 0 {
		return m // a response: acceptMsg ignores it
	}
	var msg dns.Msg
	if len(m) < headerSize || msg.Unpack(m) != nil {
		s.m.dropped.Inc()
		return m[:0]
	}
	return m
}
