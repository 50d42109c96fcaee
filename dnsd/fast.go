package dnsd

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/dnsd/dnssec"
	"github.com/transmirror/transmirror/dnsd/rrl"
)

// The fast path answers the common UDP queries from the packet's bytes,
// without unpacking them into a dns.Msg: a query of class IN with one
// question in lower case and at most an OPT record (EDNS version 0 with
// only the NSID, client subnet and padding options), for a name and type
// the snapshot's fastTable holds. Everything else, and anything the fast
// path is not sure of, goes the slow path (miekg/dns unpacks the packet,
// ServeMsg answers it). miekg/dns stays the packer of record: static
// replies are packed by it when the snapshot is built, and the bytes the
// fast path writes by hand are proven identical to the slow path's by
// TestFastPathMatchesSlowPath. Names whose first label is _acme-challenge
// are never in the table: their answers are the live ACME challenges.

// maxFastEntries bounds a snapshot's fast table; names beyond it are
// answered by the slow path.
const maxFastEntries = 1 << 17

// fastTable holds what the fast path can answer, keyed by the question's
// wire name (lower case) followed by its type, both as on the wire.
type fastTable struct {
	entries map[string]*fastEntry
}

// fastEntry is one name and type of the table.
type fastEntry struct {
	name  string // canonical presentation form (group answerer, RRL)
	qtype uint16
	// group: the answer comes from the group answerer, packed per query.
	group bool
	// reply is, for a static answer, the whole reply as the slow path
	// packs it for a query without EDNS, ID 0, RD and CD clear.
	reply   []byte
	queries prometheus.Counter // queries_total{udp, qtype, NOERROR}
	// signer signs the zone's answers to queries with DO (nil: unsigned).
	signer *dnssec.Signer
	// origTTL is a group's ttl.max, its RRSIGs' original TTL.
	origTTL uint32
	// doReply is a static answer's signed reply (as reply, for a query
	// with DO), made when first asked for and again each hour.
	doReply atomic.Pointer[signedReply]
}

// buildFast fills the fast table of snap, whose chain is built. Static
// answers are computed by running the chain once per owner name and
// type: they must not depend on the client, which holds for every handler
// the chain has (a handler that looks at the client must disable this).
func (s *Server) buildFast(snap *snapshot) *fastTable {
	if s.wrap != nil || s.slowOnly {
		return nil // tests that wrap the chain see every query
	}
	t := &fastTable{entries: make(map[string]*fastEntry)}
	set := snap.set
	var buf [512]byte
	key := func(name string, qtype uint16) (string, bool) {
		off, err := dns.PackDomainName(name, buf[:], 0, nil, false)
		if err != nil || off+2 > len(buf) {
			return "", false
		}
		binary.BigEndian.PutUint16(buf[off:], qtype)
		return string(buf[:off+2]), true
	}
	add := func(e *fastEntry) {
		k, ok := key(e.name, e.qtype)
		if !ok || len(t.entries) >= maxFastEntries {
			return
		}
		if _, dup := t.entries[k]; dup {
			return
		}
		for i := 0; i < len(k)-2; i++ {
			if c := k[i]; 'A' <= c && c <= 'Z' {
				return // the fast path only reads lower-case names
			}
		}
		e.queries = s.m.queries.WithLabelValues("udp", qtypeLabel(e.qtype), rcodeLabel(dns.RcodeSuccess))
		e.signer = snap.signers[set.Find(e.name)]
		if g := set.Group(e.name); g != nil && e.group {
			e.origTTL = g.TTL.Max
		}
		t.entries[k] = e
	}
	for name := range set.Groups {
		z := set.Find(name)
		if z == nil || z.Cut(name) != "" {
			continue
		}
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
			add(&fastEntry{name: name, qtype: qt, group: true})
		}
	}
	for _, z := range set.Zones {
		for _, rr := range z.Records() {
			h := rr.Header()
			name, qt := dns.CanonicalName(h.Name), h.Rrtype
			switch qt {
			case dns.TypeANY, dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeAXFR, dns.TypeIXFR:
				continue
			}
			if set.Find(name) != z || isChallengeName(name) {
				continue // another zone's, or an ACME challenge's (live answers)
			}
			if k, ok := key(name, qt); !ok || t.entries[k] != nil {
				continue
			}
			if reply := s.precompute(snap, name, qt, false); reply != nil {
				add(&fastEntry{name: name, qtype: qt, reply: reply})
			}
		}
	}
	return t
}

