package dnsd

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeWriter is an in-process dns.ResponseWriter that keeps what it got.
type fakeWriter struct {
	tcp  bool
	msgs int
	last *dns.Msg
}

func (w *fakeWriter) LocalAddr() net.Addr {
	if w.tcp {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}

func (w *fakeWriter) RemoteAddr() net.Addr {
	if w.tcp {
		return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5353}
	}
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 5353}
}

func (w *fakeWriter) WriteMsg(m *dns.Msg) error {
	if _, err := m.Pack(); err != nil {
		return err
	}
	w.msgs++
	w.last = m
	return nil
}

func (w *fakeWriter) Write(b []byte) (int, error) { w.msgs++; return len(b), nil }
func (w *fakeWriter) Close() error                { return nil }
func (w *fakeWriter) TsigStatus() error           { return nil }
func (w *fakeWriter) TsigTimersOnly(bool)         {}
func (w *fakeWriter) Hijack()                     {}
func (w *fakeWriter) Network() string {
	if w.tcp {
		return "tcp"
	}
	return "udp"
}

var _ dns.ResponseWriter = (*fakeWriter)(nil)

func FuzzServeDNS(f *testing.F) {
	s, err := New(Options{})
	if err != nil {
		f.Fatal(err)
	}
	if err := s.Load(testSet(f, nil)); err != nil {
		f.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		qtype uint16
		edns  bool
	}{
		{"static.example.org.", dns.TypeA, false},
		{"www.example.org.", dns.TypeAAAA, true},
		{"x.y.wild.example.org.", dns.TypeANY, true},
		{"host.sub.example.org.", dns.TypeA, false},
		{"example.org.", dns.TypeAXFR, false},
		{"chain1.example.org.", dns.TypeA, true},
	} {
		m := new(dns.Msg)
		m.SetQuestion(c.name, c.qtype)
		if c.edns {
			m.SetEdns0(4096, true)
			m.IsEdns0().Option = []dns.EDNS0{&dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}}
		}
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, tcp bool) {
		w := &fakeWriter{tcp: tcp}
		proto := "udp"
		if tcp {
			proto = "tcp"
		}
		serveRaw(context.Background(), s, w, raw, proto)
		if n := testutil.ToFloat64(s.m.panics); n != 0 {
			t.Fatalf("a handler panicked (%v recovered panics)", n)
		}
		if w.msgs > 1 && !tcp {
			t.Fatalf("%d UDP replies to one query", w.msgs)
		}
	})
}

// serveRaw is the edge's whole path for one message in bytes, as the
// listeners run it (UDP: fast path or slow path; TCP: screen, accept,
// unpack, serve).
func serveRaw(ctx context.Context, s *Server, w dns.ResponseWriter, raw []byte, proto string) {
	if proto == "udp" {
		var addrs []netip.Addr
		if b := s.servePacket(ctx, raw, w.LocalAddr(), w.RemoteAddr(), &addrs, nil); b != nil {
			_, _ = w.Write(b)
		}
		return
	}
	raw = s.screen(raw)
	if len(raw) < headerSize || raw[2]&0x80 != 0 {
		return
	}
	r := new(dns.Msg)
	if err := r.Unpack(raw); err != nil {
		return
	}
	s.ServeMsg(ctx, w, r, proto)
}
