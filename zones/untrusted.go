package zones

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"strings"
)

// Bounds of the members added at run time (GROUP-ADD), on top of the
// rules of the config file's members.
const (
	// MaxRuntimeCapacity bounds a run-time member's capacity, in load units.
	MaxRuntimeCapacity = 1e9
	// MaxRuntimeWeight bounds a run-time member's weight.
	MaxRuntimeWeight = 1000
)

// broadcast is the limited broadcast address, never a member's.
var broadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// special are the ranges that are not globally reachable (the IANA
// special-purpose address registries), with what they are; a run-time
// member may have an address in one only when its group has
// allow_private. Multicast, unspecified and broadcast addresses are
// refused before these are looked at.
var special = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "in \"this network\" 0.0.0.0/8"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private (RFC 1918)"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (RFC 6598)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private (RFC 1918)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved for IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "reserved for documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay anycast address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private (RFC 1918)"},
	{netip.MustParsePrefix("198.18.0.0/15"), "reserved for benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "reserved for documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "reserved for documentation"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/23"), "reserved for IETF protocol assignments"},
	{netip.MustParsePrefix("2001:db8::/32"), "reserved for documentation"},
	{netip.MustParsePrefix("3fff::/20"), "reserved for documentation"},
	{netip.MustParsePrefix("fc00::/7"), "private (unique local)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
}

// globalUnicastV6 is where IPv6 global unicast addresses are allocated.
var globalUnicastV6 = netip.MustParsePrefix("2000::/3")

// NotGlobal says why a is not a globally reachable unicast address ("is
// loopback"), or returns "" when it is one: where a run-time member of a
// group without allow_private may be, and where its probes may connect
// (probe.ClientOptions.Public). a is unmapped and valid.
func NotGlobal(a netip.Addr) string {
	if a.IsUnspecified() || a.IsMulticast() || a == broadcast {
		return "is not a unicast address"
	}
	for _, s := range special {
		if s.prefix.Contains(a) {
			return "is " + s.what
		}
	}
	if a.Is6() && !globalUnicastV6.Contains(a) {
		return "is outside the IPv6 global unicast range 2000::/3"
	}
	if sixToFour.Contains(a) {
		// 6to4 carries an IPv4 address in bits 16..47, which a relay
		// turns back into that IPv4 address.
		b := a.As16()
		if why := NotGlobal(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]})); why != "" {
			return "is 6to4 for an IPv4 address that " + why
		}
	}
	return ""
}

// sixToFour is the 6to4 prefix (RFC 3056).
var sixToFour = netip.MustParsePrefix("2002::/16")

// untrusted applies the rules of run-time members to m, a member of g
// added through the admin API that member has already checked (so its
// addresses are valid, unmapped and unicast): globally reachable
// addresses and probe URLs unless g allows private ones, a host name
// made of letters, digits and hyphens, capacity and weight within
// bounds. Errors name the member's field: `addresses[0]: 10.0.0.1 is
// private (RFC 1918)`. A stolen group secret can then at most add
// members that a resolver could reach anyway, and no more than
// max_runtime_members of them (see WithMembers).
func (b *builder) untrusted(gobj string, g *GroupConfig, m *MemberConfig) {
	obj := fmt.Sprintf("%s: member %q", gobj, m.Name)
	if !g.AllowPrivate {
		for i, a := range m.Addresses {
			if !a.IsValid() {
				continue // member said so
			}
			if why := NotGlobal(a.Unmap()); why != "" {
				b.errorf("", "%s: addresses[%d]: %s %s (the group does not allow_private)", obj, i, a, why)
			}
		}
	}
	if m.Host != "" {
		if why := badHostName(m.Host, g.AllowPrivate); why != "" {
			b.errorf("", "%s: host: %q %s", obj, m.Host, why)
		}
	}
	if m.Capacity > MaxRuntimeCapacity && !math.IsInf(m.Capacity, 1) {
		b.errorf("", "%s: capacity: %g is above %g", obj, m.Capacity, float64(MaxRuntimeCapacity))
	}
	if m.Weight > MaxRuntimeWeight && !math.IsInf(m.Weight, 1) {
		b.errorf("", "%s: weight: %g is above %d", obj, m.Weight, MaxRuntimeWeight)
	}
	if m.Probe != "" {
		if u, err := url.Parse(m.Probe); err == nil && u.Host != "" {
			host := u.Hostname()
			if a, err := netip.ParseAddr(host); err == nil {
				a = a.Unmap()
				if a.IsUnspecified() || a.IsMulticast() || a == broadcast {
					b.errorf("", "%s: probe: %s is not a unicast address", obj, a)
				} else if why := NotGlobal(a); why != "" && !g.AllowPrivate {
					b.errorf("", "%s: probe: %s %s (the group does not allow_private)", obj, a, why)
				}
			} else if why := badHostName(host, g.AllowPrivate); why != "" {
				b.errorf("", "%s: probe: host %q %s", obj, host, why)
			}
		}
	}
}

// badHostName says what is wrong with host as a run-time member's host
// name, or returns "": labels of letters, digits and hyphens (not first
// or last), at most 63 bytes each and 253 in all, a top-level label
// that is not all digits; unless private is allowed, at least two
// labels and not localhost.
func badHostName(host string, private bool) string {
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return "is not a host name: want 1 to 253 characters"
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "is not a host name: every label must be 1 to 63 characters"
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "is not a host name: a label starts or ends with a hyphen"
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return "is not a host name: want letters, digits, hyphens and dots"
			}
		}
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "is not a host name: the last label is all digits"
	}
	if private {
		return ""
	}
	last := strings.ToLower(labels[len(labels)-1])
	switch {
	case last == "localhost":
		return "is localhost (the group does not allow_private)"
	case len(labels) < 2:
		return "is not fully qualified (the group does not allow_private)"
	}
	return ""
}
