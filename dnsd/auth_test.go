package dnsd

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/transmirror/transmirror/dnsd/internal/dnstest"
)

const (
	soaNeg  = "example.org. 300 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300"
	apexNS1 = "example.org. 3600 IN NS ns1.example.org."
	apexNS2 = "example.org. 3600 IN NS ns2.example.org."
	glueNS1 = "ns1.example.org. 3600 IN A 192.0.2.53"
	glueNS2 = "ns2.example.org. 3600 IN AAAA 2001:db8::53"
)

func TestAuthoritative(t *testing.T) {
	ts := newTestServer(t, testSet(t, nil), Options{})
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "exact A", Qname: "static.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"static.example.org. 300 IN A 192.0.2.10"}},
		{Name: "0x20 case kept in question", Qname: "StAtIc.ExAmPlE.oRg.", Qtype: dns.TypeTXT, AA: true, RD: true,
			Answer: []string{`static.example.org. 300 IN TXT "hello"`}},
		{Name: "apex NS with glue", Qname: "example.org.", Qtype: dns.TypeNS, AA: true,
			Answer: []string{apexNS1, apexNS2}, Extra: []string{glueNS1, glueNS2}},
		{Name: "MX with additional", Qname: "example.org.", Qtype: dns.TypeMX, AA: true,
			Answer: []string{"example.org. 3600 IN MX 10 mail.example.org."}, Extra: []string{"mail.example.org. 3600 IN A 192.0.2.25"}},
		{Name: "NODATA", Qname: "static.example.org.", Qtype: dns.TypeAAAA, AA: true, Ns: []string{soaNeg}},
		{Name: "NXDOMAIN", Qname: "nope.example.org.", Qtype: dns.TypeA, AA: true, Rcode: dns.RcodeNameError, Ns: []string{soaNeg}},
		{Name: "ENT is NODATA", Qname: "b.c.example.org.", Qtype: dns.TypeA, AA: true, Ns: []string{soaNeg}},
		{Name: "ENT two levels up", Qname: "c.example.org.", Qtype: dns.TypeA, AA: true, Ns: []string{soaNeg}},
		{Name: "below ENT NXDOMAIN", Qname: "x.b.c.example.org.", Qtype: dns.TypeA, AA: true, Rcode: dns.RcodeNameError, Ns: []string{soaNeg}},
		{Name: "CNAME", Qname: "alias.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"alias.example.org. 300 IN CNAME static.example.org.", "static.example.org. 300 IN A 192.0.2.10"}},
		{Name: "CNAME qtype", Qname: "alias.example.org.", Qtype: dns.TypeCNAME, AA: true,
			Answer: []string{"alias.example.org. 300 IN CNAME static.example.org."}},
		{Name: "CNAME chain", Qname: "chain1.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"chain1.example.org. 300 IN CNAME chain2.example.org.", "chain2.example.org. 300 IN CNAME alias.example.org.",
				"alias.example.org. 300 IN CNAME static.example.org.", "static.example.org. 300 IN A 192.0.2.10"}},
		{Name: "CNAME loop stops", Qname: "loop1.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"loop1.example.org. 300 IN CNAME loop2.example.org.", "loop2.example.org. 300 IN CNAME loop1.example.org."}},
		{Name: "CNAME out of zone", Qname: "out.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"out.example.org. 300 IN CNAME www.example.net."}},
		{Name: "CNAME to NXDOMAIN", Qname: "dangling.example.org.", Qtype: dns.TypeA, AA: true, Rcode: dns.RcodeNameError,
			Answer: []string{"dangling.example.org. 300 IN CNAME nothere.example.org."}, Ns: []string{soaNeg}},
		{Name: "CNAME to group", Qname: "togroup.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"togroup.example.org. 300 IN CNAME www.example.org.", "www.example.org. 60 IN A 192.0.2.101", "www.example.org. 60 IN A 192.0.2.102"}},
		{Name: "wildcard synthesis", Qname: "foo.wild.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"foo.wild.example.org. 300 IN A 192.0.2.40"}},
		{Name: "wildcard deeper", Qname: "x.y.wild.example.org.", Qtype: dns.TypeTXT, AA: true,
			Answer: []string{`x.y.wild.example.org. 300 IN TXT "wild"`}},
		{Name: "wildcard NODATA", Qname: "foo.wild.example.org.", Qtype: dns.TypeMX, AA: true, Ns: []string{soaNeg}},
		{Name: "no synthesis for existing name", Qname: "exists.wild.example.org.", Qtype: dns.TypeA, AA: true, Ns: []string{soaNeg}},
		{Name: "no synthesis below existing name", Qname: "sub.exists.wild.example.org.", Qtype: dns.TypeA, AA: true,
			Rcode: dns.RcodeNameError, Ns: []string{soaNeg}},
		{Name: "no synthesis for ENT", Qname: "c.example.org.", Qtype: dns.TypeTXT, AA: true, Ns: []string{soaNeg}},
		{Name: "wildcard itself", Qname: "*.wild.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"*.wild.example.org. 300 IN A 192.0.2.40"}},
		{Name: "CNAME at wildcard", Qname: "x.cwild.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"x.cwild.example.org. 300 IN CNAME static.example.org.", "static.example.org. 300 IN A 192.0.2.10"}},
		{Name: "referral with glue", Qname: "host.sub.example.org.", Qtype: dns.TypeA,
			Ns:    []string{"sub.example.org. 3600 IN NS ns.sub.example.org.", "sub.example.org. 3600 IN NS ns.other.net."},
			Extra: []string{"ns.sub.example.org. 3600 IN A 192.0.2.60"}},
		{Name: "referral at cut", Qname: "sub.example.org.", Qtype: dns.TypeNS,
			Ns:    []string{"sub.example.org. 3600 IN NS ns.sub.example.org.", "sub.example.org. 3600 IN NS ns.other.net."},
			Extra: []string{"ns.sub.example.org. 3600 IN A 192.0.2.60"}},
		{Name: "glue name is referral", Qname: "ns.sub.example.org.", Qtype: dns.TypeA,
			Ns:    []string{"sub.example.org. 3600 IN NS ns.sub.example.org.", "sub.example.org. 3600 IN NS ns.other.net."},
			Extra: []string{"ns.sub.example.org. 3600 IN A 192.0.2.60"}},
		{Name: "DS at cut NODATA from parent", Qname: "sub.example.org.", Qtype: dns.TypeDS, AA: true, Ns: []string{soaNeg}},
		{Name: "DS at cut answered", Qname: "sec.example.org.", Qtype: dns.TypeDS, AA: true,
			Answer: []string{"sec.example.org. 3600 IN DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"}},
		{Name: "DS below cut is referral", Qname: "x.sub.example.org.", Qtype: dns.TypeDS,
			Ns:    []string{"sub.example.org. 3600 IN NS ns.sub.example.org.", "sub.example.org. 3600 IN NS ns.other.net."},
			Extra: []string{"ns.sub.example.org. 3600 IN A 192.0.2.60"}},
		{Name: "ANY over UDP is one RRset", Qname: "static.example.org.", Qtype: dns.TypeANY, AA: true,
			Answer: []string{"static.example.org. 300 IN A 192.0.2.10"}},
		{Name: "ANY over TCP is everything", Qname: "static.example.org.", Qtype: dns.TypeANY, TCP: true, AA: true,
			Answer: []string{"static.example.org. 300 IN A 192.0.2.10", `static.example.org. 300 IN TXT "hello"`}},
		{Name: "outside zones REFUSED", Qname: "example.com.", Qtype: dns.TypeA, RD: true, Rcode: dns.RcodeRefused},
		{Name: "class HS REFUSED", Qname: "static.example.org.", Qtype: dns.TypeA, Qclass: dns.ClassHESIOD, Rcode: dns.RcodeRefused},
	})
}

func TestGroups(t *testing.T) {
	ts := newTestServer(t, testSet(t, nil), Options{})
	ecs := func(fam uint16, addr string, bits uint8) *dns.EDNS0_SUBNET {
		return &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: fam, SourceNetmask: bits, Address: net.ParseIP(addr)}
	}
	wantScope := func(scope int) func(testing.TB, *dns.Msg) {
		return func(t testing.TB, m *dns.Msg) {
			opt := m.IsEdns0()
			if opt == nil {
				t.Fatal("no OPT in reply")
			}
			for _, o := range opt.Option {
				if e, ok := o.(*dns.EDNS0_SUBNET); ok {
					if scope < 0 || int(e.SourceScope) != scope {
						t.Errorf("ECS scope = %d, want %d", e.SourceScope, scope)
					}
					return
				}
			}
			if scope >= 0 {
				t.Errorf("no ECS option in reply, want scope %d", scope)
			}
		}
	}
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "group A", Qname: "www.example.org.", Qtype: dns.TypeA, AA: true,
			Answer: []string{"www.example.org. 60 IN A 192.0.2.101", "www.example.org. 60 IN A 192.0.2.102"}},
		{Name: "group AAAA", Qname: "WWW.example.org.", Qtype: dns.TypeAAAA, AA: true,
			Answer: []string{"www.example.org. 60 IN AAAA 2001:db8::101", "www.example.org. 60 IN AAAA 2001:db8::103"}},
		{Name: "group family absent NODATA", Qname: "v4only.example.org.", Qtype: dns.TypeAAAA, AA: true, Ns: []string{soaNeg}},
		{Name: "group other qtype NODATA", Qname: "v4only.example.org.", Qtype: dns.TypeMX, AA: true, Ns: []string{soaNeg}},
		{Name: "group static TXT", Qname: "www.example.org.", Qtype: dns.TypeTXT, AA: true,
			Answer: []string{`www.example.org. 300 IN TXT "group with a static TXT"`}},
		{Name: "group ECS scope echoed", Qname: "www.example.org.", Qtype: dns.TypeA, AA: true, EDNS: true,
			Options: []dns.EDNS0{ecs(1, "198.51.100.0", 24)},
			Answer:  []string{"www.example.org. 60 IN A 192.0.2.101", "www.example.org. 60 IN A 192.0.2.102"},
			Check:   wantScope(0)},
		{Name: "no ECS without ECS query", Qname: "www.example.org.", Qtype: dns.TypeA, AA: true, EDNS: true,
			Answer: []string{"www.example.org. 60 IN A 192.0.2.101", "www.example.org. 60 IN A 192.0.2.102"},
			Check:  wantScope(-1)},
	})
}

