package dnsd

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/transmirror/transmirror/zones"
)

// The test keys, written by BIND's dnssec-keygen (KSK, ZSK) and
// ldns-keygen (ED25519 ZSK).
const (
	testKSK     = "Kexample.org.+013+45830"
	testZSK     = "Kexample.org.+013+54815"
	testEd25519 = "Kexample.org.+015+31855"
)

// signedSet is testSet with example.org signed by the keys named.
func signedSet(t testing.TB, keys ...string) *zones.Set {
	t.Helper()
	set := testSet(t, nil)
	var ks []*zones.SigningKey
	text := testZone + bigZoneText()
	for _, name := range keys {
		k, _, err := zones.ReadKey("example.org.", filepath.Join("testdata", "keys", name))
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
		text += k.DNSKEY.String() + "\n"
		if k.KSK() {
			text += k.DNSKEY.ToDS(dns.SHA256).ToCDS().String() + "\n"
		}
	}
	z := parseZone(t, "example.org.", text)
	z.Keys = ks
	set.Zones = []*zones.Zone{z}
	return set
}

// newSigned is a server of signedSet(keys) at the fixed clock now.
func newSigned(t testing.TB, now time.Time, keys ...string) (*Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	s, err := New(Options{Registry: reg, now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(signedSet(t, keys...)); err != nil {
		t.Fatal(err)
	}
	return s, reg
}

func doQuery(name string, qtype uint16) []byte {
	return query(name, qtype, withEDNS(1232, true))
}

// signatures describes every RRset of m's sections as "SECTION OWNER
// TYPE: TAGS", TAGS the key tags of the RRSIGs that verify it at now ("-"
// for none); it fails the test on an RRSIG that does not verify.
func signatures(t *testing.T, m *dns.Msg, keys []*dns.DNSKEY, now time.Time) []string {
	t.Helper()
	var out []string
	for _, sec := range []struct {
		name string
		rrs  []dns.RR
	}{{"an", m.Answer}, {"ns", m.Ns}, {"ad", m.Extra}} {
		var sigs []*dns.RRSIG
		var sets [][]dns.RR
		for rrs := sec.rrs; len(rrs) > 0; {
			n := rrsetLen(rrs)
			if _, ok := rrs[0].(*dns.RRSIG); ok {
				for _, r := range rrs[:n] {
					sigs = append(sigs, r.(*dns.RRSIG))
				}
			} else if rrs[0].Header().Rrtype != dns.TypeOPT {
				sets = append(sets, rrs[:n])
			}
			rrs = rrs[n:]
		}
		for _, set := range sets {
			h := set[0].Header()
			var tags []string
			for _, sig := range sigs {
				if sig.TypeCovered != h.Rrtype || !strings.EqualFold(sig.Hdr.Name, h.Name) {
					continue
				}
				i := slices.IndexFunc(keys, func(k *dns.DNSKEY) bool { return k.KeyTag() == sig.KeyTag })
				if i < 0 {
					t.Fatalf("%s %s: RRSIG by unknown key %d", h.Name, dns.TypeToString[h.Rrtype], sig.KeyTag)
				}
				if err := sig.Verify(keys[i], set); err != nil || !sig.ValidityPeriod(now) {
					t.Fatalf("%s %s: RRSIG by %d does not verify at %v: %v\n%v", h.Name, dns.TypeToString[h.Rrtype], sig.KeyTag, now, err, m)
				}
				if sig.Hdr.Ttl != h.Ttl || sig.OrigTtl < h.Ttl {
					t.Errorf("%s %s: RRSIG TTL %d, original %d; the RRset's %d", h.Name, dns.TypeToString[h.Rrtype], sig.Hdr.Ttl, sig.OrigTtl, h.Ttl)
				}
				tags = append(tags, fmt.Sprint(sig.KeyTag))
			}
			if len(tags) == 0 {
				tags = []string{"-"}
			}
			out = append(out, fmt.Sprintf("%s %s %s: %s", sec.name, h.Name, dns.TypeToString[h.Rrtype], strings.Join(tags, ",")))
		}
	}
	return out
}

// TestSignedAnswers: with the DO bit every authoritative RRset of every
// kind of answer is signed (the DNSKEY RRset by the KSK, the rest by the
// ZSK), negative answers carry one compact NSEC, and what is the child's
// (a delegation's NS, glue) is not signed.
func TestSignedAnswers(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, _ := newSigned(t, now, testKSK, testZSK)
	keys := s.snap.Load().set.Zones[0].RRset("example.org.", dns.TypeDNSKEY)
	var dnskeys []*dns.DNSKEY
	for _, rr := range keys {
		dnskeys = append(dnskeys, rr.(*dns.DNSKEY))
	}
	const ksk, zsk = "45830", "54815"
	tests := []struct {
		name  string
		pkt   []byte
		rcode int
		want  []string
		nsec  string // the NSEC's next name and bitmap, "" for none
	}{
		{"static A", doQuery("static.example.org.", dns.TypeA), 0, []string{"an static.example.org. A: " + zsk}, ""},
		{"DNSKEY", doQuery("example.org.", dns.TypeDNSKEY), 0, []string{"an example.org. DNSKEY: " + ksk}, ""},
		{"CDS", doQuery("example.org.", dns.TypeCDS), 0, []string{"an example.org. CDS: " + ksk}, ""},
		{"apex NS with glue", doQuery("example.org.", dns.TypeNS), 0, []string{
			"an example.org. NS: " + zsk, "ad ns1.example.org. A: " + zsk, "ad ns2.example.org. AAAA: " + zsk}, ""},
		{"group A", doQuery("www.example.org.", dns.TypeA), 0, []string{"an www.example.org. A: " + zsk}, ""},
		{"CNAME chain", doQuery("chain1.example.org.", dns.TypeA), 0, []string{
			"an chain1.example.org. CNAME: " + zsk, "an chain2.example.org. CNAME: " + zsk,
			"an alias.example.org. CNAME: " + zsk, "an static.example.org. A: " + zsk}, ""},
		{"wildcard", doQuery("x.wild.example.org.", dns.TypeA), 0, []string{"an x.wild.example.org. A: " + zsk}, ""},
		{"NXDOMAIN", doQuery("nothere.example.org.", dns.TypeA), 0, []string{
			"ns example.org. SOA: " + zsk, "ns nothere.example.org. NSEC: " + zsk}, `\000.nothere.example.org. RRSIG NSEC NXNAME`},
		{"NXDOMAIN after a CNAME", doQuery("dangling.example.org.", dns.TypeA), 0, []string{
			"an dangling.example.org. CNAME: " + zsk, "ns example.org. SOA: " + zsk, "ns nothere.example.org. NSEC: " + zsk},
			`\000.nothere.example.org. RRSIG NSEC NXNAME`},
		{"NODATA", doQuery("static.example.org.", dns.TypeAAAA), 0, []string{
			"ns example.org. SOA: " + zsk, "ns static.example.org. NSEC: " + zsk}, `\000.static.example.org. A TXT RRSIG NSEC`},
		{"group NODATA", doQuery("v4only.example.org.", dns.TypeAAAA), 0, []string{
			"ns example.org. SOA: " + zsk, "ns v4only.example.org. NSEC: " + zsk}, `\000.v4only.example.org. A RRSIG NSEC`},
		{"empty non-terminal", doQuery("b.c.example.org.", dns.TypeA), 0, []string{
			"ns example.org. SOA: " + zsk, "ns b.c.example.org. NSEC: " + zsk}, `\000.b.c.example.org. RRSIG NSEC`},
		{"wildcard NODATA", doQuery("x.wild.example.org.", dns.TypeMX), 0, []string{
			"ns example.org. SOA: " + zsk, "ns x.wild.example.org. NSEC: " + zsk}, `\000.x.wild.example.org. A TXT RRSIG NSEC`},
		{"referral without DS", doQuery("host.sub.example.org.", dns.TypeA), 0, []string{
			"ns sub.example.org. NS: -", "ns sub.example.org. NSEC: " + zsk, "ad ns.sub.example.org. A: -"}, `\000.sub.example.org. NS RRSIG NSEC`},
		{"referral with DS", doQuery("host.sec.example.org.", dns.TypeA), 0, []string{
			"ns sec.example.org. NS: -", "ns sec.example.org. DS: " + zsk, "ad ns1.example.org. A: " + zsk}, ""},
		{"DS at the cut", doQuery("sec.example.org.", dns.TypeDS), 0, []string{"an sec.example.org. DS: " + zsk}, ""},
		{"no DS at the cut", doQuery("sub.example.org.", dns.TypeDS), 0, []string{
			"ns example.org. SOA: " + zsk, "ns sub.example.org. NSEC: " + zsk}, `\000.sub.example.org. NS RRSIG NSEC`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := unpacked(s.servePacket(context.Background(), tt.pkt, fastLocal, fastRemote, new([]netip.Addr), nil))
			if m == nil {
				t.Fatal("no reply")
			}
			if m.Rcode != tt.rcode || m.Truncated {
				t.Fatalf("rcode %s TC %v\n%v", dns.RcodeToString[m.Rcode], m.Truncated, m)
			}
			if opt := m.IsEdns0(); opt == nil || !opt.Do() {
				t.Error("the reply's OPT has no DO bit")
			}
			if got := signatures(t, m, dnskeys, now); !slices.Equal(got, tt.want) {
				t.Errorf("RRsets and their signatures:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			var nsec string
			for _, rr := range m.Ns {
				if n, ok := rr.(*dns.NSEC); ok {
					nsec = n.NextDomain
					for _, ty := range n.TypeBitMap {
						nsec += " " + dns.TypeToString[ty]
					}
				}
			}
			if nsec != tt.nsec {
				t.Errorf("NSEC %q, want %q", nsec, tt.nsec)
			}
		})
	}
}

// TestCompactAnswersOK: a query with the CO flag (RFC 9824 §5) and DO
// to a signed zone gets its NXDOMAIN back with the compact denial, and
// CO in the reply's OPT, as every answer of the signed zone to it;
// without DO, or from an unsigned zone, CO changes nothing and the reply
// does not say CO.
func TestCompactAnswersOK(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	signed, _ := newSigned(t, now, testKSK, testZSK)
	plain, _ := newSigned(t, now)
	co := func(m *dns.Msg) { m.IsEdns0().SetCo() }
	tests := []struct {
		name   string
		s      *Server
		pkt    []byte
		rcode  int
		co     bool
		nxname bool // the authority holds the NSEC with NXNAME
	}{
		{"NXDOMAIN, DO and CO", signed, query("nothere.example.org.", dns.TypeA, withEDNS(1232, true), co), dns.RcodeNameError, true, true},
		{"NXDOMAIN, DO alone", signed, doQuery("nothere.example.org.", dns.TypeA), dns.RcodeSuccess, false, true},
		{"answer, DO and CO", signed, query("static.example.org.", dns.TypeA, withEDNS(1232, true), co), dns.RcodeSuccess, true, false},
		{"group answer, DO and CO", signed, query("www.example.org.", dns.TypeA, withEDNS(1232, true), co), dns.RcodeSuccess, true, false},
		{"NXDOMAIN, CO without DO", signed, query("nothere.example.org.", dns.TypeA, withEDNS(1232, false), co), dns.RcodeNameError, false, false},
		{"unsigned zone, DO and CO", plain, query("nothere.example.org.", dns.TypeA, withEDNS(1232, true), co), dns.RcodeNameError, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := unpacked(tt.s.servePacket(context.Background(), tt.pkt, fastLocal, fastRemote, new([]netip.Addr), nil))
			if m == nil {
				t.Fatal("no reply")
			}
			if m.Rcode != tt.rcode || m.IsEdns0() == nil || m.IsEdns0().Co() != tt.co {
				t.Fatalf("rcode %s, want %s; CO in the reply %v, want %v\n%v", dns.RcodeToString[m.Rcode], dns.RcodeToString[tt.rcode],
					m.IsEdns0() != nil && m.IsEdns0().Co(), tt.co, m)
			}
			nxname := false
			for _, rr := range m.Ns {
				if n, ok := rr.(*dns.NSEC); ok {
					nxname = nxname || slices.Contains(n.TypeBitMap, dns.TypeNXNAME)
				}
			}
			if nxname != tt.nxname {
				t.Errorf("NSEC with NXNAME %v, want %v\n%v", nxname, tt.nxname, m)
			}
		})
	}
}

// TestUnsignedWithoutDO: without the DO bit, a signed zone's answers are
// byte for byte the unsigned zone's (but for its DNSKEY RRset).
func TestUnsignedWithoutDO(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	signed, _ := newSigned(t, now, testKSK, testZSK)
	plain, _ := newSigned(t, now)
	plain.cookie = signed.cookie
	for _, c := range fastCases() {
		if m := unpacked(c.pkt); m == nil || m.IsEdns0() != nil && m.IsEdns0().Do() {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			got, gotFast := answerUDP(signed, c.pkt)
			want, wantFast := answerUDP(plain, c.pkt)
			if !bytes.Equal(got, want) || gotFast != wantFast {
				t.Fatalf("signed zone (fast %v): %v\nunsigned (fast %v): %v", gotFast, unpacked(got), wantFast, unpacked(want))
			}
		})
	}
}

// TestSignedFastPathMatchesSlowPath: with a signed zone (an ED25519 CSK,
// whose signatures are deterministic), the UDP path and the slow path
// alone give the same bytes for every query of the equivalence table
// with and without DO, and ask the group answerer as often.
func TestSignedFastPathMatchesSlowPath(t *testing.T) {
	p := newSignedPair(t)
	for _, c := range append(fastCases(), signedCases()...) {
		t.Run(c.name, func(t *testing.T) {
			// Twice: the first time cold (signatures made), then warm.
			for round := range 2 {
				p.fastAsked, p.slowAsked = 0, 0
				got, fast := answerUDP(p.fast, c.pkt)
				want, _ := answerUDP(p.slow, c.pkt)
				if !bytes.Equal(got, want) {
					t.Fatalf("round %d: fast path and slow path differ\nfast: %v\nslow: %v", round, unpacked(got), unpacked(want))
				}
				if p.fastAsked != p.slowAsked {
					t.Errorf("round %d: group questions asked: %d with the fast path, %d by the slow path alone", round, p.fastAsked, p.slowAsked)
				}
				if round == 1 && fast != c.fast {
					t.Errorf("warm: answered by the fast path: %v, want %v", fast, c.fast)
				}
			}
		})
	}
}

// signedCases are queries with DO for the signed equivalence tests.
func signedCases() []fastCase {
	var cs []fastCase
	for _, q := range []struct {
		name  string
		qtype uint16
		fast  bool // once the signatures are cached
		opts  []dns.EDNS0
	}{
		{"static.example.org.", dns.TypeA, true, nil},
		{"static.example.org.", dns.TypeA, true, []dns.EDNS0{nsid, ecs("198.51.100.0/24")}},
		{"www.example.org.", dns.TypeA, true, nil},
		{"www.example.org.", dns.TypeA, true, []dns.EDNS0{ecs("198.51.101.0/24")}},
		{"www.example.org.", dns.TypeAAAA, true, []dns.EDNS0{ecs("2001:db8:1::/48")}},
		{"example.org.", dns.TypeDNSKEY, true, nil},
		{"example.org.", dns.TypeSOA, true, nil},
		{"nothere.example.org.", dns.TypeA, false, nil},
		{"v4only.example.org.", dns.TypeAAAA, false, nil},
		{"host.sub.example.org.", dns.TypeA, false, nil},
		{"many.example.org.", dns.TypeA, false, nil}, // more addresses than the fast path signs
	} {
		cs = append(cs, fastCase{name: fmt.Sprintf("DO %s %s %d options", q.name, dns.TypeToString[q.qtype], len(q.opts)),
			pkt: query(q.name, q.qtype, withEDNS(1232, true, q.opts...)), fast: q.fast})
	}
	// CO (RFC 9824): the slow path's, whose reply says CO.
	co := func(m *dns.Msg) { m.IsEdns0().SetCo() }
	for _, name := range []string{"www.example.org.", "nothere.example.org."} {
		cs = append(cs, fastCase{name: "DO CO " + name, pkt: query(name, dns.TypeA, withEDNS(1232, true), co)})
	}
	return cs
}

// newSignedPair is newFastPair over the zone signed by the ED25519 key.
func newSignedPair(t testing.TB) *fastPair {
	t.Helper()
	return pairOf(t, func() *zones.Set { return signedSet(t, testEd25519) })
}

// TestSignatureCache: an RRset is signed once; the same answer again, to
// another client subnet with the same records, or after a reload with
// the same keys, comes from the cache.
func TestSignatureCache(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	s, _ := newSigned(t, now, testKSK, testZSK)
	signed, hits := s.m.dnssec.Signed, s.m.dnssec.Hits
	ask := func(pkt []byte) {
		t.Helper()
		if m := unpacked(s.servePacket(context.Background(), pkt, fastLocal, fastRemote, new([]netip.Addr), nil)); m == nil || len(m.Answer) < 2 {
			t.Fatalf("no signed answer: %v", m)
		}
	}
	ask(doQuery("www.example.org.", dns.TypeA))
	if n := testutil.ToFloat64(signed); n != 1 {
		t.Fatalf("%v signatures made for one RRset, want 1", n)
	}
	ask(doQuery("www.example.org.", dns.TypeA))
	ask(query("www.example.org.", dns.TypeA, withEDNS(1232, true, ecs("198.51.100.0/24"))))
	if err := s.Load(signedSet(t, testKSK, testZSK)); err != nil {
		t.Fatal(err)
	}
	ask(doQuery("www.example.org.", dns.TypeA))
	if n, h := testutil.ToFloat64(signed), testutil.ToFloat64(hits); n != 1 || h != 3 {
		t.Errorf("%v signatures made, %v cache hits; want 1 and 3", n, h)
	}
	if got, want := s.nearestExpiry(), float64(now.Add(7*24*time.Hour).Unix()); got != want {
		t.Errorf("nearest expiry %v, want %v", got, want)
	}
}

// TestSigningKeyTiming: a key that is not active yet signs nothing, and
// a zone without an active key is served unsigned.
func TestSigningKeyTiming(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	set := signedSet(t, testZSK)
	set.Zones[0].Keys[0].Activate = now.Add(time.Hour)
	s, err := New(Options{now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(set); err != nil {
		t.Fatal(err)
	}
	m := unpacked(s.servePacket(context.Background(), doQuery("static.example.org.", dns.TypeA), fastLocal, fastRemote, new([]netip.Addr), nil))
	if m == nil || len(m.Answer) != 1 {
		t.Fatalf("want the unsigned answer, got %v", m)
	}
}
