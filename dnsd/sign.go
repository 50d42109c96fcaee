package dnsd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd/dnssec"
	"github.com/transmirror/transmirror/zones"
)

// signing signs the answers to queries with the DO bit in zones that have
// keys, in the place CoreDNS gives its dnssec plugin: it wraps the writer
// of the handlers below it, and an answer is signed as it is written.
// Without DO, or in a zone without keys, it is not in the way.
type signing struct {
	set     *zones.Set
	signers map[*zones.Zone]*dnssec.Signer
	negSOA  map[*zones.Zone]*dns.SOA
	next    Handler
}

var _ Handler = (*signing)(nil)

func (h *signing) Name() string { return "dnssec" }

func (h *signing) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q := r.Question[0]
	info := infoFrom(ctx, w)
	if !info.do || q.Qclass != dns.ClassINET {
		return h.next.ServeDNS(ctx, w, r)
	}
	z := h.set.Find(q.Name)
	sg := h.signers[z]
	if sg == nil {
		return h.next.ServeDNS(ctx, w, r)
	}
	info.compact = true
	return h.next.ServeDNS(ctx, &signingWriter{ResponseWriter: w, h: h, z: z, sg: sg, q: q, co: info.co}, r)
}

// signingWriter signs the message written to it.
type signingWriter struct {
	dns.ResponseWriter
	h  *signing
	z  *zones.Zone
	sg *dnssec.Signer
	q  dns.Question
	co bool // the query said Compact Answers OK: NXDOMAIN stays NXDOMAIN
}

func (w *signingWriter) WriteMsg(m *dns.Msg) error {
	if err := w.sign(m); err != nil {
		return fmt.Errorf("dnsd: sign %s: %w", w.q.Name, err)
	}
	return w.ResponseWriter.WriteMsg(m)
}

// sign adds to m the denial of existence it needs (compact: one NSEC
// for the name alone), the DS or the proof that there is none of a
// referral, and the RRSIGs of every authoritative RRset.
func (w *signingWriter) sign(m *dns.Msg) error {
	switch {
	case m.Rcode == dns.RcodeNameError:
		if !w.co {
			m.Rcode = dns.RcodeSuccess // RFC 9824: NXDOMAIN is NODATA with NXNAME
		}
		m.Ns = append(m.Ns, w.nsec(w.finalName(m), []uint16{dns.TypeNXNAME}))
	case m.Rcode == dns.RcodeSuccess && m.Authoritative && negative(m):
		name := w.finalName(m)
		m.Ns = append(m.Ns, w.nsec(name, w.typesAt(name)))
	case !m.Authoritative && len(m.Ns) > 0 && m.Ns[0].Header().Rrtype == dns.TypeNS:
		cut := m.Ns[0].Header().Name
		if ds := w.z.RRset(cut, dns.TypeDS); len(ds) > 0 {
			m.Ns = append(m.Ns, ds...)
		} else {
			m.Ns = append(m.Ns, w.nsec(cut, w.typesAt(cut)))
		}
	}
	var err error
	if m.Answer, err = w.signSection(m.Answer); err != nil {
		return err
	}
	if m.Ns, err = w.signSection(m.Ns); err != nil {
		return err
	}
	m.Extra, err = w.signSection(m.Extra)
	return err
}

// negative reports whether the authority section of m holds the SOA of
// a negative answer.
func negative(m *dns.Msg) bool {
	return slices.ContainsFunc(m.Ns, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeSOA })
}

// finalName is the name m's answer ends at: the question's, or the last
// CNAME target its answer section leads to.
func (w *signingWriter) finalName(m *dns.Msg) string {
	name := dns.CanonicalName(w.q.Name)
	for changed := true; changed; {
		changed = false
		for _, rr := range m.Answer {
			if cn, ok := rr.(*dns.CNAME); ok && dns.CanonicalName(cn.Hdr.Name) == name {
				name, changed = dns.CanonicalName(cn.Target), true
				break
			}
		}
	}
	return name
}

