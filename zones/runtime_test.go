package zones

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
)

// globalAddr is a globally reachable address (just outside the
// documentation range 192.0.2.0/24), as run-time members need; the tests
// never send it anything.
const globalAddr = "192.0.3.99"

func TestWithMembers(t *testing.T) {
	set, err := Load(filepath.Join("testdata", "good", "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var group string
	for name := range set.Groups {
		group = name
		break
	}
	static := len(set.Groups[group].Members)
	good := MemberConfig{Name: "new1", Host: "new1.example.org", Addresses: []netip.Addr{netip.MustParseAddr(globalAddr)}, Capacity: 10}
	cases := []struct {
		name    string
		extra   map[string][]MemberConfig
		wantErr string
		is      error
	}{
		{"valid member", map[string][]MemberConfig{group: {good}}, "", nil},
		{"unknown group", map[string][]MemberConfig{"nope.example.org.": {good}}, `group "nope.example.org."`, ErrUnknownGroup},
		{"duplicate of a static member", map[string][]MemberConfig{group: {{Name: set.Groups[group].Members[0].Name, Host: "x.example.org", Addresses: good.Addresses, Capacity: 1}}}, "already a member", ErrDuplicateMember},
		{"twice in one call", map[string][]MemberConfig{group: {good, good}}, "already a member", ErrDuplicateMember},
		{"invalid: no capacity, no address", map[string][]MemberConfig{group: {{Name: "bad", Host: "bad.example.org"}}}, "capacity must be > 0", nil},
		{"bandwidth", map[string][]MemberConfig{group: {{Name: "bw1", Host: "bw1.example.org", Addresses: good.Addresses, Capacity: 1, Bandwidth: 125e6}}}, "", nil},
		{"negative bandwidth", map[string][]MemberConfig{group: {{Name: "bw1", Host: "bw1.example.org", Addresses: good.Addresses, Capacity: 1, Bandwidth: -1}}}, `member "bw1": bandwidth -1 B/s: want 0 (no limit) or a positive rate`, nil},
		{"bandwidth without its unit", map[string][]MemberConfig{group: {{Name: "bw1", Host: "bw1.example.org", Addresses: good.Addresses, Capacity: 1, Bandwidth: 100}}}, `member "bw1": bandwidth 100 B/s is below 1000 B/s`, nil},
		{"invalid name", map[string][]MemberConfig{group: {{Name: "Bad Name", Host: "b.example.org", Addresses: good.Addresses, Capacity: 1}}}, "name must match", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := set.WithMembers(tc.extra)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				g := out.Groups[group]
				if len(g.Members) != static+1 || !g.Members[static].Runtime || g.Members[static].Weight != DefaultWeight {
					t.Errorf("members %+v: want the new one last, runtime, defaulted", g.Members)
				}
				if len(set.Groups[group].Members) != static {
					t.Error("WithMembers changed the original set")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if strings.Contains(err.Error(), ".yaml:") {
				t.Errorf("a run-time error names a config file position: %v", err)
			}
		})
	}
}

// TestRuntimeMemberRules: what GROUP-ADD refuses beyond the config file's
// rules, each error naming the member's field, and what allow_private
// lets through.
func TestRuntimeMemberRules(t *testing.T) {
	strict, err := groupYAML(t, "    secret: s")
	if err != nil {
		t.Fatal(err)
	}
	private, err := groupYAML(t, "    secret: s\n    allow_private: true")
	if err != nil {
		t.Fatal(err)
	}
	const group = "www.example.org."
	member := func(host string, addrs ...string) MemberConfig {
		m := MemberConfig{Name: "new1", Host: host, Capacity: 10}
		for _, a := range addrs {
			m.Addresses = append(m.Addresses, netip.MustParseAddr(a))
		}
		return m
	}
	with := func(m MemberConfig, f func(*MemberConfig)) MemberConfig { f(&m); return m }
	good := member("new1.example.org.", globalAddr, "2a00:1450::1")
	tests := []struct {
		name    string
		private bool // the group has allow_private
		m       MemberConfig
		want    string // error substring, "" for none
	}{
		{"global addresses", false, good, ""},
		{"IPv4-mapped global address", false, member("new1.example.org.", "::ffff:"+globalAddr), ""},
		{"multicast", false, member("new1.example.org.", globalAddr, "224.0.0.1"), `member "new1": addresses[1]: address 224.0.0.1 is not a unicast address`},
		{"multicast even with allow_private", true, member("new1.example.org.", "ff02::1"), `addresses[0]: address ff02::1 is not a unicast address`},
		{"unspecified", true, member("new1.example.org.", "0.0.0.0"), `addresses[0]: address 0.0.0.0 is not a unicast address`},
		{"broadcast", true, member("new1.example.org.", "255.255.255.255"), `addresses[0]: address 255.255.255.255 is not a unicast address`},
		{"address with a zone", true, member("new1.example.org.", "fe80::1%eth0"), `address fe80::1%eth0 has a zone`},
		{"loopback", false, member("new1.example.org.", globalAddr, "127.0.0.1"), `member "new1": addresses[1]: 127.0.0.1 is loopback (the group does not allow_private)`},
		{"IPv6 loopback", false, member("new1.example.org.", "::1"), `addresses[0]: ::1 is loopback`},
		{"mapped loopback", false, member("new1.example.org.", "::ffff:127.0.0.1"), `addresses[0]: 127.0.0.1 is loopback`},
		{"RFC 1918", false, member("new1.example.org.", "10.1.2.3"), `addresses[0]: 10.1.2.3 is private (RFC 1918)`},
		{"RFC 1918 172.16/12", false, member("new1.example.org.", "172.31.255.1"), `addresses[0]: 172.31.255.1 is private (RFC 1918)`},
		{"unique local", false, member("new1.example.org.", "fd00::2"), `addresses[0]: fd00::2 is private (unique local)`},
		{"link-local", false, member("new1.example.org.", "169.254.169.254"), `addresses[0]: 169.254.169.254 is link-local`},
		{"IPv6 link-local", false, member("new1.example.org.", "fe80::1"), `addresses[0]: fe80::1 is link-local`},
		{"shared address space", false, member("new1.example.org.", "100.64.0.1"), `is shared address space (RFC 6598)`},
		{"documentation", false, member("new1.example.org.", "192.0.2.10"), `addresses[0]: 192.0.2.10 is reserved for documentation`},
		{"IPv6 documentation", false, member("new1.example.org.", "2001:db8::10"), `addresses[0]: 2001:db8::10 is reserved for documentation`},
		{"this network", false, member("new1.example.org.", "0.1.2.3"), `is in "this network" 0.0.0.0/8`},
		{"reserved", false, member("new1.example.org.", "240.0.0.1"), `addresses[0]: 240.0.0.1 is reserved`},
		{"outside 2000::/3", false, member("new1.example.org.", "4000::1"), `is outside the IPv6 global unicast range 2000::/3`},
		{"NAT64 of a private address", false, member("new1.example.org.", "64:ff9b::a00:1"), `is outside the IPv6 global unicast range 2000::/3`},
		{"6to4 of a private address", false, member("new1.example.org.", "2002:a00:1::1"), `addresses[0]: 2002:a00:1::1 is 6to4 for an IPv4 address that is private (RFC 1918)`},
		{"6to4 of loopback", false, member("new1.example.org.", "2002:7f00:1::1"), `is 6to4 for an IPv4 address that is loopback`},
		{"6to4 of a public address", false, member("new1.example.org.", "2002:808:808::1"), ""},
		{"private with allow_private", true, member("new1.example.org.", "127.0.9.1", "10.0.0.1", "fd00::1", "192.0.2.1"), ""},
		{"host with an underscore", false, member("new_1.example.org.", globalAddr), `member "new1": host: "new_1.example.org." is not a host name: want letters, digits, hyphens and dots`},
		{"host with a slash", true, member("evil.example.org/x", globalAddr), `host: "evil.example.org/x" is not a host name`},
		{"host with a hyphen at the end", false, member("new1-.example.org", globalAddr), `a label starts or ends with a hyphen`},
		{"host all digits", false, member("192.0.3.99", globalAddr), `the last label is all digits`},
		{"host with a long label", false, member(strings.Repeat("a", 64)+".example.org", globalAddr), `is not a domain name`},
		{"host with an empty label", false, member("a..example.org", globalAddr), `is not a domain name`},
		{"host localhost", false, member("localhost", globalAddr), `host: "localhost" is localhost`},
		{"host below localhost", false, member("a.localhost.", globalAddr), `is localhost`},
		{"single-label host", false, member("mirror", globalAddr), `is not fully qualified`},
		{"localhost with allow_private", true, member("localhost", "127.0.0.1"), ""},
		{"capacity above the bound", false, with(good, func(m *MemberConfig) { m.Capacity = 2e9 }), `member "new1": capacity: 2e+09 is above 1e+09`},
		{"capacity at the bound", false, with(good, func(m *MemberConfig) { m.Capacity = MaxRuntimeCapacity }), ""},
		{"weight above the bound", false, with(good, func(m *MemberConfig) { m.Weight = 1001 }), `member "new1": weight: 1001 is above 1000`},
		{"probe on a private address", false, with(good, func(m *MemberConfig) { m.Probe = "http://10.0.0.1:9100/v1/load" }), `member "new1": probe: 10.0.0.1 is private (RFC 1918)`},
		{"probe on the metadata address", false, with(good, func(m *MemberConfig) { m.Probe = "http://169.254.169.254/latest" }), `probe: 169.254.169.254 is link-local`},
		{"probe on IPv6 loopback", false, with(good, func(m *MemberConfig) { m.Probe = "http://[::1]:9100/v1/load" }), `probe: ::1 is loopback`},
		{"probe on localhost", false, with(good, func(m *MemberConfig) { m.Probe = "http://localhost:9100/v1/load" }), `probe: host "localhost" is localhost`},
		{"probe on multicast", true, with(good, func(m *MemberConfig) { m.Probe = "http://224.0.0.1/" }), `probe: 224.0.0.1 is not a unicast address`},
		{"probe on a global address", false, with(good, func(m *MemberConfig) { m.Probe = "http://" + globalAddr + ":9100/v1/load" }), ""},
		{"probe on a host name", false, with(good, func(m *MemberConfig) { m.Probe = "https://new1.example.org/v1/load" }), ""},
		{"probe on loopback with allow_private", true, with(good, func(m *MemberConfig) { m.Probe = "http://127.0.0.1:9100/v1/load" }), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set := strict
			if tc.private {
				set = private
			}
			_, err := set.WithMembers(map[string][]MemberConfig{group: {tc.m}})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), `zones: group "www.example.org.": member "new1": `) {
				t.Errorf("error %q does not name the group and the member", err)
			}
		})
	}
}

