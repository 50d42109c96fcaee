package dnsd

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd/rrl"
	"github.com/transmirror/transmirror/zones"
)

const (
	headerSize = 12
	flagQR     = 1 << 15
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

// screenReader drops messages that can not be unpacked before miekg/dns
// sees them (it would answer those with FORMERR echoing the request's
// flags). It returns them emptied, which miekg discards as a short read.
type screenReader struct {
	next dns.Reader
	s    *Server
}

var _ dns.PacketConnReader = (*screenReader)(nil)

func (r *screenReader) ReadTCP(conn net.Conn, timeout time.Duration) ([]byte, error) {
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
	m, err := r.next.ReadTCP(conn, timeout)
	if err != nil {
		return m, err
	}
	return r.s.screen(m), nil
}

func (r *screenReader) ReadUDP(conn *net.UDPConn, timeout time.Duration) ([]byte, *dns.SessionUDP, error) {
	m, sess, err := r.next.ReadUDP(conn, timeout)
	if err != nil {
		return m, sess, err
	}
	return r.s.screen(m), sess, nil
}

func (r *screenReader) ReadPacketConn(conn net.PacketConn, timeout time.Duration) ([]byte, net.Addr, error) {
	pr, ok := r.next.(dns.PacketConnReader)
	if !ok {
		return nil, nil, errors.New("dnsd: reader can not read a net.PacketConn")
	}
	m, addr, err := pr.ReadPacketConn(conn, timeout)
	if err != nil {
		return m, addr, err
	}
	return r.s.screen(m), addr, nil
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

// serveRaw is the edge's whole path for one message in bytes, as the
// listeners run it (UDP: fast path or slow path; TCP: screen, accept,
// unpack, serve); the fuzz target uses it.
func (s *Server) serveRaw(ctx context.Context, w dns.ResponseWriter, raw []byte, proto string) {
	if proto == "udp" {
		var addrs []netip.Addr
		if b := s.servePacket(ctx, raw, w.LocalAddr(), w.RemoteAddr(), &addrs, nil); b != nil {
			_, _ = w.Write(b)
		}
		return
	}
	raw = s.screen(raw)
	if len(raw) < headerSize || raw[2]&0x80 != 0 {
		return
	}
	r := new(dns.Msg)
	if err := r.Unpack(raw); err != nil {
		return
	}
	s.ServeMsg(ctx, w, r, proto)
}

// edgeHandler adapts the Server to miekg's dns.Handler for one transport.
type edgeHandler struct {
	s     *Server
	proto string
	ctx   context.Context
}

var _ dns.Handler = edgeHandler{}

func (h edgeHandler) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	h.s.ServeMsg(h.ctx, w, r, h.proto)
}

// reqInfo is what the edge learned about a request, for the handlers.
type reqInfo struct {
	tcp     bool
	client  netip.Addr
	edns    bool
	do      bool
	udpSize int
	nsid    bool
	cookie  []byte // client cookie
	hasECS  bool
	ecs     netip.Prefix
	ecsFam  uint16
	ecsSrc  uint8
	tsig    *dns.TSIG
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

// parseExtra checks the OPT and TSIG placement rules and reads the EDNS
// options into info. It returns the rcode to fail with, or success.
func (s *Server) parseExtra(r *dns.Msg, info *reqInfo) int {
	for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
		for _, rr := range sec {
			if t := rr.Header().Rrtype; t == dns.TypeOPT || t == dns.TypeTSIG {
				return dns.RcodeFormatError
			}
		}
	}
	var opt *dns.OPT
	for i, rr := range r.Extra {
		switch rr := rr.(type) {
		case *dns.OPT:
			if opt != nil || rr.Hdr.Name != "." {
				return dns.RcodeFormatError // RFC 6891 §6.1.1
			}
			opt = rr
		case *dns.TSIG:
			if i != len(r.Extra)-1 {
				return dns.RcodeFormatError // RFC 8945 §5.1: TSIG is last
			}
		}
	}
	if opt == nil {
		return dns.RcodeSuccess
	}
	info.edns = true
	info.do = opt.Do()
	info.udpSize = int(opt.UDPSize())
	if opt.Version() != 0 {
		return dns.RcodeBadVers
	}
	for _, o := range opt.Option {
		switch o := o.(type) {
		case *dns.EDNS0_COOKIE:
			b, err := hex.DecodeString(o.Cookie)
			// RFC 7873 §5.2.2: client cookie 8 bytes, server cookie 8 to 32.
			if err != nil || len(b) < 8 || len(b) > 40 || (len(b) > 8 && len(b) < 16) {
				return dns.RcodeFormatError
			}
			info.cookie = b[:8]
		case *dns.EDNS0_NSID:
			info.nsid = true
		case *dns.EDNS0_SUBNET:
			parseECS(o, info)
		}
	}
	return dns.RcodeSuccess
}

// parseECS reads a client subnet option; invalid ones are ignored.
func parseECS(o *dns.EDNS0_SUBNET, info *reqInfo) {
	var a netip.Addr
	var ok bool
	switch o.Family {
	case 1:
		a, ok = netip.AddrFromSlice(o.Address.To4())
	case 2:
		a, ok = netip.AddrFromSlice(o.Address.To16())
	}
	if !ok || o.SourceScope != 0 {
		return
	}
	p, err := a.Prefix(int(o.SourceNetmask))
	if err != nil {
		return
	}
	info.hasECS, info.ecs, info.ecsFam, info.ecsSrc = true, p, o.Family, o.SourceNetmask
}

// checkTSIG returns BADKEY for an unknown key or algorithm, BADTIME or
// BADSIG when miekg's verification failed, success otherwise.
func (s *Server) checkTSIG(snap *snapshot, w dns.ResponseWriter, t *dns.TSIG) int {
	if snap == nil {
		return dns.RcodeBadKey
	}
	k, ok := snap.keys[dns.CanonicalName(t.Hdr.Name)]
	if !ok || k.alg != dns.CanonicalName(t.Algorithm) {
		return dns.RcodeBadKey
	}
	switch err := w.TsigStatus(); {
	case err == nil:
		return dns.RcodeSuccess
	case errors.Is(err, dns.ErrTime):
		return dns.RcodeBadTime
	case errors.Is(err, dns.ErrSecret), errors.Is(err, dns.ErrKeyAlg):
		return dns.RcodeBadKey
	default:
		return dns.RcodeBadSig
	}
}

// edgeWriter finishes every reply a handler writes: header flags, question
// echo, OPT, truncation, TSIG, and it records what was written.
type edgeWriter struct {
	dns.ResponseWriter
	s       *Server
	snap    *snapshot
	req     *dns.Msg
	info    *reqInfo
	written bool
	limited bool // the rate limiter dropped the reply (written: nothing more to send)
	rcode   int
}

var _ dns.ResponseWriter = (*edgeWriter)(nil)

// WriteMsg finishes m and writes it.
func (ew *edgeWriter) WriteMsg(m *dns.Msg) error {
	ew.finish(m, true)
	if !ew.info.tcp && ew.snap != nil && ew.snap.rrl != nil {
		kind, name := rrlKind(m)
		switch ew.s.rrlAction(ew.snap, ew.info.client, kind, name) {
		case rrl.Drop:
			ew.written, ew.limited = true, true
			return nil
		case rrl.Slip:
			m = slipped(m)
		}
	}
	ew.record(m.Rcode)
	return ew.ResponseWriter.WriteMsg(m)
}

// rrlAction asks the snapshot's rate limiter about a UDP reply of kind
// for name to client and counts what it says; in log-only mode
// everything is sent.
func (s *Server) rrlAction(snap *snapshot, client netip.Addr, kind rrl.Kind, name string) rrl.Action {
	a := snap.rrl.Decide(client, kind, name, s.now())
	if a == rrl.Send {
		return a
	}
	if snap.rrl.Config().LogOnly {
		s.m.rrl.WithLabelValues(kind.String(), rrlLogged).Inc()
		return rrl.Send
	}
	label := rrlDropped
	if a == rrl.Slip {
		label = rrlSlipped
	}
	s.m.rrl.WithLabelValues(kind.String(), label).Inc()
	return a
}

// rrlKind says what kind of response m is and the name its bucket is
// counted by: the query name for answers and NODATA, the zone (the SOA
// owner) for NXDOMAIN, the delegation for referrals, nothing for errors.
func rrlKind(m *dns.Msg) (rrl.Kind, string) {
	qname := ""
	if len(m.Question) == 1 {
		qname = m.Question[0].Name
	}
	authority := func(t uint16) (string, bool) {
		for _, rr := range m.Ns {
			if rr.Header().Rrtype == t {
				return rr.Header().Name, true
			}
		}
		return "", false
	}
	switch {
	case m.Rcode == dns.RcodeNameError:
		if zone, ok := authority(dns.TypeSOA); ok {
			return rrl.NXDomain, zone
		}
		return rrl.NXDomain, qname
	case m.Rcode != dns.RcodeSuccess:
		return rrl.Error, ""
	case len(m.Answer) > 0:
		return rrl.Answer, qname
	}
	if cut, ok := authority(dns.TypeNS); ok && !m.Authoritative {
		return rrl.Referral, cut
	}
	return rrl.NoData, qname
}

// slipped is m truncated for a slip: the header with TC, the question and
// the OPT record, no records (a real client retries over TCP).
func slipped(m *dns.Msg) *dns.Msg {
	out := &dns.Msg{MsgHdr: m.MsgHdr, Question: m.Question, Compress: true}
	out.Truncated = true
	for _, rr := range m.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			out.Extra = append(out.Extra, rr)
		}
	}
	return out
}

