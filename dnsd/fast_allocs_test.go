//go:build !race

package dnsd

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestFastPathAllocs: a static or group answer on the fast path, from the
// query's bytes to the reply's, allocates nothing.
func TestFastPathAllocs(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(testSet(t, nil)); err != nil {
		t.Fatal(err)
	}
	noAllocs(t, s, []benchPacket{
		{"static", query("static.example.org.", dns.TypeA)},
		{"static EDNS NSID ECS", query("static.example.org.", dns.TypeA, withEDNS(1232, false, nsid, ecs("198.51.100.0/24")))},
		{"group", query("www.example.org.", dns.TypeA)},
		{"group ECS", query("www.example.org.", dns.TypeAAAA, withEDNS(1232, false, ecs("2001:db8::/56")))},
	})
}

// noAllocs checks that each packet is answered by s's fast path (once
// it was asked before, which signs a signed zone's answer) and that the
// UDP path allocates nothing for it.
func noAllocs(t *testing.T, s *Server, cases []benchPacket) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			addrs := make([]netip.Addr, 0, 8)
			out := make([]byte, 0, udpReadSize)
			answerUDP(s, c.pkt) // cold: a signed zone signs it
			if _, fast := answerUDP(s, c.pkt); !fast {
				t.Fatal("not answered by the fast path")
			}
			if n := testing.AllocsPerRun(200, func() {
				if s.servePacket(ctx, c.pkt, fastLocal, fastRemote, &addrs, out[:0]) == nil {
					t.Fatal("no reply")
				}
			}); n != 0 {
				t.Errorf("%v allocations per answer, want 0", n)
			}
		})
	}
}

// TestSignedFastPathAllocs: once the signatures are cached, a signed
// static or group answer on the fast path allocates nothing either.
func TestSignedFastPathAllocs(t *testing.T) {
	s, _ := newSigned(t, time.Unix(1_800_000_000, 0), testKSK, testZSK)
	noAllocs(t, s, []benchPacket{
		{"static", query("static.example.org.", dns.TypeA, withEDNS(1232, true))},
		{"group ECS", query("www.example.org.", dns.TypeA, withEDNS(1232, true, ecs("198.51.100.0/24")))},
		{"DNSKEY", query("example.org.", dns.TypeDNSKEY, withEDNS(1232, true))},
	})
}
