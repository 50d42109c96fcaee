package geo

import (
	"net/netip"
	"testing"
)

func TestClientPrefix(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		ecs    string // "" for no ECS option
		hasECS bool
		want   string // "" for the zero Prefix
	}{
		// Without ECS: the source address, truncated.
		{"v4 source truncated to /24", "198.51.100.77", "", false, "198.51.100.0/24"},
		{"v6 source truncated to /56", "2001:db8:1:2345:6789::1", "", false, "2001:db8:1:2300::/56"},
		{"IPv4-mapped source", "::ffff:203.0.113.9", "", false, "203.0.113.0/24"},
		{"loopback source is still used", "127.0.0.1", "", false, "127.0.0.0/24"},
		{"private source is still used", "10.1.2.3", "", false, "10.1.2.0/24"},
		{"zoned source", "fe80::1%eth0", "", false, "fe80::/56"},
		{"invalid source", "", "", false, ""},

		// Trusted ECS: the ECS prefix, truncated.
		{"ECS /24 kept", "192.0.2.53", "198.51.100.0/24", true, "198.51.100.0/24"},
		{"ECS /32 truncated to /24", "192.0.2.53", "203.0.113.77/32", true, "203.0.113.0/24"},
		{"ECS /20 kept", "192.0.2.53", "198.51.96.0/20", true, "198.51.96.0/20"},
		{"ECS host bits cleared", "192.0.2.53", "198.51.100.77/24", true, "198.51.100.0/24"},
		{"ECS /128 truncated to /56", "192.0.2.53", "2001:db8:3:ab12::1/128", true, "2001:db8:3:ab00::/56"},
		{"ECS v6 /48 kept", "2001:db8:ffff::53", "2001:db8:2::/48", true, "2001:db8:2::/48"},
		{"ECS v6 for a v4 source", "192.0.2.53", "2001:db8:1::/48", true, "2001:db8:1::/48"},
		{"ECS IPv4-mapped", "192.0.2.53", "::ffff:198.51.100.0/120", true, "198.51.100.0/24"},
		{"ECS IPv4-mapped /128", "192.0.2.53", "::ffff:198.51.100.9/128", true, "198.51.100.0/24"},
		{"ECS with invalid source", "", "203.0.113.0/24", true, "203.0.113.0/24"},

		// ECS present but hasECS false: ignored.
		{"ECS not flagged", "192.0.2.53", "198.51.100.0/24", false, "192.0.2.0/24"},

		// Opt-out and untrusted ECS: the source address.
		{"opt-out v4 /0", "192.0.2.53", "0.0.0.0/0", true, "192.0.2.0/24"},
		{"opt-out v6 /0", "2001:db8:2::53", "::/0", true, "2001:db8:2::/56"},
		{"untrusted loopback", "192.0.2.53", "127.0.0.1/32", true, "192.0.2.0/24"},
		{"untrusted private 10/8", "192.0.2.53", "10.1.2.0/24", true, "192.0.2.0/24"},
		{"untrusted private 192.168", "192.0.2.53", "192.168.1.0/24", true, "192.0.2.0/24"},
		{"untrusted link-local", "192.0.2.53", "169.254.1.0/24", true, "192.0.2.0/24"},
		{"untrusted multicast", "192.0.2.53", "224.0.0.0/24", true, "192.0.2.0/24"},
		{"untrusted v6 loopback", "2001:db8:2::53", "::1/128", true, "2001:db8:2::/56"},
		{"untrusted v6 ULA", "2001:db8:2::53", "fd00:1::/48", true, "2001:db8:2::/56"},
		{"untrusted v6 link-local", "2001:db8:2::53", "fe80::/64", true, "2001:db8:2::/56"},
		{"untrusted unspecified /8", "192.0.2.53", "0.0.0.0/8", true, "192.0.2.0/24"},
		{"untrusted mapped private", "192.0.2.53", "::ffff:10.0.0.0/104", true, "192.0.2.0/24"},
		{"untrusted mapped /96", "192.0.2.53", "::ffff:0:0/96", true, "192.0.2.0/24"},
		{"invalid ECS", "192.0.2.53", "", true, "192.0.2.0/24"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var src netip.Addr
			if tt.src != "" {
				src = netip.MustParseAddr(tt.src)
			}
			var ecs, want netip.Prefix
			if tt.ecs != "" {
				ecs = netip.MustParsePrefix(tt.ecs)
			}
			if tt.want != "" {
				want = netip.MustParsePrefix(tt.want)
			}
			if got := ClientPrefix(src, ecs, tt.hasECS); got != want {
				t.Errorf("ClientPrefix(%s, %s, %v) = %s, want %s", tt.src, tt.ecs, tt.hasECS, got, want)
			}
		})
	}
}

func TestECSOptOut(t *testing.T) {
	tests := []struct {
		name string
		ecs  string
		want bool
	}{
		{"v4 /0", "0.0.0.0/0", true},
		{"v6 /0", "::/0", true},
		{"v4 /0 with an address", "198.51.100.0/0", true},
		{"v4 /24", "198.51.100.0/24", false},
		{"v6 /1", "::/1", false},
		{"absent", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ecs netip.Prefix
			if tt.ecs != "" {
				ecs = netip.MustParsePrefix(tt.ecs)
			}
			if got := ECSOptOut(ecs); got != tt.want {
				t.Errorf("ECSOptOut(%s) = %v, want %v", tt.ecs, got, tt.want)
			}
		})
	}
}