// Write writes a packed reply as is.
func (ew *edgeWriter) Write(b []byte) (int, error) {
	rc := dns.RcodeServerFailure
	if len(b) >= headerSize {
		rc = int(b[3] & 0xf)
	}
	ew.record(rc)
	return ew.ResponseWriter.Write(b)
}

func (ew *edgeWriter) record(rc int) {
	if !ew.written {
		ew.written, ew.rcode = true, rc
	}
}

// writeError writes a reply with rcode and clean flags: only ID, opcode
// and RD are copied, the question when there is exactly one.
func (ew *edgeWriter) writeError(rcode int) {
	m := new(dns.Msg)
	m.Rcode = rcode
	if err := ew.WriteMsg(m); err != nil {
		ew.s.log.Debug("dnsd: write error reply", "rcode", rcode, "err", err)
	}
}

// writeTSIGError writes an unsigned NOTAUTH with the TSIG error code
// (RFC 8945 §5.2, §5.3.2).
func (ew *edgeWriter) writeTSIGError(t *dns.TSIG, code int) {
	m := new(dns.Msg)
	m.Rcode = dns.RcodeNotAuth
	ew.finish(m, false)
	rr := &dns.TSIG{
		Hdr:        dns.RR_Header{Name: t.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
		Algorithm:  t.Algorithm,
		TimeSigned: t.TimeSigned,
		Fudge:      t.Fudge,
		OrigId:     ew.req.Id,
		Error:      uint16(code),
	}
	if code == dns.RcodeBadTime {
		rr.OtherLen = 6
		rr.OtherData = fmt.Sprintf("%012x", time.Now().Unix())
	}
	m.Extra = append(m.Extra, rr)
	b, err := m.Pack()
	if err == nil {
		_, err = ew.Write(b)
	}
	if err != nil {
		ew.s.log.Debug("dnsd: write tsig error", "err", err)
	}
}

// finish applies the edge's rules to a reply. sign adds a TSIG for a
// request that carried a valid one.
func (ew *edgeWriter) finish(m *dns.Msg, sign bool) {
	r, info := ew.req, ew.info
	m.Id = r.Id
	m.Response = true
	m.Opcode = r.Opcode
	m.RecursionDesired = r.RecursionDesired
	m.RecursionAvailable = false
	m.Zero = false
	if len(r.Question) == 1 {
		m.Question = append(m.Question[:0], r.Question[0]) // the client's case (0x20)
	} else {
		m.Question = nil
	}

	// Take OPT and TSIG out; keep the options a handler put in its OPT.
	var opts []dns.EDNS0
	var tsig *dns.TSIG
	extra := m.Extra[:0:0]
	for _, rr := range m.Extra {
		switch rr := rr.(type) {
		case *dns.OPT:
			opts = append(opts, rr.Option...)
		case *dns.TSIG:
			tsig = rr
		default:
			extra = append(extra, rr)
		}
	}
	m.Extra = extra

	maxUDP := defaultMaxUDPSize
	if ew.snap != nil {
		maxUDP = ew.snap.maxUDP
	}
	if info.edns {
		opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		opt.SetUDPSize(uint16(maxUDP))
		if info.do {
			opt.SetDo()
		}
		opt.Option = opts
		if info.nsid && ew.snap != nil && ew.snap.nsidHex != "" {
			opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: ew.snap.nsidHex})
		}
		if info.cookie != nil {
			opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: ew.s.serverCookie(info)})
		}
		if info.hasECS && !hasOption(opts, dns.EDNS0SUBNET) {
			// No handler said what the answer depended on: nothing of
			// the client (scope 0).
			opt.Option = append(opt.Option, ecsOption(info, 0))
		}
		m.Extra = append(m.Extra, opt)
	}

	if sign && tsig == nil && info.tsig != nil {
		tsig = &dns.TSIG{
			Hdr:        dns.RR_Header{Name: info.tsig.Hdr.Name, Rrtype: dns.TypeTSIG, Class: dns.ClassANY},
			Algorithm:  info.tsig.Algorithm,
			Fudge:      tsigFudge,
			TimeSigned: uint64(time.Now().Unix()),
			OrigId:     r.Id,
		}
	}

	m.Compress = true
	size := dns.MaxMsgSize
	if !info.tcp {
		size = dns.MinMsgSize
		if info.edns {
			size = max(dns.MinMsgSize, min(info.udpSize, maxUDP))
		}
	}
	if tsig != nil {
		size -= dns.Len(tsig) + 64 // room for the MAC
	}
	if ew.fit(m, size) && !info.tcp {
		ew.s.m.truncated.Inc()
	}
	if tsig != nil {
		m.Extra = append(m.Extra, tsig)
	}
}

