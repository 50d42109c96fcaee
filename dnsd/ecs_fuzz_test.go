package dnsd

import (
	"bytes"
	"encoding/binary"
	"net"
	"testing"

	"github.com/miekg/dns"
)

// ecsQuery is an A query for name with an OPT record whose only option is
// an EDNS Client Subnet option with the data opt (family, source and
// scope prefix lengths, address), written as is.
func ecsQuery(name string, opt []byte) []byte {
	pkt := query(name, dns.TypeA)
	binary.BigEndian.PutUint16(pkt[10:], 1) // ARCOUNT
	pkt = append(pkt, 0, byte(dns.TypeOPT>>8), byte(dns.TypeOPT), 0x04, 0xd0, 0, 0, 0, 0)
	pkt = binary.BigEndian.AppendUint16(pkt, uint16(4+len(opt)))
	pkt = binary.BigEndian.AppendUint16(pkt, dns.EDNS0SUBNET)
	pkt = binary.BigEndian.AppendUint16(pkt, uint16(len(opt)))
	return append(pkt, opt...)
}

// subnetOption returns the client subnet option of m's OPT record, nil
// for none.
func subnetOption(m *dns.Msg) *dns.EDNS0_SUBNET {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_SUBNET); ok {
				return e
			}
		}
	}
	return nil
}

// FuzzECSOption feeds the data of a query's client subnet option to both
// of dnsd's readers of it, the fast path's (parseFastECS, from the packet
// bytes) and the slow path's (parseECS, from miekg's unpacking). The two
// paths answer with the same bytes; what the fast path reads, the slow
// path reads too; and a reply to a query whose option was used echoes its
// family, source prefix length and masked address with a scope no longer
// than the family's addresses, while a reply to one whose option was
// ignored carries none. The seed corpus is in
// testdata/fuzz/FuzzECSOption.
func FuzzECSOption(f *testing.F) {
	p := newFastPair(f, nil)
	for _, s := range []string{"198.51.100.0/24", "2001:db8:1::/48", "0.0.0.0/0", "198.51.100.128/25", "192.0.2.1/32"} {
		e := ecs(s)
		b := binary.BigEndian.AppendUint16(nil, e.Family)
		b = append(b, e.SourceNetmask, 0)
		a := e.Address.To4()
		if e.Family == 2 {
			a = e.Address.To16()
		}
		f.Add(false, append(b, a[:(e.SourceNetmask+7)/8]...))
	}
	f.Add(true, []byte{0, 1, 24, 0, 198, 51, 100})
	f.Add(false, []byte{0, 1, 24, 8, 198, 51, 100})       // a scope in the query
	f.Add(false, []byte{0, 1, 33, 0, 198, 51, 100, 1, 2}) // longer than the family
	f.Add(false, []byte{0, 3, 8, 0, 1})                   // unknown family
	f.Add(false, []byte{0, 1, 16, 0, 198, 51, 100})       // one byte too many
	f.Add(false, []byte{0, 1, 20, 0, 198, 51, 0xff})      // bits set past the source prefix
	f.Fuzz(func(t *testing.T, static bool, opt []byte) {
		if len(opt) > 512 {
			return
		}
		name := "www.example.org."
		if static {
			name = "static.example.org."
		}
		pkt := ecsQuery(name, opt)
		got, fast := answerUDP(p.fast, pkt)
		want, _ := answerUDP(p.slow, pkt)
		if !bytes.Equal(got, want) {
			t.Fatalf("packet %x\nfast: %x\nslow: %x", pkt, got, want)
		}
		m := new(dns.Msg)
		if err := m.Unpack(pkt); err != nil {
			if fast {
				t.Fatalf("the fast path answered a query that does not unpack (%v)", err)
			}
			return
		}
		var info reqInfo
		if o := subnetOption(m); o != nil {
			parseECS(o, &info)
		}
		var q fastQuery
		if parseFast(pkt, &q) && q.hasECS {
			if !info.hasECS || q.ecs != info.ecs || q.ecsFam != info.ecsFam || q.ecsSrc != info.ecsSrc {
				t.Fatalf("option %x: the fast path reads %v (family %d, /%d), the slow path %v (family %d, /%d, used %v)",
					opt, q.ecs, q.ecsFam, q.ecsSrc, info.ecs, info.ecsFam, info.ecsSrc, info.hasECS)
			}
		}
		reply := new(dns.Msg)
		if got == nil || reply.Unpack(got) != nil || reply.Rcode != dns.RcodeSuccess {
			return
		}
		echo := subnetOption(reply)
		switch {
		case !info.hasECS && echo != nil:
			t.Fatalf("option %x is ignored, but the reply carries %v", opt, echo)
		case info.hasECS && echo == nil:
			t.Fatalf("option %x (%v) is used, but the reply carries none", opt, info.ecs)
		case info.hasECS:
			addr := net.IP(info.ecs.Masked().Addr().AsSlice())
			if echo.Family != info.ecsFam || echo.SourceNetmask != info.ecsSrc || !echo.Address.Equal(addr) ||
				int(echo.SourceScope) > info.ecs.Addr().BitLen() {
				t.Fatalf("option %x (%v): the reply carries %v", opt, info.ecs, echo)
			}
		}
	})
}