// typesAt is the bitmap of a NODATA NSEC at name: the types the name
// holds (a group name's addresses among them), without the question's.
func (w *signingWriter) typesAt(name string) []uint16 {
	var types []uint16
	node := w.z.Node(name)
	if node == nil && !w.z.Exists(name) && w.h.set.Group(name) == nil {
		node = w.z.Wildcard(name)
	}
	if node != nil {
		for t, rrs := range node.RRsets {
			if len(rrs) > 0 {
				types = append(types, t)
			}
		}
	}
	if w.h.set.Group(name) != nil {
		types = append(types, dns.TypeA, dns.TypeAAAA)
	}
	return slices.DeleteFunc(types, func(t uint16) bool { return t == w.q.Qtype })
}

// nsec is the compact NSEC of name (RFC 9824): its next name is name's
// immediate successor, so it covers nothing but name itself. It carries
// types besides RRSIG and NSEC.
func (w *signingWriter) nsec(name string, types []uint16) dns.RR {
	ttl := uint32(zones.DefaultZoneTTL)
	if soa := w.h.negSOA[w.z]; soa != nil {
		ttl = soa.Hdr.Ttl
	}
	bitmap := append([]uint16{dns.TypeRRSIG, dns.TypeNSEC}, types...)
	slices.Sort(bitmap)
	return &dns.NSEC{
		Hdr:        dns.RR_Header{Name: name, Rrtype: dns.TypeNSEC, Class: dns.ClassINET, Ttl: ttl},
		NextDomain: `\000.` + name,
		TypeBitMap: slices.Compact(bitmap),
	}
}

// signSection returns rrs with the RRSIGs of its RRsets after each:
// every RRset of the zone's own data; the NS RRset of a delegation and
// the glue below it are not (they are the child's), nor an RRset of a
// name outside the zone.
func (w *signingWriter) signSection(rrs []dns.RR) ([]dns.RR, error) {
	if len(rrs) == 0 {
		return rrs, nil
	}
	out := make([]dns.RR, 0, 2*len(rrs))
	for len(rrs) > 0 {
		n := rrsetLen(rrs)
		set := rrs[:n]
		rrs = rrs[n:]
		out = append(out, set...)
		if !w.signs(set[0].Header()) {
			continue
		}
		sigs, err := w.sg.Sign(set, w.origTTL(set[0].Header()))
		if err != nil {
			return nil, err
		}
		out = appendSigs(out, sigs, set[0].Header().Ttl)
	}
	return out, nil
}

// rrsetLen is the length of the RRset rrs starts with (same owner, type
// and class, next to each other as the handlers write them).
func rrsetLen(rrs []dns.RR) int {
	h := rrs[0].Header()
	n := 1
	for n < len(rrs) {
		o := rrs[n].Header()
		if o.Rrtype != h.Rrtype || o.Class != h.Class || !strings.EqualFold(o.Name, h.Name) {
			break
		}
		n++
	}
	return n
}

// signs reports whether the RRset with header h is signed.
func (w *signingWriter) signs(h *dns.RR_Header) bool {
	switch h.Rrtype {
	case dns.TypeRRSIG, dns.TypeOPT, dns.TypeTSIG:
		return false
	}
	name := dns.CanonicalName(h.Name)
	if !dns.IsSubDomain(w.z.Origin, name) {
		return false
	}
	if cut := w.z.Cut(name); cut != "" {
		// At a cut only the parent's DS and NSEC are authoritative, below
		// it nothing (glue).
		return name == cut && (h.Rrtype == dns.TypeDS || h.Rrtype == dns.TypeNSEC)
	}
	return true
}

// origTTL is the original TTL to sign an RRset with: a group answer's
// is the group's ttl.max (its TTL adapts below that), others' their own.
func (w *signingWriter) origTTL(h *dns.RR_Header) uint32 {
	if h.Rrtype == dns.TypeA || h.Rrtype == dns.TypeAAAA {
		if g := w.h.set.Group(h.Name); g != nil {
			return max(g.TTL.Max, h.Ttl)
		}
	}
	return h.Ttl
}

// appendSigs appends sigs with the TTL of the RRset they sign.
func appendSigs(out, sigs []dns.RR, ttl uint32) []dns.RR {
	for _, sig := range sigs {
		if sig.Header().Ttl != ttl {
			sig = dns.Copy(sig)
			sig.Header().Ttl = ttl
		}
		out = append(out, sig)
	}
	return out
}