// fit makes m no larger than size: it drops the additional records first
// (without TC) unless m is a referral, whose glue is required (RFC 9471),
// then truncates with TC. It reports whether TC was set.
func (ew *edgeWriter) fit(m *dns.Msg, size int) bool {
	if m.Len() <= size {
		return false
	}
	referral := !m.Authoritative && len(m.Answer) == 0 && len(m.Ns) > 0 && m.Ns[0].Header().Rrtype == dns.TypeNS
	if !referral {
		kept := m.Extra[:0:0]
		for _, rr := range m.Extra {
			if rr.Header().Rrtype == dns.TypeOPT {
				kept = append(kept, rr)
			}
		}
		m.Extra = kept
		if m.Len() <= size {
			return false
		}
	}
	m.Truncate(size)
	m.Compress = true
	return m.Truncated
}

func hasOption(opts []dns.EDNS0, code uint16) bool {
	for _, o := range opts {
		if o.Option() == code {
			return true
		}
	}
	return false
}

// ecsOption is the reply's client subnet option (RFC 7871 §7.2.1) for an
// answer that depended on the first scope bits of the client's address.
func ecsOption(info *reqInfo, scope int) *dns.EDNS0_SUBNET {
	scope = max(0, min(scope, info.ecs.Addr().BitLen()))
	return &dns.EDNS0_SUBNET{
		Code:          dns.EDNS0SUBNET,
		Family:        info.ecsFam,
		SourceNetmask: info.ecsSrc,
		SourceScope:   uint8(scope),
		Address:       net.IP(info.ecs.Masked().Addr().AsSlice()),
	}
}