func TestTrustedECS(t *testing.T) {
	tests := []struct {
		name string
		ecs  string
		want bool
	}{
		{"TEST-NET-1", "192.0.2.0/24", true},
		{"TEST-NET-2", "198.51.100.0/24", true},
		{"TEST-NET-3", "203.0.113.0/24", true},
		{"public /16", "8.8.0.0/16", true},
		{"v6 documentation", "2001:db8:1::/48", true},
		{"v6 public", "2a00:1450::/32", true},
		{"mapped documentation", "::ffff:192.0.2.0/120", true},
		{"opt-out", "0.0.0.0/0", false},
		{"loopback", "127.0.0.0/8", false},
		{"private 10/8", "10.0.0.0/8", false},
		{"private 172.16/12", "172.16.0.0/12", false},
		{"link-local", "169.254.0.0/16", false},
		{"multicast", "239.1.0.0/16", false},
		{"broadcast", "255.255.255.255/32", false},
		{"v6 loopback", "::1/128", false},
		{"v6 ULA", "fc00::/7", false},
		{"v6 link-local", "fe80::/10", false},
		{"v6 multicast", "ff02::/16", false},
		{"v6 unspecified /8", "::/8", false},
		{"absent", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ecs netip.Prefix
			if tt.ecs != "" {
				ecs = netip.MustParsePrefix(tt.ecs)
			}
			if got := TrustedECS(ecs); got != tt.want {
				t.Errorf("TrustedECS(%s) = %v, want %v", tt.ecs, got, tt.want)
			}
		})
	}
}

// TestECSFlow runs ClientPrefix, Locate and ReplyScope together, as dnsd
// does, against the committed fixture.
func TestECSFlow(t *testing.T) {
	l := newTestLocator(t, Options{MMDB: fixtureMMDB, Static: staticTable(), Default: fallback})
	tests := []struct {
		name      string
		src, ecs  string
		wantLoc   string // country of the answer, "" for the default
		wantScope int
	}{
		{"ECS /24 in a /25 region", "10.9.9.9", "198.51.100.0/24", "DE", 24},
		{"ECS upper half of the /24", "10.9.9.9", "198.51.100.128/25", "DE", 24},
		{"ECS /32 truncated", "10.9.9.9", "192.0.2.200/32", "SG", 24},
		{"ECS shorter than the region", "10.9.9.9", "192.0.2.0/23", "SG", 24},
		{"ECS v6 /56 in a /48", "10.9.9.9", "2001:db8:3:4500::/56", "SG", 48},
		{"ECS v6 nested /56", "10.9.9.9", "2001:db8:1:ff00::/56", "GB", 56},
		{"ECS v6 /64 truncated", "10.9.9.9", "2001:db8:1:ff00::/64", "GB", 56},
		{"ECS static wins", "10.9.9.9", "203.0.113.0/24", "CA", 24},
		{"ECS unknown", "10.9.9.9", "100.64.0.0/24", "", 2},
		{"ECS unknown /16", "10.9.9.9", "100.64.0.0/16", "", 2},
		{"ECS IPv4-mapped", "10.9.9.9", "::ffff:198.51.100.0/120", "DE", 120},
		{"opt-out: resolver located, scope 0", "198.51.100.53", "0.0.0.0/0", "DE", 0},
		{"opt-out v6", "2001:db8:2::53", "::/0", "CA", 0},
		{"untrusted ECS: resolver located, scope of ECS", "192.0.2.53", "10.1.2.0/24", "SG", 24},
		{"untrusted loopback /32", "192.0.2.53", "127.0.0.1/32", "SG", 32},
		{"untrusted ECS, private resolver", "10.1.2.3", "192.168.0.0/16", "JP", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, ecs := netip.MustParseAddr(tt.src), netip.MustParsePrefix(tt.ecs)
			r := l.Locate(ClientPrefix(src, ecs, true))
			if r.Loc.Country != tt.wantLoc {
				t.Errorf("country = %q (%+v), want %q", r.Loc.Country, r, tt.wantLoc)
			}
			if got := ReplyScope(ecs, r); got != tt.wantScope {
				t.Errorf("ReplyScope(%s, %+v) = %d, want %d", ecs, r, got, tt.wantScope)
			}
		})
	}
}

func TestReplyScope(t *testing.T) {
	r := Result{Loc: frankfurt, Scope: 20, Source: SourceMMDB}
	tests := []struct {
		name string
		ecs  string
		want int
	}{
		{"trusted takes the result's scope", "198.51.100.0/24", 20},
		{"trusted scope may exceed source", "198.51.0.0/16", 20},
		{"opt-out is 0", "0.0.0.0/0", 0},
		{"untrusted is the source length", "10.0.0.0/8", 8},
		{"mapped trusted adds 96", "::ffff:198.51.100.0/120", 116},
		{"absent is 0", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ecs netip.Prefix
			if tt.ecs != "" {
				ecs = netip.MustParsePrefix(tt.ecs)
			}
			if got := ReplyScope(ecs, r); got != tt.want {
				t.Errorf("ReplyScope(%s) = %d, want %d", tt.ecs, got, tt.want)
			}
		})
	}
}
