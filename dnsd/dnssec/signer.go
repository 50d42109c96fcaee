// Package dnssec signs a zone's answers online: RRSIGs for the RRsets an
// answer carries (made once per exact RRset and kept, bounded, until they
// are due for refresh) and compact denial of existence (RFC 9824) for
// negative answers, so that no NSEC chain exists and nothing can be
// walked. It signs what it is given; which RRsets an answer holds is the
// caller's.
package dnssec

import (
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/zones"
)

// The signatures' timing: valid from an hour back (clock skew between the
// signer and validators) for a week, made again once a day has passed,
// so that a cached answer's signature always has six days left, many
// times any TTL the zone gives.
const (
	backdate = time.Hour
	validity = 7 * 24 * time.Hour
	refresh  = 24 * time.Hour
)

// DefaultCacheSize bounds the signature cache of a zone: RRsets beyond it
// are signed again when they come back.
const DefaultCacheSize = 1 << 16

// Metrics are the signer's counters; nil ones are not counted.
type Metrics struct {
	Signed prometheus.Counter // RRSIGs made
	Hits   prometheus.Counter // RRsets answered from the cache
}

// Signer signs the RRsets of one zone with the keys active when it was
// made. It is safe for concurrent use.
type Signer struct {
	zone       string
	ksks, zsks []*zones.SigningKey
	now        func() time.Time
	m          Metrics
	max        int

	mu       sync.Mutex
	cur, old map[string]*entry // two generations: a bounded cache without a list
}

// entry is the signatures of one RRset.
type entry struct {
	sigs    []dns.RR
	rdata   [][]byte // each RRSIG's RDATA, as the fast path writes it
	renewAt time.Time
	expires uint32
}

// New returns the signer of the zone origin with the keys of keys that
// are active at now(); nil when none is. A zone whose keys all are KSKs
// or all ZSKs signs every RRset with all of them (CSKs).
func New(origin string, keys []*zones.SigningKey, now func() time.Time, m Metrics, cacheSize int) *Signer {
	s := &Signer{zone: dns.CanonicalName(origin), now: now, m: m, max: cacheSize}
	t := now()
	for _, k := range keys {
		switch {
		case !k.Active(t):
		case k.KSK():
			s.ksks = append(s.ksks, k)
		default:
			s.zsks = append(s.zsks, k)
		}
	}
	switch {
	case len(s.ksks) == 0 && len(s.zsks) == 0:
		return nil
	case len(s.ksks) == 0:
		s.ksks = s.zsks
	case len(s.zsks) == 0:
		s.zsks = s.ksks
	}
	if s.max <= 0 {
		s.max = DefaultCacheSize
	}
	s.cur, s.old = make(map[string]*entry), make(map[string]*entry)
	return s
}

// Zone is the signed zone's origin.
func (s *Signer) Zone() string { return s.zone }

// Sign returns the RRSIGs of rrset (one owner, type and class) with the
// original TTL orig, from the cache when they were made for the same
// records and are not due. The RRSIGs' own TTL is orig: an answer whose
// RRset has a lower TTL (an adaptive group TTL) gives them that one
// (validators take the lower of the two). The returned records are
// shared: copy one before changing it.
func (s *Signer) Sign(rrset []dns.RR, orig uint32) ([]dns.RR, error) {
	key := cacheKey(rrset, orig)
	now := s.now()
	s.mu.Lock()
	e := s.cur[key]
	if e == nil {
		if e = s.old[key]; e != nil {
			s.put(key, e)
		}
	}
	s.mu.Unlock()
	if e != nil && now.Before(e.renewAt) {
		inc(s.m.Hits)
		return e.sigs, nil
	}
	e, err := s.sign(rrset, orig, now)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.put(key, e)
	s.mu.Unlock()
	return e.sigs, nil
}

// put stores e under key, starting a new generation when the current one
// is full (s.mu held).
func (s *Signer) put(key string, e *entry) {
	if len(s.cur) >= s.max/2 {
		s.old, s.cur = s.cur, make(map[string]*entry, len(s.cur))
	}
	s.cur[key] = e
}