// serverCookie returns client cookie + server cookie in hex (RFC 7873
// §4.2): the server part is HMAC-SHA256(secret, client cookie | address)
// cut to 8 bytes.
func (s *Server) serverCookie(info *reqInfo) string {
	h := hmac.New(sha256.New, s.cookie)
	h.Write(info.cookie)
	a := info.client.As16()
	h.Write(a[:])
	out := make([]byte, 0, 16)
	out = append(out, info.cookie...)
	out = h.Sum(out)[:16]
	return hex.EncodeToString(out)
}

// tsigProvider signs and verifies with the keys of the current snapshot.
type tsigProvider struct{ s *Server }

var _ dns.TsigProvider = tsigProvider{}

func (p tsigProvider) mac(msg []byte, t *dns.TSIG) ([]byte, error) {
	snap := p.s.snap.Load()
	if snap == nil {
		return nil, dns.ErrSecret
	}
	k, ok := snap.keys[dns.CanonicalName(t.Hdr.Name)]
	if !ok {
		return nil, dns.ErrSecret
	}
	if k.alg != dns.CanonicalName(t.Algorithm) {
		return nil, dns.ErrKeyAlg
	}
	h := hmac.New(hashFor(k.alg), k.secret)
	h.Write(msg)
	return h.Sum(nil), nil
}

// Generate returns the MAC of msg.
func (p tsigProvider) Generate(msg []byte, t *dns.TSIG) ([]byte, error) { return p.mac(msg, t) }

// Verify checks the MAC of msg against t.MAC.
func (p tsigProvider) Verify(msg []byte, t *dns.TSIG) error {
	want, err := p.mac(msg, t)
	if err != nil {
		return err
	}
	got, err := hex.DecodeString(t.MAC)
	if err != nil || !hmac.Equal(got, want) {
		return dns.ErrSig
	}
	return nil
}

func hashFor(alg string) func() hash.Hash {
	switch alg {
	case dns.HmacSHA1:
		return sha1.New
	case dns.HmacSHA224:
		return sha256.New224
	case dns.HmacSHA256:
		return sha256.New
	case dns.HmacSHA384:
		return sha512.New384
	case dns.HmacSHA512:
		return sha512.New
	}
	return nil
}
