package geo

import "net/netip"

// ECSOptOut reports whether ecs, the prefix of a query's EDNS Client
// Subnet option, is an opt-out: SOURCE PREFIX-LENGTH 0 means "do not use
// my client's address" (RFC 7871 §7.1.2). Such a query is located by the
// resolver's own address, as a query without ECS would be (the RFC expects
// exactly that of an authoritative server), and the reply's scope is 0 (see
// [ReplyScope]): the resolver keeps such an answer apart and serves it
// only to other opt-out queries.
func ECSOptOut(ecs netip.Prefix) bool {
	return ecs.IsValid() && ecs.Bits() == 0
}

// TrustedECS reports whether the address of ecs may be used to locate a
// client: only a global unicast network is trusted (documentation ranges
// such as 192.0.2.0/24 or 2001:db8::/32 count as global); loopback,
// private (RFC 1918, fc00::/7), link-local, multicast and unspecified
// networks are not, since they say nothing about where a client is. An
// opt-out (see [ECSOptOut]) is not trusted either: it carries no address.
// IPv4-mapped IPv6 prefixes are judged as the IPv4 prefix they stand for.
func TrustedECS(ecs netip.Prefix) bool {
	if !ecs.IsValid() || ecs.Bits() == 0 {
		return false
	}
	ecs = unmapPrefix(ecs.Masked())
	if ecs.Bits() == 0 { // ::ffff:0:0/96
		return false
	}
	a := ecs.Addr()
	return a.IsGlobalUnicast() && !a.IsPrivate()
}

// ClientPrefix is the prefix to locate a query by: the ECS source prefix
// when the query has one (hasECS) and it is trusted (see [TrustedECS]),
// else the address the query came from (src), which is also what an
// opt-out (see [ECSOptOut]) gets. The result is never more specific than
// [MaxPrefixV4] (/24) or [MaxPrefixV6] (/56), for privacy: a /32 becomes
// its /24, a /128 its /56. IPv4-mapped IPv6 (a dual-stack socket's view
// of an IPv4 client) is unmapped. An invalid src without a usable ECS
// gives the zero Prefix, which [Locator.Locate] answers with its default.
func ClientPrefix(src netip.Addr, ecs netip.Prefix, hasECS bool) netip.Prefix {
	if hasECS && TrustedECS(ecs) {
		return truncate(unmapPrefix(ecs.Masked()))
	}
	if !src.IsValid() {
		return netip.Prefix{}
	}
	src = src.Unmap().WithZone("")
	return truncate(netip.PrefixFrom(src, src.BitLen()))
}

// ReplyScope is the SCOPE PREFIX-LENGTH for the ECS option of the reply to
// a query whose ECS prefix was ecs, when the answer came from r =
// Locate(ClientPrefix(src, ecs, true)):
//   - an opt-out (SOURCE PREFIX-LENGTH 0) gets 0;
//   - an untrusted ECS prefix gets its own length: the answer depended on
//     the resolver's address, not on the ECS network, so it must be cached
//     for that network only and not be spread over the whole family;
//   - a trusted one gets r.Scope (in the family of the ECS option, so
//     +96 for an IPv4-mapped IPv6 option).
func ReplyScope(ecs netip.Prefix, r Result) int {
	switch {
	case !ecs.IsValid() || ECSOptOut(ecs):
		return 0
	case !TrustedECS(ecs):
		return ecs.Bits()
	case ecs.Addr().Is4In6() && ecs.Bits() >= 96:
		return r.Scope + 96
	}
	return r.Scope
}

// truncate shortens p to at most MaxPrefixV4 or MaxPrefixV6 bits.
func truncate(p netip.Prefix) netip.Prefix {
	limit := MaxPrefixV6
	if p.Addr().Is4() {
		limit = MaxPrefixV4
	}
	if p.Bits() > limit {
		p = netip.PrefixFrom(p.Addr(), limit)
	}
	return p.Masked()
}
