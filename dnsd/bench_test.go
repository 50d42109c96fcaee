package dnsd

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkServeDNS measures the edge plus the authoritative answer path
// for a few typical questions, on an in-process writer.
func BenchmarkServeDNS(b *testing.B) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Load(testSet(b, nil)); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		qname string
		qtype uint16
		edns  bool
	}{
		{"exact", "static.example.org.", dns.TypeA, false},
		{"exact_edns", "static.example.org.", dns.TypeA, true},
		{"nxdomain", "nope.example.org.", dns.TypeA, true},
		{"wildcard", "x.wild.example.org.", dns.TypeA, true},
		{"group", "www.example.org.", dns.TypeA, true},
		{"referral", "host.sub.example.org.", dns.TypeA, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			q := new(dns.Msg)
			q.SetQuestion(c.qname, c.qtype)
			if c.edns {
				q.SetEdns0(1232, false)
			}
			w := &fakeWriter{}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				s.ServeMsg(ctx, w, q, "udp")
			}
			if w.last == nil || (w.last.Rcode != dns.RcodeSuccess && w.last.Rcode != dns.RcodeNameError) {
				b.Fatalf("reply %v", w.last)
			}
		})
	}
}

// BenchmarkServePacket measures one UDP query from its bytes to the
// reply's bytes, as the socket loop runs it (fast path when it applies,
// slow path for the rest), without the socket.
func BenchmarkServePacket(b *testing.B) {
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Load(testSet(b, nil)); err != nil {
		b.Fatal(err)
	}
	benchPackets(b, s, []benchPacket{
		{"static", query("static.example.org.", dns.TypeA)},
		{"static_edns", query("static.example.org.", dns.TypeA, withEDNS(1232, false))},
		{"group", query("www.example.org.", dns.TypeA)},
		{"group_ecs", query("www.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.100.0/24")))},
		{"slow_nxdomain", query("nope.example.org.", dns.TypeA, withEDNS(1232, false))},
	})
}

// benchPacket is one query of benchPackets.
type benchPacket struct {
	name string
	pkt  []byte
}

// benchPackets runs each packet through s's UDP path, one sub-benchmark
// each.
func benchPackets(b *testing.B, s *Server, cases []benchPacket) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			var addrs []netip.Addr
			out := make([]byte, 0, udpReadSize)
			b.ReportAllocs()
			for b.Loop() {
				if s.servePacket(ctx, c.pkt, fastLocal, fastRemote, &addrs, out[:0]) == nil {
					b.Fatal("no reply")
				}
			}
		})
	}
}

// BenchmarkServePacketSigned measures one UDP query of a signed zone (a
// KSK and a ZSK, ECDSAP256SHA256) with DO, against the same query
// without DO, whose answer is unsigned: the cost of signing online once
// the signatures are cached.
func BenchmarkServePacketSigned(b *testing.B) {
	s, _ := newSigned(b, time.Now(), testKSK, testZSK)
	benchPackets(b, s, []benchPacket{
		{"static", query("static.example.org.", dns.TypeA, withEDNS(1232, false))},
		{"static_do", query("static.example.org.", dns.TypeA, withEDNS(1232, true))},
		{"group_ecs", query("www.example.org.", dns.TypeA, withEDNS(1232, false, ecs("198.51.100.0/24")))},
		{"group_ecs_do", query("www.example.org.", dns.TypeA, withEDNS(1232, true, ecs("198.51.100.0/24")))},
		{"nxdomain", query("nope.example.org.", dns.TypeA, withEDNS(1232, false))},
		{"nxdomain_do", query("nope.example.org.", dns.TypeA, withEDNS(1232, true))},
	})
}
