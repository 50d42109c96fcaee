package dnsd

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

const (
	headerSize = 12
	flagQR     = 1 << 15
)

// edgeHandler adapts the Server to miekg's dns.Handler for TCP (UDP is
// served by udp.go).
type edgeHandler struct {
	s   *Server
	ctx context.Context
}

var _ dns.Handler = edgeHandler{}

func (h edgeHandler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	h.s.ServeMsg(h.ctx, w, r, "tcp")
}

// reqInfo is what the edge learned about a request, for the handlers.
type reqInfo struct {
	ednsQuery
	tcp    bool
	client netip.Addr
	cookie []byte // client cookie
	tsig   *dns.TSIG
}

type infoKey struct{}

// infoFrom returns the edge's reqInfo, or one derived from w when the
// handler runs without the edge (benchmarks, external callers).
func infoFrom(ctx context.Context, w dns.ResponseWriter) *reqInfo {
	if ri, ok := ctx.Value(infoKey{}).(*reqInfo); ok {
		return ri
	}
	_, tcp := w.RemoteAddr().(*net.TCPAddr)
	return &reqInfo{tcp: tcp, client: addrOf(w.RemoteAddr())}
}

func addrOf(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort().Addr().Unmap()
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case nil:
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// ServeMsg answers one parsed query r on w as if it came in over proto
// ("udp" or "tcp"): the edge rules, then the snapshot's chain. The sockets
// of ServeUDP and ServeTCP call it for every message; benchmarks and
// in-process callers use it without a socket.
func (s *Server) ServeMsg(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, proto string) {
	start := time.Now()
	snap := s.snap.Load()
	info := &reqInfo{tcp: proto == "tcp", client: addrOf(w.RemoteAddr())}
	ew := &edgeWriter{ResponseWriter: w, s: s, snap: snap, req: r, info: info}
	defer func() {
		if p := recover(); p != nil {
			s.m.panics.Inc()
			s.log.Error("dnsd: handler panic", "panic", fmt.Sprint(p))
			if !ew.written {
				ew.writeError(dns.RcodeServerFailure)
			}
		}
		qt := "other"
		if len(r.Question) == 1 {
			qt = qtypeLabel(r.Question[0].Qtype)
		}
		if ew.written && !ew.limited {
			s.m.queries.WithLabelValues(proto, qt, rcodeLabel(ew.rcode)).Inc()
		}
		s.m.duration.WithLabelValues(proto).Observe(time.Since(start).Seconds())
	}()

	if r.Opcode != dns.OpcodeQuery {
		ew.writeError(dns.RcodeNotImplemented)
		return
	}
	if len(r.Question) != 1 {
		ew.writeError(dns.RcodeFormatError)
		return
	}
	if rc := s.parseExtra(r, info); rc != dns.RcodeSuccess {
		ew.writeError(rc)
		return
	}
	switch r.Question[0].Qtype {
	case dns.TypeOPT, dns.TypeTSIG:
		ew.writeError(dns.RcodeFormatError)
		return
	case dns.TypeTKEY:
		ew.writeError(dns.RcodeNotImplemented)
		return
	}
	if t := r.IsTsig(); t != nil {
		if code := s.checkTSIG(snap, w, t); code != dns.RcodeSuccess {
			ew.writeTSIGError(t, code)
			return
		}
		info.tsig = t
	}
	if snap == nil {
		ew.writeError(dns.RcodeRefused)
		return
	}
	rc, err := snap.chain.ServeDNS(context.WithValue(ctx, infoKey{}, info), ew, r)
	if err != nil {
		s.log.Debug("dnsd: handler error", "handler", snap.chain.Name(), "rcode", rc, "err", err)
	}
	if !ew.written {
		if rc == dns.RcodeSuccess || rc == dns.RcodeNameError {
			rc = dns.RcodeServerFailure // claimed an answer but wrote none
		}
		ew.writeError(rc)
	}
}

var _ dns.ResponseWriter = (*edgeWriter)(nil)

var _ dns.TsigProvider = tsigProvider{}
