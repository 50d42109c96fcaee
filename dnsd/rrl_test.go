package dnsd

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/zones"
)

// flood sends n copies of one query from a UDP socket bound to from,
// all at once, and returns the socket to read the replies on.
func flood(t *testing.T, from, to string, qname string, n int) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(mustAddrPort(t, from)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	dst, err := net.ResolveUDPAddr("udp", to)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		q := new(dns.Msg)
		q.SetQuestion(qname, dns.TypeA)
		q.Id = uint16(i + 1)
		b, _ := q.Pack()
		if _, err := c.WriteToUDP(b, dst); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// replies reads until want replies came or 10s passed, counting full
// answers and truncated empty ones.
func replies(t *testing.T, c *net.UDPConn, want int) (full, tc int) {
	t.Helper()
	buf := make([]byte, 65535)
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for full+tc < want {
		n, _, err := c.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("after %d full and %d truncated replies of %d: %v", full, tc, want, err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(buf[:n]); err != nil {
			t.Fatal(err)
		}
		switch {
		case m.Truncated && len(m.Answer) == 0 && len(m.Ns) == 0:
			tc++
		case !m.Truncated && len(m.Answer) > 0:
			full++
		default:
			t.Fatalf("reply neither a full answer nor a slip: %v", m)
		}
	}
	return full, tc
}

// TestRRL: a flood from one prefix gets its burst of full answers, then
// every second limited response slipped (TC, no records) and the rest
// dropped, counted by kind; another prefix at the same time, and TCP, get
// every answer; an exempt client is never limited.
func TestRRL(t *testing.T) {
	set := testSet(t, func(c *zones.Config) {
		c.Server.RRL = zones.RRLConfig{Enabled: true, Rate: 5, Window: zones.Duration(time.Second), Slip: 2,
			Exempt: []netip.Prefix{netip.MustParsePrefix("127.0.2.0/24")}}
	})
	ts := newTestServer(t, set, Options{})
	const n = 50 // 5 sent, 45 limited: 22 slipped, 23 dropped
	a := flood(t, "127.0.0.1:0", ts.addr, "static.example.org.", n)
	b := flood(t, "127.0.1.1:0", ts.addr, "static.example.org.", 5)
	full, tc := replies(t, a, 27)
	if full != 5 || tc != 22 {
		t.Errorf("flooding prefix: %d full, %d truncated; want 5 and 22", full, tc)
	}
	probetest.Until(t, 5*time.Second, func() string {
		if n := testutil.ToFloat64(ts.m.rrl.WithLabelValues("answer", rrlDropped)); n != 23 {
			return fmt.Sprintf("23 drops counted: %g", n)
		}
		return ""
	})
	if got := testutil.ToFloat64(ts.m.rrl.WithLabelValues("answer", rrlSlipped)); got != 22 {
		t.Errorf("slipped counted %v, want 22", got)
	}
	if full, tc := replies(t, b, 5); full != 5 || tc != 0 {
		t.Errorf("other prefix during the flood: %d full, %d truncated; want 5 and 0", full, tc)
	}
	t.Run("TCP is never limited", func(t *testing.T) {
		c := &dns.Client{Net: "tcp", Timeout: 5 * time.Second}
		for i := range 20 {
			q := new(dns.Msg)
			q.SetQuestion("static.example.org.", dns.TypeA)
			r, _, err := c.Exchange(q, ts.addr)
			if err != nil || len(r.Answer) == 0 || r.Truncated {
				t.Fatalf("TCP query %d during the limit: %v %v", i, r, err)
			}
		}
	})
	t.Run("exempt client", func(t *testing.T) {
		c := flood(t, "127.0.2.1:0", ts.addr, "static.example.org.", 30)
		if full, tc := replies(t, c, 30); full != 30 || tc != 0 {
			t.Errorf("exempt client: %d full, %d truncated; want 30 and 0", full, tc)
		}
	})
	t.Run("NXDOMAIN has its own bucket", func(t *testing.T) {
		c := flood(t, "127.0.0.1:0", ts.addr, "nope.example.org.", 5)
		buf := make([]byte, 4096)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for i := range 5 {
			n, _, err := c.ReadFromUDP(buf)
			m := new(dns.Msg)
			if err != nil || m.Unpack(buf[:n]) != nil || m.Rcode != dns.RcodeNameError || m.Truncated {
				t.Fatalf("NXDOMAIN reply %d: %v %v", i, m, err)
			}
		}
	})
}

func TestRRLKind(t *testing.T) {
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET}}
	ns := &dns.NS{Hdr: dns.RR_Header{Name: "sub.example.org.", Rrtype: dns.TypeNS, Class: dns.ClassINET}, Ns: "ns.sub.example.org."}
	a := &dns.A{Hdr: dns.RR_Header{Name: "www.example.org.", Rrtype: dns.TypeA, Class: dns.ClassINET}, A: net.IPv4(192, 0, 2, 1)}
	msg := func(rcode int, aa bool, answer, authority []dns.RR) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion("www.example.org.", dns.TypeA)
		m.Rcode, m.Authoritative, m.Answer, m.Ns = rcode, aa, answer, authority
		return m
	}
	for _, tt := range []struct {
		name string
		m    *dns.Msg
		kind string
		key  string
	}{
		{"answer", msg(dns.RcodeSuccess, true, []dns.RR{a}, nil), "answer", "www.example.org."},
		{"nodata", msg(dns.RcodeSuccess, true, nil, []dns.RR{soa}), "nodata", "www.example.org."},
		{"nxdomain by zone", msg(dns.RcodeNameError, true, nil, []dns.RR{soa}), "nxdomain", "example.org."},
		{"referral by cut", msg(dns.RcodeSuccess, false, nil, []dns.RR{ns}), "referral", "sub.example.org."},
		{"error", msg(dns.RcodeRefused, false, nil, nil), "error", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kind, key := rrlKind(tt.m)
			if kind.String() != tt.kind || key != tt.key {
				t.Errorf("rrlKind = %s %q, want %s %q", kind, key, tt.kind, tt.key)
			}
		})
	}
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}