// precompute runs the chain for name and qtype as a query without EDNS
// (with do: one with the DO bit, whose reply is signed; the fast path
// adds the OPT record) and returns the packed reply when it is a
// positive authoritative answer of exactly that name and type (no
// CNAME, no wildcard), nil otherwise.
func (s *Server) precompute(snap *snapshot, name string, qtype uint16, do bool) []byte {
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	r.RecursionDesired = false
	r.Id = 0
	info := &reqInfo{tcp: true} // no size limit and no rate limit: the fast path checks both
	info.do = do
	w := &captureWriter{}
	ew := &edgeWriter{ResponseWriter: w, s: s, snap: snap, req: r, info: info}
	if _, err := snap.chain.ServeDNS(context.WithValue(context.Background(), infoKey{}, info), ew, r); err != nil {
		return nil
	}
	m := w.msg
	if m == nil || m.Rcode != dns.RcodeSuccess || !m.Authoritative || m.Truncated || len(m.Answer) == 0 {
		return nil
	}
	for _, rr := range m.Answer {
		if h := rr.Header(); h.Rrtype != qtype && !coversType(rr, qtype) || dns.CanonicalName(h.Name) != name || h.Name != name {
			return nil
		}
	}
	for _, rr := range m.Extra {
		if t := rr.Header().Rrtype; t == dns.TypeOPT || t == dns.TypeTSIG {
			return nil
		}
	}
	b, err := m.Pack()
	if err != nil {
		return nil
	}
	return b
}

// captureWriter keeps the one message written to it.
type captureWriter struct {
	udpWriter
	msg *dns.Msg
}

func (w *captureWriter) WriteMsg(m *dns.Msg) error {
	w.msg = m
	return nil
}

// fastQuery is what the fast path read from a query.
type fastQuery struct {
	ednsQuery
	keyEnd int // the table key is pkt[headerSize:keyEnd]
	qend   int // end of the question section
}

// parseFast reads pkt into q. It reports false for anything the fast path
// does not answer, whatever the reason: the slow path decides those.
func parseFast(pkt []byte, q *fastQuery) bool {
	if len(pkt) < headerSize+5 || pkt[2]&0xf8 != 0 { // QR clear, opcode QUERY
		return false
	}
	if binary.BigEndian.Uint16(pkt[4:]) != 1 || binary.BigEndian.Uint16(pkt[6:]) != 0 || binary.BigEndian.Uint16(pkt[8:]) != 0 {
		return false
	}
	ar := binary.BigEndian.Uint16(pkt[10:])
	if ar > 1 {
		return false
	}
	off := headerSize
	for {
		if off >= len(pkt) {
			return false
		}
		l := int(pkt[off])
		if l == 0 {
			off++
			break
		}
		if l > 63 || off+1+l >= len(pkt) {
			return false // a compression pointer in a question, or short
		}
		for _, c := range pkt[off+1 : off+1+l] {
			if 'A' <= c && c <= 'Z' {
				return false // miekg compresses case-sensitively: the slow path packs these
			}
		}
		off += 1 + l
		if off-headerSize > 254 {
			return false
		}
	}
	if off+4 > len(pkt) || binary.BigEndian.Uint16(pkt[off+2:]) != dns.ClassINET {
		return false
	}
	q.keyEnd = off + 2
	off += 4
	q.qend = off
	if ar == 0 {
		return off == len(pkt)
	}
	// The OPT record: root owner, type OPT, version 0, its options.
	if off+11 > len(pkt) || pkt[off] != 0 || binary.BigEndian.Uint16(pkt[off+1:]) != dns.TypeOPT || pkt[off+6] != ednsVersion {
		return false
	}
	q.edns = true
	q.udpSize = int(binary.BigEndian.Uint16(pkt[off+3:]))
	q.do = pkt[off+7]&0x80 != 0
	if pkt[off+7]&0x40 != 0 {
		return false // CO (RFC 9824): rare yet; the slow path says so in its reply
	}
	rdlen := int(binary.BigEndian.Uint16(pkt[off+9:]))
	off += 11
	if off+rdlen != len(pkt) {
		return false
	}
	return parseFastOptions(pkt[off:], q)
}

