package dnsd

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/zones"
)

// countingGroups counts the group questions asked of it.
type countingGroups struct {
	GroupAnswerer
	n *int
}

func (g countingGroups) AnswerGroup(ctx context.Context, q GroupQuery) (GroupAnswer, error) {
	*g.n++
	return g.GroupAnswerer.AnswerGroup(ctx, q)
}

// scopeGroups answers like StaticGroups, but the answer depends on the
// client subnet: its order rotates with the subnet's third byte, and the
// scope is /24 (IPv4) or /48 (IPv6).
type scopeGroups struct{ set *zones.Set }

func (g scopeGroups) AnswerGroup(ctx context.Context, q GroupQuery) (GroupAnswer, error) {
	ga, err := StaticGroups{Set: g.set}.AnswerGroup(ctx, q)
	if err != nil || !q.ECS.IsValid() {
		return ga, err
	}
	b := q.ECS.Addr().As16()
	if len(ga.Addrs) > 0 {
		k := int(b[14]) % len(ga.Addrs)
		ga.Addrs = append(ga.Addrs[k:], ga.Addrs[:k]...)
	}
	ga.ScopePrefix = 24
	if q.ECS.Addr().Is6() {
		ga.ScopePrefix = 48
	}
	return ga, nil
}

// fastPair is two servers with the same snapshot and clock, one with the
// fast path, one without.
type fastPair struct {
	fast, slow           *Server
	fastAsked, slowAsked int // group questions asked by each
}

func newFastPair(t testing.TB, mut func(*zones.Config)) *fastPair {
	t.Helper()
	p := pairOf(t, func() *zones.Set { return testSet(t, mut) })
	if p.fast.snap.Load().fast == nil || len(p.fast.snap.Load().fast.entries) == 0 {
		t.Fatal("the fast table is empty")
	}
	return p
}

// pairOf is the fast pair of two servers of the sets that set builds.
func pairOf(t testing.TB, set func() *zones.Set) *fastPair {
	t.Helper()
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	p := new(fastPair)
	for _, slowOnly := range []bool{false, true} {
		set := set()
		asked := &p.fastAsked
		if slowOnly {
			asked = &p.slowAsked
		}
		s, err := New(Options{Groups: countingGroups{scopeGroups{set: set}, asked}, now: clock, slowOnly: slowOnly})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Load(set); err != nil {
			t.Fatal(err)
		}
		if slowOnly {
			p.slow = s
		} else {
			p.fast = s
		}
	}
	p.slow.cookie = p.fast.cookie
	return p
}

var (
	fastLocal  = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
	fastRemote = &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5353}
)

// answer runs pkt through s's UDP path and says whether the fast path
// answered it.
func answerUDP(s *Server, pkt []byte) (reply []byte, fast bool) {
	var addrs []netip.Addr
	var dec groupDecision
	if snap := s.snap.Load(); snap.fast != nil {
		if b, ok := s.tryFast(context.Background(), snap, pkt, fastRemote, &addrs, nil, &dec); ok {
			return b, true
		}
	}
	return s.serveSlow(context.Background(), pkt, fastLocal, fastRemote, nil, dec), false
}

type fastCase struct {
	name string
	pkt  []byte
	fast bool // the fast path answers it
}

func query(name string, qtype uint16, edit ...func(*dns.Msg)) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0x1234
	m.RecursionDesired = false
	for _, f := range edit {
		f(m)
	}
	b, err := m.Pack()
	if err != nil {
		panic(err)
	}
	return b
}

func withEDNS(size uint16, do bool, opts ...dns.EDNS0) func(*dns.Msg) {
	return func(m *dns.Msg) {
		m.SetEdns0(size, do)
		m.IsEdns0().Option = opts
	}
}

func rd(m *dns.Msg) { m.RecursionDesired = true }
func cd(m *dns.Msg) { m.CheckingDisabled = true }