// sign makes rrset's RRSIGs, one per key that signs its type.
func (s *Signer) sign(rrset []dns.RR, orig uint32, now time.Time) (*entry, error) {
	keys := s.zsks
	switch rrset[0].Header().Rrtype {
	case dns.TypeDNSKEY, dns.TypeCDS, dns.TypeCDNSKEY: // RFC 7344 §4.1: by a key the DS set names
		keys = s.ksks
	}
	e := &entry{renewAt: now.Add(refresh), expires: uint32(now.Add(validity).Unix())}
	for _, k := range keys {
		sig := &dns.RRSIG{
			Hdr:        dns.RR_Header{Ttl: orig},
			OrigTtl:    orig,
			Algorithm:  k.DNSKEY.Algorithm,
			KeyTag:     k.DNSKEY.KeyTag(),
			SignerName: s.zone,
			Inception:  uint32(now.Add(-backdate).Unix()),
			Expiration: e.expires,
		}
		if err := sig.Sign(k.Signer, rrset); err != nil {
			return nil, err
		}
		inc(s.m.Signed)
		e.sigs = append(e.sigs, sig)
		if rd := rdata(sig); rd != nil {
			e.rdata = append(e.rdata, rd)
		}
	}
	return e, nil
}

// rdata is sig's RDATA in wire form (the signer's name uncompressed, as
// RFC 4034 §3.1.7 has it and miekg/dns packs it).
func rdata(sig *dns.RRSIG) []byte {
	b := make([]byte, dns.Len(sig)+len(sig.Hdr.Name)+2)
	n, err := dns.PackRR(sig, b, 0, nil, false)
	if err != nil {
		return nil
	}
	off, err := dns.PackDomainName(sig.Hdr.Name, make([]byte, 256), 0, nil, false)
	if err != nil || off+10 > n {
		return nil
	}
	return b[off+10 : n]
}

// Cached returns the RDATA of the cached RRSIGs of the RRset whose cache
// key (AppendKey) is key, nil when there are none not yet due at now. It
// allocates nothing: the UDP fast path writes them from these bytes.
func (s *Signer) Cached(key []byte, now time.Time) [][]byte {
	s.mu.Lock()
	e := s.cur[string(key)]
	if e == nil {
		e = s.old[string(key)]
	}
	s.mu.Unlock()
	if e == nil || !now.Before(e.renewAt) || len(e.rdata) != len(e.sigs) {
		return nil
	}
	inc(s.m.Hits)
	return e.rdata
}

// NearestExpiry is when the first signature in the cache runs out (zero
// when the cache is empty).
func (s *Signer) NearestExpiry() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first uint32
	for _, m := range []map[string]*entry{s.cur, s.old} {
		for _, e := range m {
			if first == 0 || e.expires < first {
				first = e.expires
			}
		}
	}
	if first == 0 {
		return time.Time{}
	}
	return time.Unix(int64(first), 0)
}

// cacheKey is the RRset in wire form without its TTL, its records
// sorted, and the original TTL: the same records in any order, owner
// case or TTL give the same key.
func cacheKey(rrset []dns.RR, orig uint32) string {
	var b [512]byte
	wires := make([]string, 0, len(rrset))
	for _, rr := range rrset {
		n, err := dns.PackRR(rr, b[:], 0, nil, false) // the records are shared: packed, not changed
		if err != nil {
			wires = append(wires, rr.String()) // larger than b: its text
			continue
		}
		wires = append(wires, string(canonicalWire(b[:n])))
	}
	slices.Sort(wires)
	key := AppendKeyHeader(nil, orig)
	for _, w := range wires {
		key = AppendKeyRecord(key, w)
	}
	return string(key)
}

// AppendKeyHeader and AppendKeyRecord build the cache key of an RRset
// with the original TTL orig from its records' canonical wire forms
// (owner in lower case, TTL zero, uncompressed), appended in their
// sorted order, as Sign keys its cache.
func AppendKeyHeader(dst []byte, orig uint32) []byte {
	return binary.BigEndian.AppendUint32(dst, orig)
}

// AppendKeyRecord appends the next record's wire form w (see
// AppendKeyHeader).
func AppendKeyRecord[W []byte | string](dst []byte, w W) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(w)))
	return append(dst, w...)
}

// canonicalWire lower-cases the owner name of the packed record w and
// clears its TTL, in place.
func canonicalWire(w []byte) []byte {
	off := 0
	for off < len(w) && w[off] != 0 {
		end := off + 1 + int(w[off])
		for i := off + 1; i < end && i < len(w); i++ {
			if 'A' <= w[i] && w[i] <= 'Z' {
				w[i] += 'a' - 'A'
			}
		}
		off = end
	}
	if ttl := off + 5; ttl+4 <= len(w) {
		clear(w[ttl : ttl+4])
	}
	return w
}

func inc(c prometheus.Counter) {
	if c != nil {
		c.Inc()
	}
}