// parseFastOptions reads the options of the OPT record, opts, into q: NSID,
// padding and one client subnet option. It reports false for any other
// option, or a malformed one.
func parseFastOptions(opts []byte, q *fastQuery) bool {
	for off := 0; off < len(opts); {
		if off+4 > len(opts) {
			return false
		}
		code, n := binary.BigEndian.Uint16(opts[off:]), int(binary.BigEndian.Uint16(opts[off+2:]))
		off += 4
		if off+n > len(opts) {
			return false
		}
		data := opts[off : off+n]
		off += n
		switch code {
		case dns.EDNS0NSID:
			q.nsid = true
		case dns.EDNS0PADDING:
		case dns.EDNS0SUBNET:
			if q.hasECS || !parseFastECS(data, q) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// parseFastECS reads a client subnet option that the slow path would use
// as is; it reports false for any other (the slow path ignores or refuses
// those).
func parseFastECS(d []byte, q *fastQuery) bool {
	if len(d) < 4 {
		return false
	}
	fam, src := binary.BigEndian.Uint16(d), d[2]
	if len(d)-4 != (int(src)+7)/8 || len(d)-4 > 16 {
		return false // the address is as long as the source prefix needs
	}
	var b [16]byte
	copy(b[:], d[4:])
	var a netip.Addr
	switch fam {
	case 1:
		a = netip.AddrFrom4([4]byte(b[:4]))
	case 2:
		a = netip.AddrFrom16(b)
	}
	return q.setECS(fam, src, d[3], a)
}

// groupDecision is a group answer that the fast path got and then left
// to the slow path (NODATA, or a reply too big for the client): the slow
// path answers with it instead of asking the answerer again. Its
// addresses are in the caller's room, valid until the next query.
type groupDecision struct {
	name  string // canonical
	qtype uint16
	ga    GroupAnswer
	err   error
}

// tryFast answers pkt by the fast path when it can (see answerFast); a
// group answer it got but did not send is left in dec.
func (s *Server) tryFast(ctx context.Context, snap *snapshot, pkt []byte, remote net.Addr, addrs *[]netip.Addr, out []byte, dec *groupDecision) ([]byte, bool) {
	var q fastQuery
	if !parseFast(pkt, &q) {
		return nil, false
	}
	e := snap.fast.entries[string(pkt[headerSize:q.keyEnd])]
	if e == nil {
		return nil, false
	}
	return s.answerFast(ctx, snap, e, &q, pkt, addrOf(remote), addrs, out, dec)
}

// answerFast answers pkt, parsed into q, for the table entry e into out;
// addrs is the caller's room for a group answer's addresses.
// It reports false when the slow path must answer instead (nothing was
// sent then; a group answer it got is in dec). A nil reply with true
// means the rate limiter dropped it.
func (s *Server) answerFast(ctx context.Context, snap *snapshot, e *fastEntry, q *fastQuery, pkt []byte, client netip.Addr, addrs *[]netip.Addr, out []byte, dec *groupDecision) ([]byte, bool) {
	var optAt int
	signed := q.do && e.signer != nil
	if e.group {
		ga, err := snap.groups.AnswerGroup(ctx, GroupQuery{Group: e.name, Qtype: e.qtype, Client: client, ECS: q.ecs, Addrs: *addrs})
		*dec = groupDecision{name: e.name, qtype: e.qtype, ga: ga, err: err}
		if err != nil {
			return nil, false
		}
		*addrs = ga.Addrs[:0] // keep what grew for the next answer
		var ok bool
		if out, ok = s.appendGroupAnswer(out, e, q, pkt, ga, signed); !ok {
			return nil, false // NODATA (the slow path adds the SOA), or signatures not cached
		}
		optAt = len(out)
		out = s.appendOPT(out, snap, q, q.groupScope(ga))
	} else {
		reply := e.reply
		if signed {
			if reply = s.signedReply(snap, e); reply == nil {
				return nil, false
			}
		}
		out = append(out[:0], reply...)
		out[0], out[1] = pkt[0], pkt[1]
		out[2] |= pkt[2] & 0x01 // RD
		out[3] |= pkt[3] & 0x10 // CD
		optAt = len(out)
		out = s.appendOPT(out, snap, q, -1)
	}
	if len(out) > q.replySize(false, snap.maxUDP) {
		return nil, false // the slow path trims or truncates
	}
	if snap.rrl != nil {
		switch s.rrlAction(snap, client, rrl.Answer, e.name) {
		case rrl.Drop:
			return nil, true
		case rrl.Slip:
			// Header with TC, the question, the OPT record: no records.
			n := copy(out[q.qend:], out[optAt:])
			out = out[:q.qend+n]
			out[2] |= 0x02
			binary.BigEndian.PutUint16(out[6:], 0)
			binary.BigEndian.PutUint16(out[8:], 0)
			binary.BigEndian.PutUint16(out[10:], 0)
			if q.edns {
				binary.BigEndian.PutUint16(out[10:], 1)
			}
		}
	}
	e.queries.Inc()
	return out, true
}

func appendAddrRR(out []byte, qtype uint16, ttl uint32, addr []byte) []byte {
	out = append(out, 0xc0, headerSize, byte(qtype>>8), byte(qtype), 0, byte(dns.ClassINET),
		byte(ttl>>24), byte(ttl>>16), byte(ttl>>8), byte(ttl), 0, byte(len(addr)))
	return append(out, addr...)
}

// appendOPT appends the reply's OPT record for q, as the edge's finish
// builds it: the handler's client subnet option with scope (when scope ≥
// 0), NSID, then a client subnet option with scope 0 if none was set yet.
// It counts it in ARCOUNT. Without EDNS in q it appends nothing.
func (s *Server) appendOPT(out []byte, snap *snapshot, q *fastQuery, scope int) []byte {
	if !q.edns {
		return out
	}
	binary.BigEndian.PutUint16(out[10:], binary.BigEndian.Uint16(out[10:])+1)
	var do byte
	if q.do {
		do = 0x80
	}
	out = append(out, 0, byte(dns.TypeOPT>>8), byte(dns.TypeOPT), byte(snap.maxUDP>>8), byte(snap.maxUDP), 0, 0, do, 0, 0, 0)
	start := len(out)
	if q.hasECS && scope >= 0 {
		out = appendECS(out, q, scope)
	}
	if q.sendsNSID(snap) {
		out = append(out, 0, byte(dns.EDNS0NSID), byte(len(snap.nsid)>>8), byte(len(snap.nsid)))
		out = append(out, snap.nsid...)
	}
	if q.hasECS && scope < 0 {
		out = appendECS(out, q, 0)
	}
	binary.BigEndian.PutUint16(out[start-2:], uint16(len(out)-start))
	return out
}

// appendECS appends the reply's client subnet option (see ecsOption).
func appendECS(out []byte, q *fastQuery, scope int) []byte {
	a := q.ecs.Masked().Addr()
	n := (int(q.ecsSrc) + 7) / 8
	out = append(out, 0, byte(dns.EDNS0SUBNET), 0, byte(4+n), byte(q.ecsFam>>8), byte(q.ecsFam), q.ecsSrc, q.ecsScope(scope))
	if a.Is4() {
		b := a.As4()
		return append(out, b[:n]...)
	}
	b := a.As16()
	return append(out, b[:n]...)
}