func ecs(prefix string) *dns.EDNS0_SUBNET {
	p := netip.MustParsePrefix(prefix)
	fam := uint16(1)
	if p.Addr().Is6() {
		fam = 2
	}
	return &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: uint8(p.Bits()), Address: net.IP(p.Addr().AsSlice())}
}

var nsid = &dns.EDNS0_NSID{Code: dns.EDNS0NSID}

func fastCases() []fastCase {
	tooLong := query("static.example.org.", dns.TypeA)
	binary.BigEndian.PutUint16(tooLong[4:], 2) // QDCOUNT 2, one question
	trailing := append(query("static.example.org.", dns.TypeA), 0, 0)
	response := query("static.example.org.", dns.TypeA, func(m *dns.Msg) { m.Response = true })
	badVers := query("static.example.org.", dns.TypeA, withEDNS(1232, false), func(m *dns.Msg) { m.IsEdns0().SetVersion(1) })
	twoOPT := query("static.example.org.", dns.TypeA, withEDNS(1232, false), func(m *dns.Msg) {
		m.Extra = append(m.Extra, &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}})
	})
	ecsScoped := ecs("198.51.100.0/24")
	ecsScoped.SourceScope = 16
	return []fastCase{
		{"static A", query("static.example.org.", dns.TypeA), true},
		{"static A RD", query("static.example.org.", dns.TypeA, rd), true},
		{"static A RD CD", query("static.example.org.", dns.TypeA, rd, cd), true},
		{"static A EDNS", query("static.example.org.", dns.TypeA, withEDNS(1232, false)), true},
		{"static A EDNS DO 4096", query("static.example.org.", dns.TypeA, withEDNS(4096, true)), true},
		{"static A EDNS 512", query("static.example.org.", dns.TypeA, withEDNS(512, false)), true},
		{"static A EDNS below 512", query("static.example.org.", dns.TypeA, withEDNS(100, false)), true},
		{"static A NSID", query("static.example.org.", dns.TypeA, withEDNS(1232, false, nsid)), true},
		{"static A ECS v4", query("static.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.100.0/24"))), true},
		{"static A ECS v6", query("static.example.org.", dns.TypeA, withEDNS(1232, false, ecs("2001:db8:77::/56"))), true},
		{"static A ECS /0", query("static.example.org.", dns.TypeA, withEDNS(1232, false, ecs("0.0.0.0/0"))), true},
		{"static A ECS odd bits", query("static.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.100.128/25"))), true},
		{"static A ECS and NSID", query("static.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.100.0/24"), nsid)), true},
		{"static A padding", query("static.example.org.", dns.TypeA, withEDNS(1232, false, &dns.EDNS0_PADDING{Padding: make([]byte, 16)})), true},
		{"static TXT", query("static.example.org.", dns.TypeTXT), true},
		{"apex MX with additional", query("example.org.", dns.TypeMX), true},
		{"apex NS with glue", query("example.org.", dns.TypeNS, withEDNS(1232, false)), true},
		{"apex SOA", query("example.org.", dns.TypeSOA), true},
		{"static TXT at a group name", query("www.example.org.", dns.TypeTXT), true},
		{"big TXT no EDNS: TC", query("big.example.org.", dns.TypeTXT), false},
		{"big TXT EDNS 4096: capped, TC", query("big.example.org.", dns.TypeTXT, withEDNS(4096, false)), false},
		{"group A", query("www.example.org.", dns.TypeA), true},
		{"group AAAA", query("www.example.org.", dns.TypeAAAA, rd), true},
		{"group A EDNS", query("www.example.org.", dns.TypeA, withEDNS(1232, true)), true},
		{"group A ECS scope 24", query("www.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.101.0/24"))), true},
		{"group A ECS other subnet", query("www.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.102.0/24"))), true},
		{"group AAAA ECS v6", query("www.example.org.", dns.TypeAAAA, withEDNS(1232, false, ecs("2001:db8:1::/48"))), true},
		{"group A ECS and NSID", query("www.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.101.0/24"), nsid)), true},
		{"group A NSID then ECS", query("www.example.org.", dns.TypeA, withEDNS(1232, false, nsid, ecs("198.51.101.0/24"))), true},
		{"group NODATA", query("v4only.example.org.", dns.TypeAAAA), false},
		{"group A too big: TC", query("many.example.org.", dns.TypeA), false},
		{"group A too big for 600: trimmed", query("many.example.org.", dns.TypeA, withEDNS(600, false)), false},
		{"group A big EDNS 1232", query("many.example.org.", dns.TypeA, withEDNS(1232, false)), true},
		{"group ANY", query("www.example.org.", dns.TypeANY), false},
		{"0x20 static", query("StAtIc.example.org.", dns.TypeA), false},
		{"0x20 group", query("WWW.example.org.", dns.TypeA, withEDNS(1232, false)), false},
		{"NXDOMAIN", query("nothere.example.org.", dns.TypeA, withEDNS(1232, false)), false},
		{"NODATA", query("static.example.org.", dns.TypeAAAA), false},
		{"empty non-terminal", query("b.c.example.org.", dns.TypeA), false},
		{"wildcard", query("x.wild.example.org.", dns.TypeA), false},
		{"wildcard over an existing name", query("exists.wild.example.org.", dns.TypeTXT), true},
		{"CNAME", query("alias.example.org.", dns.TypeA), false},
		{"CNAME chain", query("chain1.example.org.", dns.TypeA, withEDNS(1232, false)), false},
		{"CNAME to a group", query("togroup.example.org.", dns.TypeA), false},
		{"CNAME asked for itself", query("alias.example.org.", dns.TypeCNAME), true},
		{"referral", query("host.sub.example.org.", dns.TypeA), false},
		{"referral at the cut", query("sub.example.org.", dns.TypeNS), false},
		{"DS at the cut", query("sec.example.org.", dns.TypeDS), true},
		{"glue below a cut", query("ns.sub.example.org.", dns.TypeA), false},
		{"CH TXT id.server", query("id.server.", dns.TypeTXT, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), false},
		{"CH TXT version.bind", query("version.bind.", dns.TypeTXT, func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }), false},
		{"BADVERS", badVers, false},
		{"FORMERR two OPT", twoOPT, false},
		{"FORMERR question count", tooLong, false},
		{"NOTIMP opcode", query("static.example.org.", dns.TypeA, func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }), false},
		{"NOTIMP TKEY", query("static.example.org.", dns.TypeTKEY), false},
		{"REFUSED out of zone", query("example.net.", dns.TypeA), false},
		{"AXFR over UDP", query("example.org.", dns.TypeAXFR), false},
		{"cookie", query("static.example.org.", dns.TypeA, withEDNS(1232, false, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})), false},
		{"unknown EDNS option", query("static.example.org.", dns.TypeA, withEDNS(1232, false, &dns.EDNS0_LOCAL{Code: 65001, Data: []byte{1}})), false},
		{"ECS with a scope in the query", query("www.example.org.", dns.TypeA, withEDNS(1232, false, ecsScoped)), false},
		{"trailing bytes", trailing, false},
		{"a response", response, false},
		{"short", []byte{0x12, 0x34, 0}, false},
		{"header only", query("static.example.org.", dns.TypeA)[:headerSize], false},
	}
}

