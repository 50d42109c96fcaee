package zones

import (
	"bytes"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// Zone is an immutable authoritative zone: its records indexed by owner
// name, with the empty non-terminals and zone cuts precomputed so that a
// lookup never scans the zone. Names are kept in canonical (lower-case,
// fully qualified) form.
type Zone struct {
	// Origin is the apex, canonical.
	Origin string
	// File is where the zone was read from ("" when built in memory).
	File string
	// SOA is the apex SOA record.
	SOA *dns.SOA

	nodes map[string]*Node
	ents  map[string]struct{} // names with no records but with descendants
	cuts  map[string]struct{} // names below the apex that own NS records
	rrs   []dns.RR            // every record, SOA first, for AXFR
	lines map[dns.RR]int      // zone file line of each record (ParseZone)

	// Keys are the zone's DNSSEC keys (dnssec.keys), nil when unsigned.
	Keys []*SigningKey
}

// Node is the set of RRsets that one owner name holds.
type Node struct {
	// Name is the canonical owner name.
	Name string
	// RRsets maps a type to its records.
	RRsets map[uint16][]dns.RR
}

// NewZone indexes rrs as the zone at origin. It checks nothing beyond what
// indexing needs: records outside the origin are dropped; validation (SOA,
// NS, glue, CNAME rules) is the zone file parser's job.
func NewZone(origin string, rrs []dns.RR) *Zone {
	origin = dns.CanonicalName(origin)
	z := &Zone{
		Origin: origin,
		nodes:  make(map[string]*Node),
		ents:   make(map[string]struct{}),
		cuts:   make(map[string]struct{}),
	}
	seen := make(map[string][]dns.RR)
	for _, rr := range rrs {
		name := dns.CanonicalName(rr.Header().Name)
		if !dns.IsSubDomain(origin, name) {
			continue
		}
		rr.Header().Name = name
		n := z.nodes[name]
		if n == nil {
			n = &Node{Name: name, RRsets: make(map[uint16][]dns.RR)}
			z.nodes[name] = n
		}
		t := rr.Header().Rrtype
		// An RRset is a set (RFC 2181 §5): drop duplicates, found through
		// their lower-cased text so that large RRsets cost no n².
		key := strings.ToLower(strings.TrimPrefix(rr.String(), rr.Header().String()))
		key = name + " " + strconv.Itoa(int(t)) + " " + key
		if slices.ContainsFunc(seen[key], func(o dns.RR) bool { return dns.IsDuplicate(o, rr) }) {
			continue
		}
		seen[key] = append(seen[key], rr)
		n.RRsets[t] = append(n.RRsets[t], rr)
		if soa, ok := rr.(*dns.SOA); ok && name == origin && z.SOA == nil {
			z.SOA = soa
		}
		if t == dns.TypeNS && name != origin {
			z.cuts[name] = struct{}{}
		}
	}
	for name := range z.nodes {
		for p := parent(name); p != "" && dns.IsSubDomain(origin, p); p = parent(p) {
			if _, ok := z.nodes[p]; !ok {
				z.ents[p] = struct{}{}
			}
			if p == origin {
				break
			}
		}
	}
	names := make([]string, 0, len(z.nodes))
	for name := range z.nodes {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return canonicalLess(names[i], names[j]) })
	if z.SOA != nil {
		z.rrs = append(z.rrs, z.SOA)
	}
	for _, name := range names {
		n := z.nodes[name]
		types := make([]int, 0, len(n.RRsets))
		for t := range n.RRsets {
			types = append(types, int(t))
		}
		sort.Ints(types)
		for _, t := range types {
			for _, rr := range n.RRsets[uint16(t)] {
				if rr == dns.RR(z.SOA) {
					continue
				}
				z.rrs = append(z.rrs, rr)
			}
		}
	}
	return z
}

// withRecords returns z with rrs added (the file and lines kept).
func (z *Zone) withRecords(rrs []dns.RR) *Zone {
	nz := NewZone(z.Origin, append(slices.Clone(z.rrs), rrs...))
	nz.File, nz.lines, nz.Keys = z.File, z.lines, z.Keys
	return nz
}

