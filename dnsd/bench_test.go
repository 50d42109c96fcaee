package dnsd

import (
	"context"
	"testing"

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