// TestFastPathMatchesSlowPath answers a table of queries that covers every
// behaviour the DNS e2e tests check with and without the fast path, and
// wants the same bytes. It also checks which ones the fast path answers.
func TestFastPathMatchesSlowPath(t *testing.T) {
	p := newFastPair(t, nil)
	for _, c := range fastCases() {
		t.Run(c.name, func(t *testing.T) {
			p.fastAsked, p.slowAsked = 0, 0
			got, fast := answerUDP(p.fast, c.pkt)
			want, _ := answerUDP(p.slow, c.pkt)
			if fast != c.fast {
				t.Errorf("fast path answered: %v, want %v", fast, c.fast)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("fast path and slow path differ\nfast: %x\nslow: %x\nfast: %v\nslow: %v", got, want, unpacked(got), unpacked(want))
			}
			// One group decision per query, whichever path sends it.
			if p.fastAsked != p.slowAsked {
				t.Errorf("group questions asked: %d with the fast path, %d by the slow path alone", p.fastAsked, p.slowAsked)
			}
			// The listener path gives the same bytes too.
			var addrs []netip.Addr
			if b := p.fast.servePacket(context.Background(), c.pkt, fastLocal, fastRemote, &addrs, nil); !bytes.Equal(b, want) {
				t.Fatalf("servePacket differs from the slow path\ngot:  %x\nwant: %x", b, want)
			}
		})
	}
}