// TestMaxRuntimeMembers: max_runtime_members caps the run-time members of
// a group (config members do not count); written as 0 it refuses every
// GROUP-ADD; out of range it is a config error.
func TestMaxRuntimeMembers(t *testing.T) {
	member := func(name string) MemberConfig {
		return MemberConfig{Name: name, Host: name + ".example.org", Addresses: []netip.Addr{netip.MustParseAddr(globalAddr)}, Capacity: 1}
	}
	tests := []struct {
		name  string
		keys  string
		batch [][]MemberConfig // added one call after the other
		want  []string         // per call: error substring, "" for none
	}{
		{"default", "", [][]MemberConfig{{member("a1")}}, []string{""}},
		{"cap of two", "    max_runtime_members: 2", [][]MemberConfig{{member("a1")}, {member("a2")}, {member("a3")}},
			[]string{"", "", `member "a3": too many run-time members: the group has 2, max_runtime_members is 2`}},
		{"cap in one call", "    max_runtime_members: 1", [][]MemberConfig{{member("a1"), member("a2")}},
			[]string{`member "a2": too many run-time members`}},
		{"zero: no GROUP-ADD", "    max_runtime_members: 0", [][]MemberConfig{{member("a1")}},
			[]string{"max_runtime_members is 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := groupYAML(t, "    secret: s\n"+tc.keys)
			if err != nil {
				t.Fatal(err)
			}
			for i, ms := range tc.batch {
				next, err := set.WithMembers(map[string][]MemberConfig{"www.example.org.": ms})
				if tc.want[i] == "" {
					if err != nil {
						t.Fatalf("call %d: %v", i+1, err)
					}
					set = next
					continue
				}
				if err == nil || !strings.Contains(err.Error(), tc.want[i]) || !errors.Is(err, ErrTooManyMembers) {
					t.Fatalf("call %d: error %v, want %q", i+1, err, tc.want[i])
				}
			}
		})
	}
	for _, bad := range []string{"-1", fmt.Sprint(MaxGroupMembers + 1), "4096"} {
		t.Run("out of range "+bad, func(t *testing.T) {
			_, err := groupYAML(t, "    max_runtime_members: "+bad)
			if want := `rotation.yaml:6:5: group "www.example.org.": max_runtime_members ` + bad + fmt.Sprintf(` must be in 0..%d`, MaxGroupMembers); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want %q", err, want)
			}
		})
	}
	t.Run("with the file's members over the group cap", func(t *testing.T) {
		// groupYAML's group has one member in the file.
		_, err := groupYAML(t, fmt.Sprint("    max_runtime_members: ", MaxGroupMembers))
		if want := fmt.Sprintf(`rotation.yaml:6:5: group "www.example.org.": max_runtime_members %d and 1 members in the file are more than %[1]d, the most a group may have`, MaxGroupMembers); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	})
	t.Run("at the group cap", func(t *testing.T) {
		room := MaxGroupMembers - 1
		set, err := groupYAML(t, fmt.Sprint("    secret: s\n    max_runtime_members: ", room))
		if err != nil {
			t.Fatal(err)
		}
		var ms []MemberConfig
		for i := range room + 1 {
			ms = append(ms, member(fmt.Sprintf("a%d", i)))
		}
		_, err = set.WithMembers(map[string][]MemberConfig{"www.example.org.": ms})
		if want := fmt.Sprintf(`member "a%d": too many run-time members`, room); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
		if _, err := set.WithMembers(map[string][]MemberConfig{"www.example.org.": ms[:room]}); err != nil {
			t.Errorf("%d run-time members and one in the file: %v", room, err)
		}
	})
	set, err := groupYAML(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if g := set.Group("www.example.org."); g.MaxRuntimeMembers != DefaultMaxRuntimeMembers || g.AllowPrivate {
		t.Errorf("defaults: max_runtime_members %d allow_private %v", g.MaxRuntimeMembers, g.AllowPrivate)
	}
}