// scopedGroups answers every group with one address and a fixed ECS scope
// per query type, like a policy that depends on part of the client prefix.
type scopedGroups map[uint16]int

func (s scopedGroups) AnswerGroup(_ context.Context, q GroupQuery) (GroupAnswer, error) {
	a := netip.MustParseAddr("192.0.2.101")
	if q.Qtype == dns.TypeAAAA {
		a = netip.MustParseAddr("2001:db8::101")
	}
	return GroupAnswer{Addrs: []netip.Addr{a}, TTL: 60, ScopePrefix: s[q.Qtype]}, nil
}

// TestGroupScopeIsReturned: the scope a GroupAnswerer returns is the scope
// on the wire, capped at the source prefix; ANY over TCP carries the widest
// dependence of its two answers.
func TestGroupScopeIsReturned(t *testing.T) {
	ts := newTestServer(t, testSet(t, nil), Options{Groups: scopedGroups{dns.TypeA: 20, dns.TypeAAAA: 16}})
	ecs := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 24, Address: net.ParseIP("198.51.100.0")}
	wide := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: 12, Address: net.ParseIP("198.48.0.0")}
	scope := func(want uint8) func(testing.TB, *dns.Msg) {
		return func(t testing.TB, m *dns.Msg) {
			n := 0
			if opt := m.IsEdns0(); opt != nil {
				for _, o := range opt.Option {
					if e, ok := o.(*dns.EDNS0_SUBNET); ok {
						n++
						if e.SourceScope != want {
							t.Errorf("ECS scope = %d, want %d", e.SourceScope, want)
						}
					}
				}
			}
			if n != 1 {
				t.Errorf("%d ECS options in reply, want 1", n)
			}
		}
	}
	dnstest.Run(t, ts.addr, []dnstest.Case{
		{Name: "A scope from the answer", Qname: "www.example.org.", Qtype: dns.TypeA, AA: true, EDNS: true,
			Options: []dns.EDNS0{ecs}, Answer: []string{"www.example.org. 60 IN A 192.0.2.101"}, Check: scope(20)},
		{Name: "scope may be longer than the source prefix", Qname: "www.example.org.", Qtype: dns.TypeA, AA: true, EDNS: true,
			Options: []dns.EDNS0{wide}, Answer: []string{"www.example.org. 60 IN A 192.0.2.101"}, Check: scope(20)},
		{Name: "ANY over TCP: widest of A and AAAA", Qname: "www.example.org.", Qtype: dns.TypeANY, TCP: true, AA: true, EDNS: true,
			Options: []dns.EDNS0{ecs},
			Answer: []string{"www.example.org. 60 IN A 192.0.2.101", "www.example.org. 60 IN AAAA 2001:db8::101",
				`www.example.org. 300 IN TXT "group with a static TXT"`},
			Check: scope(20)},
		{Name: "static name with ECS: scope 0", Qname: "static.example.org.", Qtype: dns.TypeA, AA: true, EDNS: true,
			Options: []dns.EDNS0{ecs}, Answer: []string{"static.example.org. 300 IN A 192.0.2.10"}, Check: scope(0)},
	})
}
