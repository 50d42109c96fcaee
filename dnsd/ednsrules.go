package dnsd

import (
	"net/netip"

	"github.com/miekg/dns"
)

// The rules of EDNS and of group answers that the fast path (fast.go,
// from the packet's bytes) and the slow path (the edge and auth, from a
// dns.Msg) both apply. Each path reads and writes its own representation;
// what a query means and what its reply must say is decided here, once.

// ednsVersion is the EDNS version served; a query of another one gets
// BADVERS (RFC 6891 §6.1.3).
const ednsVersion = 0

// ednsQuery is what a query's OPT record asks of the reply.
type ednsQuery struct {
	edns    bool // the query has an OPT record
	do      bool
	co      bool // Compact Answers OK (RFC 9824 §5): NXDOMAIN kept in compact denial
	udpSize int  // the client's UDP payload size
	nsid    bool
	hasECS  bool         // a client subnet option the server uses
	ecs     netip.Prefix // its source prefix, masked
	ecsFam  uint16
	ecsSrc  uint8
}

// setECS takes a query's client subnet option of family, source prefix
// length, scope and address a (the option's address bytes, zero padded).
// It reports false, and keeps nothing, for an option the server ignores:
// a scope other than 0 (RFC 7871 §7.1.2), an unknown family, an address
// of the other family or a source longer than the address.
func (e *ednsQuery) setECS(family uint16, source, scope uint8, a netip.Addr) bool {
	if scope != 0 || !(family == 1 && a.Is4() || family == 2 && a.Is6()) {
		return false
	}
	p, err := a.Prefix(int(source))
	if err != nil {
		return false
	}
	e.hasECS, e.ecs, e.ecsFam, e.ecsSrc = true, p, family, source
	return true
}

// ecsScope is the scope of the reply's client subnet option for an answer
// that depended on the first scope bits of the client's address, within
// the address's length (RFC 7871 §7.2.1).
func (e *ednsQuery) ecsScope(scope int) uint8 {
	return uint8(max(0, min(scope, e.ecs.Addr().BitLen())))
}

// replySize is the largest reply the client takes: 64 KiB over TCP, over
// UDP its EDNS payload size within [512, maxUDP], 512 without EDNS.
func (e *ednsQuery) replySize(tcp bool, maxUDP int) int {
	switch {
	case tcp:
		return dns.MaxMsgSize
	case e.edns:
		return max(dns.MinMsgSize, min(e.udpSize, maxUDP))
	}
	return dns.MinMsgSize
}

// sendsNSID reports whether the reply carries the server's NSID: asked
// for, and configured.
func (e *ednsQuery) sendsNSID(snap *snapshot) bool {
	return e.nsid && snap != nil && len(snap.nsid) > 0
}

// groupScope is the client subnet scope a group answer sets in the reply:
// the prefix it depended on, or -1 for none (no option in the query, or
// the answerer said nothing).
func (e *ednsQuery) groupScope(ga GroupAnswer) int {
	if e.hasECS && ga.ScopePrefix >= 0 {
		return ga.ScopePrefix
	}
	return -1
}

// groupRdata is the RDATA of a group answer's address a in a reply of
// qtype, in b: the 4 bytes of an IPv4 address (IPv4-mapped ones included)
// for A, the 16 of an IPv6 address for AAAA; nil when a is of the other
// family (it is left out).
func groupRdata(qtype uint16, a netip.Addr, b *[16]byte) []byte {
	a = a.Unmap()
	switch {
	case qtype == dns.TypeA && a.Is4():
		v := a.As4()
		copy(b[:], v[:])
		return b[:4]
	case qtype == dns.TypeAAAA && a.Is6():
		*b = a.As16()
		return b[:]
	}
	return nil
}
