package dnsd

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd/dnssec"
)

// The fast path of a signed zone, for queries with DO: a static answer's
// signed reply is made once (by the chain, signatures from the signer's
// cache) and written from its bytes like the unsigned one, made again
// each hour so that its signatures stay within a day of the signer's; a
// group answer's RRSIGs are the signer's cached ones for exactly that set
// of addresses, written from their bytes. A set of addresses that is not
// in the cache yet goes to the slow path, with the group's answer handed
// on: it signs it, and the cache has it from then on.

// signedReplyLife is how long a static signed reply is written before it
// is made again.
const signedReplyLife = time.Hour

// signedReply is a static answer's reply with its signatures.
type signedReply struct {
	b     []byte
	until time.Time
}

// signedReply returns e's signed reply, made now when there is none or
// it is an hour old; nil when the chain gives none the fast path can
// write.
func (s *Server) signedReply(snap *snapshot, e *fastEntry) []byte {
	now := s.now()
	if r := e.doReply.Load(); r != nil && now.Before(r.until) {
		return r.b
	}
	b := s.precompute(snap, e.name, e.qtype, true)
	if b == nil {
		return nil
	}
	e.doReply.Store(&signedReply{b: b, until: now.Add(signedReplyLife)})
	return b
}

// coversType reports whether rr is an RRSIG over type t.
func coversType(rr dns.RR, t uint16) bool {
	sig, ok := rr.(*dns.RRSIG)
	return ok && sig.TypeCovered == t
}

// appendGroupAnswer appends to out the header, question and answer
// records of the group answer ga for pkt, with (signed) the RRSIGs of
// its address RRset from the signer's cache. It reports false for an
// empty answer (NODATA) and for signatures not cached.
func (s *Server) appendGroupAnswer(out []byte, e *fastEntry, q *fastQuery, pkt []byte, ga GroupAnswer, signed bool) ([]byte, bool) {
	out = out[:0]
	out = append(out, pkt[0], pkt[1], 0x84|pkt[2]&0x01, pkt[3]&0x10, 0, 1, 0, 0, 0, 0, 0, 0)
	out = append(out, pkt[headerSize:q.qend]...)
	an := 0
	var b [16]byte
	for _, a := range ga.Addrs {
		if rd := groupRdata(e.qtype, a, &b); rd != nil {
			out = appendAddrRR(out, e.qtype, ga.TTL, rd)
			an++
		}
	}
	if an == 0 {
		return out, false
	}
	if signed {
		var kb [1024]byte
		sigs := e.signer.Cached(appendGroupSigKey(kb[:0], pkt[headerSize:q.keyEnd-2], e, ga), s.now())
		if sigs == nil {
			return out, false
		}
		for _, rd := range sigs {
			out = append(out, 0xc0, headerSize, byte(dns.TypeRRSIG>>8), byte(dns.TypeRRSIG), 0, byte(dns.ClassINET),
				byte(ga.TTL>>24), byte(ga.TTL>>16), byte(ga.TTL>>8), byte(ga.TTL), byte(len(rd)>>8), byte(len(rd)))
			out = append(out, rd...)
		}
		an += len(sigs)
	}
	binary.BigEndian.PutUint16(out[6:], uint16(an))
	return out, true
}

// maxFastSigned bounds the addresses of a group answer whose signatures
// the fast path looks up (more go to the slow path).
const maxFastSigned = 32

// appendGroupSigKey appends to dst the signer's cache key of the address
// RRset of ga at the owner owner (wire form, lower case): the records in
// canonical wire form sorted, as the slow path's signing keys it. Nil
// when ga has more addresses than maxFastSigned.
func appendGroupSigKey(dst, owner []byte, e *fastEntry, ga GroupAnswer) []byte {
	var sorted [maxFastSigned]netip.Addr
	n := 0
	var b [16]byte
	for _, a := range ga.Addrs {
		if groupRdata(e.qtype, a, &b) == nil {
			continue
		}
		if n == len(sorted) {
			return nil
		}
		sorted[n] = a.Unmap()
		n++
	}
	slices.SortFunc(sorted[:n], netip.Addr.Compare)
	key := dnssec.AppendKeyHeader(dst, max(e.origTTL, ga.TTL))
	var rec [255 + 10 + 16]byte
	for _, a := range sorted[:n] {
		rd := groupRdata(e.qtype, a, &b)
		w := append(rec[:0], owner...)
		w = append(w, byte(e.qtype>>8), byte(e.qtype), 0, byte(dns.ClassINET), 0, 0, 0, 0, 0, byte(len(rd)))
		w = append(w, rd...)
		key = dnssec.AppendKeyRecord(key, w)
	}
	return key
}
