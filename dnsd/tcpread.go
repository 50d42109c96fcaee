package dnsd

import (
	"io"
	"net"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones"
)

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
