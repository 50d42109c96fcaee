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
	// decided is the group answer the fast path got for this query before
	// it left the reply to the slow path, nil if none.
	decided *groupDecision
	// compact: the answer is signed with compact denial (the signing
	// handler took it), so the reply says CO when the query did.
	compact bool
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
	s.serveMsg(ctx, w, r, proto, nil)
}

// serveMsg is ServeMsg with the group answer the fast path already got
// for r (nil for none).
func (s *Server) serveMsg(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, proto string, decided *groupDecision) {
	snap := s.snap.Load()
	info := &reqInfo{tcp: proto == "tcp", client: addrOf(w.RemoteAddr()), decided: decided}
	ew := &edgeWriter{ResponseWriter: w, s: s, snap: snap, req: r, info: info}
	defer ew.done(proto, time.Now())
	if !ew.admit() {
		return
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

// admit applies the protocol rules to the request before any handler
// sees it: NOTIMP for an opcode other than QUERY, meta types and TKEY;
// FORMERR for other than one question or a misplaced OPT or TSIG, and
// for a question of type OPT, TSIG or NXNAME;
// BADVERS; the TSIG check. It reads the request's EDNS options and TSIG
// into ew.info and reports whether the request goes on to the chain
// (false: the error reply is written).
func (ew *edgeWriter) admit() bool {
	r, info := ew.req, ew.info
	if r.Opcode != dns.OpcodeQuery {
		ew.writeError(dns.RcodeNotImplemented)
		return false
	}
	if len(r.Question) != 1 {
		ew.writeError(dns.RcodeFormatError)
		return false
	}
	if rc := ew.s.parseExtra(r, info); rc != dns.RcodeSuccess {
		ew.writeError(rc)
		return false
	}
	switch r.Question[0].Qtype {
	case dns.TypeOPT, dns.TypeTSIG, dns.TypeNXNAME: // NXNAME: RFC 9824 §3.5
		ew.writeError(dns.RcodeFormatError)
		return false
	case dns.TypeTKEY:
		ew.writeError(dns.RcodeNotImplemented)
		return false
	}
	if t := r.IsTsig(); t != nil {
		if code := ew.s.checkTSIG(ew.snap, ew.ResponseWriter, t); code != dns.RcodeSuccess {
			ew.writeTSIGError(t, code)
			return false
		}
		info.tsig = t
	}
	return true
}

// done is ServeMsg's deferred end: a handler's panic becomes SERVFAIL
// (unless a reply was written) and is counted and logged; the reply is
// counted by transport, qtype and rcode (not when the rate limiter dropped
// it), and the time since start observed.
func (ew *edgeWriter) done(proto string, start time.Time) {
	s, r := ew.s, ew.req
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
}

var _ dns.ResponseWriter = (*edgeWriter)(nil)

var _ dns.TsigProvider = tsigProvider{}
