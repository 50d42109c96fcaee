package geo

import (
	"net/netip"
	"testing"
)

// FuzzClientPrefix checks ClientPrefix and ReplyScope for any source
// address and ECS prefix, valid or not. The prefix to locate by is masked,
// never IPv4-mapped, never longer than MaxPrefixV4 or MaxPrefixV6, and
// covers the trusted ECS network or else the source address; entered
// again as a trusted ECS prefix it gives itself. The reply scope is
// within the ECS option's family: 0 for an opt-out, the source length for
// an untrusted prefix. The seed corpus is in
// testdata/fuzz/FuzzClientPrefix.
func FuzzClientPrefix(f *testing.F) {
	ip := func(s string) []byte { return netip.MustParseAddr(s).AsSlice() }
	f.Add(ip("192.0.2.1"), ip("198.51.100.7"), 24, true)
	f.Add(ip("192.0.2.1"), ip("198.51.100.7"), 32, true)
	f.Add(ip("192.0.2.1"), ip("0.0.0.0"), 0, true)
	f.Add(ip("192.0.2.1"), ip("10.1.2.3"), 24, true)
	f.Add(ip("::ffff:192.0.2.1"), ip("::ffff:198.51.100.7"), 120, true)
	f.Add(ip("::ffff:192.0.2.1"), ip("::ffff:0.0.0.0"), 96, true)
	f.Add(ip("2001:db8::1"), ip("2001:db8:1:2::"), 64, true)
	f.Add(ip("fe80::1"), ip("2001:db8::"), 129, true)
	f.Add([]byte{}, []byte{}, 0, false)
	f.Fuzz(func(t *testing.T, srcb, ecsb []byte, bits int, hasECS bool) {
		src, _ := netip.AddrFromSlice(srcb)
		ea, _ := netip.AddrFromSlice(ecsb)
		ecs := netip.PrefixFrom(ea, bits) // invalid when bits does not fit
		p := ClientPrefix(src, ecs, hasECS)
		limit := func(a netip.Addr) int {
			if a.Is4() {
				return MaxPrefixV4
			}
			return MaxPrefixV6
		}
		if p.IsValid() && (p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" || p.Bits() > limit(p.Addr())) {
			t.Fatalf("ClientPrefix(%v, %v, %v) = %v: not masked, mapped or too long", src, ecs, hasECS, p)
		}
		switch {
		case hasECS && TrustedECS(ecs):
			u := unmapPrefix(ecs.Masked())
			if !p.Contains(u.Addr()) || p.Bits() != min(u.Bits(), limit(u.Addr())) {
				t.Fatalf("ClientPrefix(%v, %v, true) = %v: does not cover the ECS network %v", src, ecs, p, u)
			}
			if TrustedECS(p) {
				if q := ClientPrefix(netip.Addr{}, p, true); q != p {
					t.Fatalf("ClientPrefix of %v as ECS = %v", p, q)
				}
			}
		case src.IsValid():
			a := src.Unmap()
			if !p.Contains(a) || p.Bits() != min(a.BitLen(), limit(a)) {
				t.Fatalf("ClientPrefix(%v, %v, %v) = %v: does not cover the source", src, ecs, hasECS, p)
			}
		default:
			if p != (netip.Prefix{}) {
				t.Fatalf("ClientPrefix(%v, %v, %v) = %v, want the zero prefix", src, ecs, hasECS, p)
			}
		}
		// What Locate answers a prefix of the ECS family with.
		fam := limit(unmapPrefix(ecs).Addr())
		for _, scope := range []int{0, MaxPrefixV4, MaxPrefixV6} {
			s := ReplyScope(ecs, Result{Scope: min(scope, fam)})
			switch {
			case !ecs.IsValid() || ECSOptOut(ecs):
				if s != 0 {
					t.Fatalf("ReplyScope(%v) = %d, want 0", ecs, s)
				}
			case !TrustedECS(ecs):
				if s != ecs.Bits() {
					t.Fatalf("ReplyScope(%v) of an untrusted prefix = %d", ecs, s)
				}
			case s < 0 || s > ecs.Addr().BitLen():
				t.Fatalf("ReplyScope(%v, scope %d) = %d, outside the family", ecs, scope, s)
			}
		}
	})
}