// TestFastPathRRL sends the same sequence of queries over the rate limit
// to both paths, with a stopped clock: the same replies are sent, slipped
// and dropped.
func TestFastPathRRL(t *testing.T) {
	p := newFastPair(t, func(c *zones.Config) {
		c.Server.RRL = zones.RRLConfig{Enabled: true, Rate: 2, Window: zones.Duration(time.Second), Slip: 2,
			IPv4Prefix: 24, IPv6Prefix: 56, TableSize: 1024}
	})
	for _, q := range []struct {
		name string
		pkt  []byte
	}{
		{"static", query("static.example.org.", dns.TypeA, withEDNS(1232, false, nsid))},
		{"static no EDNS", query("mail.example.org.", dns.TypeA)},
		{"group ECS", query("www.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.101.0/24")))},
	} {
		t.Run(q.name, func(t *testing.T) {
			var kinds []string
			for i := range 8 {
				got, fast := answerUDP(p.fast, q.pkt)
				want, _ := answerUDP(p.slow, q.pkt)
				if !fast {
					t.Fatalf("query %d: the fast path did not answer", i)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("query %d: fast path and slow path differ\nfast: %v\nslow: %v", i, unpacked(got), unpacked(want))
				}
				switch m := unpacked(got); {
				case m == nil:
					kinds = append(kinds, "drop")
				case m.Truncated && len(m.Answer) == 0:
					kinds = append(kinds, "slip")
				default:
					kinds = append(kinds, "send")
				}
			}
			for _, k := range []string{"send", "slip", "drop"} {
				if !slices.Contains(kinds, k) {
					t.Errorf("no %s in %v", k, kinds)
				}
			}
		})
	}
}

func unpacked(b []byte) *dns.Msg {
	if b == nil {
		return nil
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		return nil
	}
	return m
}

// FuzzFastPathMatchesSlowPath: for any packet, the UDP path (fast when it
// can) and the slow path alone give the same bytes, and ask the group
// answerer as often, for the unsigned zone and the signed one.
func FuzzFastPathMatchesSlowPath(f *testing.F) {
	pairs := []*fastPair{newFastPair(f, nil), newSignedPair(f)}
	for _, c := range append(fastCases(), signedCases()...) {
		f.Add(c.pkt)
	}
	f.Fuzz(func(t *testing.T, pkt []byte) {
		for i, p := range pairs {
			p.fastAsked, p.slowAsked = 0, 0
			got, _ := answerUDP(p.fast, pkt)
			want, _ := answerUDP(p.slow, pkt)
			if !bytes.Equal(got, want) {
				t.Fatalf("pair %d, packet %x\nfast: %x\nslow: %x", i, pkt, got, want)
			}
			if p.fastAsked != p.slowAsked {
				t.Fatalf("pair %d, packet %x: group questions asked: %d with the fast path, %d by the slow path alone", i, pkt, p.fastAsked, p.slowAsked)
			}
		}
	})
}