// Node returns the node owning name (any case), or nil.
func (z *Zone) Node(name string) *Node { return z.nodes[dns.CanonicalName(name)] }

// Exists reports whether name exists in the zone: it owns records or is an
// empty non-terminal (RFC 8020: a name with descendants is never NXDOMAIN).
func (z *Zone) Exists(name string) bool {
	name = dns.CanonicalName(name)
	if _, ok := z.nodes[name]; ok {
		return true
	}
	_, ok := z.ents[name]
	return ok
}

// IsCut reports whether name is a delegation point below the apex.
func (z *Zone) IsCut(name string) bool {
	_, ok := z.cuts[dns.CanonicalName(name)]
	return ok
}

// Cut returns the highest zone cut at or above name (below the apex), or
// "" when name is not under a delegation.
func (z *Zone) Cut(name string) string {
	name = dns.CanonicalName(name)
	if len(z.cuts) == 0 || !dns.IsSubDomain(z.Origin, name) || name == z.Origin {
		return ""
	}
	labels := dns.SplitDomainName(name)
	apexLabels := dns.CountLabel(z.Origin)
	// Walk from just below the apex down to name.
	for i := len(labels) - apexLabels - 1; i >= 0; i-- {
		cand := dns.Fqdn(strings.Join(labels[i:], "."))
		if _, ok := z.cuts[cand]; ok {
			return cand
		}
	}
	return ""
}

// RRset returns the records of type t at name (any case), or nil.
func (z *Zone) RRset(name string, t uint16) []dns.RR {
	n := z.nodes[dns.CanonicalName(name)]
	if n == nil {
		return nil
	}
	return n.RRsets[t]
}

// Wildcard returns the wildcard node that synthesizes name (RFC 4592
// §3.3.1: the source of synthesis is "*." + the closest encloser), or
// nil. name is canonical and does not exist in the zone.
func (z *Zone) Wildcard(name string) *Node {
	ce := name
	for {
		i, end := dns.NextLabel(ce, 0)
		if end {
			return nil
		}
		ce = ce[i:]
		if !dns.IsSubDomain(z.Origin, ce) {
			return nil
		}
		if z.Exists(ce) {
			return z.Node("*." + ce)
		}
	}
}

// Records returns every record of the zone, SOA first, in canonical order;
// the caller must not modify them. AXFR sends these and the SOA again.
func (z *Zone) Records() []dns.RR { return z.rrs }

// Names returns the number of owner names in the zone.
func (z *Zone) Names() int { return len(z.nodes) }

// line returns the zone file line rr was read from, or 0.
func (z *Zone) line(rr dns.RR) int { return z.lines[rr] }

func parent(name string) string {
	if name == "." || name == "" {
		return ""
	}
	i, end := dns.NextLabel(name, 0)
	if end {
		return "."
	}
	return name[i:]
}

// canonicalLess orders names per RFC 4034 §6.1 (by labels, right to left,
// each label compared as lower-cased octets with escapes decoded).
func canonicalLess(a, b string) bool {
	la, lb := dns.SplitDomainName(a), dns.SplitDomainName(b)
	for i, j := len(la)-1, len(lb)-1; i >= 0 && j >= 0; i, j = i-1, j-1 {
		if c := bytes.Compare(labelOctets(la[i]), labelOctets(lb[j])); c != 0 {
			return c < 0
		}
	}
	return len(la) < len(lb)
}

// labelOctets returns the lower-cased octets of a presentation-format
// label: \DDD and \X escapes decoded.
func labelOctets(l string) []byte {
	b := make([]byte, 0, len(l))
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c == '\\' && i+1 < len(l) {
			if i+3 < len(l) && isDigit(l[i+1]) && isDigit(l[i+2]) && isDigit(l[i+3]) {
				n := int(l[i+1]-'0')*100 + int(l[i+2]-'0')*10 + int(l[i+3]-'0')
				c, i = byte(n), i+3
			} else {
				c, i = l[i+1], i+1
			}
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
