package zones

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestLoadGood(t *testing.T) {
	file := filepath.Join("testdata", "good", "dnsd.yaml")
	s, err := Load(file)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	c := s.Config
	if c.File != file {
		t.Errorf("File = %q", c.File)
	}
	if got := strings.Join(c.Listen, " "); got != "127.0.0.1:5300 [::1]:5300" {
		t.Errorf("Listen = %q", got)
	}
	sv := c.Server
	if sv.MaxUDPSize != 1400 || sv.TCPIdleTimeout.D() != 30*time.Second || sv.MaxTCPConnections != DefaultMaxTCPConnections ||
		sv.Version != DefaultVersion || sv.Identity != "ns1.example.org" {
		t.Errorf("Server = %+v", sv)
	}
	if len(sv.TSIG) != 1 || sv.TSIG[0].Name != "axfr-key." || sv.TSIG[0].Algorithm != dns.HmacSHA256 {
		t.Errorf("TSIG = %+v", sv.TSIG)
	}
	if len(s.Zones) != 1 || s.Zones[0].Origin != "example.org." || s.Zones[0].File != filepath.Join("testdata", "good", "example.org.zone") {
		t.Fatalf("Zones = %+v", s.Zones)
	}
	if got := c.Zones[0].AllowTransfer; len(got) != 2 || got[1] != netip.MustParsePrefix("::1/128") {
		t.Errorf("AllowTransfer = %v", got)
	}
	if s.Find("www.example.org.") != s.Zones[0] || s.Zone("EXAMPLE.org") != s.Zones[0] || s.Find("example.com.") != nil {
		t.Error("Find/Zone do not find the zone")
	}
	g := s.Group("WWW.Example.Org")
	if g == nil {
		t.Fatalf("Group(www) = nil; Groups = %v", s.Groups)
	}
	if g != &c.Groups[0] {
		t.Error("Groups does not point into Config.Groups")
	}
	if g.Name != "www.example.org." || g.TTL != (TTLBounds{Min: 30, Max: 120, Unseen: 45}) || g.Answers != DefaultAnswers ||
		g.Policy != (PolicyConfig{"geo-load", DefaultLowWatermark, 1.1}) || g.Secret != "s3cret-for-www-pushes" {
		t.Errorf("group = %+v", g)
	}
	if len(g.Members) != 2 {
		t.Fatalf("members = %+v", g.Members)
	}
	fra := g.Members[0]
	if fra.Weight != 1 || fra.Capacity != 1000 || fra.Bandwidth != 125e6 || g.Members[1].Bandwidth != 0 || fra.Location.Country != "DE" || *fra.Location.Lat != 50.1 ||
		len(fra.Addresses) != 2 || fra.Addresses[1] != netip.MustParseAddr("2001:db8::10") {
		t.Errorf("fra1 = %+v", fra)
	}
	if g.Members[1].Weight != 2 {
		t.Errorf("nyc1 weight = %v", g.Members[1].Weight)
	}

	// Build accepts its own output again and gives the same result.
	s2, err := Build(s.Config)
	if err != nil {
		t.Fatalf("Build(Set.Config): %v", err)
	}
	if g2 := s2.Group("www.example.org."); g2.Secret != g.Secret || g2.Policy != g.Policy {
		t.Errorf("rebuilt group = %+v", g2)
	}
}

func TestBuildDefaults(t *testing.T) {
	cfg := &Config{AllowNoZones: true}
	s, err := Build(cfg)
	if err != nil {
		t.Fatalf("Build(empty): %v", err)
	}
	c := s.Config
	if len(c.Listen) != 1 || c.Listen[0] != DefaultListen {
		t.Errorf("Listen = %v", c.Listen)
	}
	want := ServerConfig{
		Version:           DefaultVersion,
		MaxUDPSize:        DefaultMaxUDPSize,
		TCPIdleTimeout:    Duration(DefaultTCPIdleTimeout),
		MaxTCPConnections: DefaultMaxTCPConnections,
	}
	if c.Server.Version != want.Version || c.Server.MaxUDPSize != want.MaxUDPSize ||
		c.Server.TCPIdleTimeout != want.TCPIdleTimeout || c.Server.MaxTCPConnections != want.MaxTCPConnections {
		t.Errorf("Server = %+v, want %+v", c.Server, want)
	}
	if cfg.Listen != nil || cfg.Server.MaxUDPSize != 0 {
		t.Error("Build modified its argument")
	}
}

func TestParseVersionDisabled(t *testing.T) {
	cfg, err := Parse("v.yaml", []byte("allow_no_zones: true\nserver:\n  version: \"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Config.Server.Version != "" {
		t.Errorf("version = %q, want it disabled", s.Config.Server.Version)
	}
}

func TestLoadBad(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"unknown key", "unknown_key.yaml", []string{"unknown_key.yaml:14:9: groups[0].members[1].capcity: unknown field"}},
		{"wrong type", "wrong_type.yaml", []string{"wrong_type.yaml:2:17: server.max_udp_size: wrong type: want integer, got string"}},
		{"bad IP address", "bad_ip.yaml", []string{`bad_ip.yaml:9:33: groups[0].members[0].addresses[1]: invalid IP address "192.0.2.300"`}},
		{"syntax error", "syntax.yaml", []string{"syntax.yaml:2:1: "}},
		{"bandwidth without a unit we know", "bandwidth_unit.yaml", []string{`bandwidth_unit.yaml:11:20: groups[0].members[0].bandwidth: invalid bandwidth "1 Gigabit": want e.g. 1Gbit/s, 100Mbit/s or 12.5MB/s`}},
		{"negative bandwidth", "bandwidth_negative.yaml", []string{`bandwidth_negative.yaml:11:20: groups[0].members[0].bandwidth: invalid bandwidth "-100Mbit/s"`}},
		{"capacity 0", "capacity_zero.yaml", []string{`capacity_zero.yaml:10:9: group "www.example.org.": member "fra1": capacity must be > 0`}},
		{"duplicate member", "dup_member.yaml", []string{`dup_member.yaml:11:9: group "www.example.org.": member "fra1": defined twice`}},
		{"group outside every zone", "group_outside.yaml", []string{`group_outside.yaml:5:5: group "www.example.com.": not inside any served zone`}},
		{"group below a delegation", "group_below_cut.yaml", []string{`group_below_cut.yaml:5:5: group "www.sub.example.org.": at or below the delegation "sub.example.org."`}},
		{"group with a static A record", "group_static_a.yaml", []string{`group_static_a.yaml:5:5: group "static.example.org.": ` + filepath.Join("testdata", "bad", "ok.zone") + `:6 has a static A record`}},
		{"missing zone file", "missing_zone.yaml", []string{`missing_zone.yaml:3:5: zone "example.org.": open ` + filepath.Join("testdata", "bad", "does-not-exist.zone")}},
		{"bad zone file", "bad_zone_file.yaml", []string{`two_cnames.zone:5: second CNAME`}},
		{"server limits", "server_limits.yaml", []string{
			`server_limits.yaml:2:3: server: udp_sockets 1000 must be in 1..256 (leave it out for one per CPU)`,
			`server_limits.yaml:3:3: server: tcp_read_timeout -1s must be > 0`}},
		{"bad watermarks", "watermarks.yaml", []string{`watermarks.yaml:11:5: group "www.example.org.": watermarks: want 0 < low_watermark (0.95) <= high_watermark (0.8) <= 1.5`}},
		{"ttl unseen outside the bounds", "ttl_unseen.yaml", []string{`ttl_unseen.yaml:9:7: group "www.example.org.": ttl unseen 600 must be within [min 20, max 300]`}},
		{"report limits out of range", "report_limits.yaml", []string{
			`report_limits.yaml:5:3: health: report_max_skew 500ms must be in 1s..1h`,
			`report_limits.yaml:6:3: health: report_max_age 2h0m0s must be in 1s..1h`}},
		{"ca_file without a certificate", "ca_file.yaml", []string{`ca_file.yaml:5:3: health: ca_file ok.zone: no PEM certificate in it`}},
		{"ca_file missing", "ca_file_missing.yaml", []string{`ca_file_missing.yaml:5:3: health: ca_file: open ` + filepath.Join("testdata", "bad", "missing-ca.pem") + `: no such file or directory`}},
		{"bad TSIG secret", "tsig_secret.yaml", []string{`tsig_secret.yaml:4:7: tsig key "axfr-key.": secret is not valid base64`}},
		{"lat without lon", "lat_without_lon.yaml", []string{`lat_without_lon.yaml:11:9: group "www.example.org.": member "fra1": location: lat and lon go together`}},
		{"geo", "geo.yaml", []string{
			`geo.yaml:5:3: geo: mmdb: cannot use "nonexistent.mmdb": no such file or directory`,
			`geo.yaml:8:18: geo: network 198.51.100.0/24: location: country "DEU": want a two-letter code`,
			`geo.yaml:9:7: geo: network 198.51.100.0/24: listed twice`,
			`geo.yaml:10:18: geo: network 198.51.100.0/24: location: continent "XX"`,
			`geo.yaml:11:7: geo: network 203.0.113.0/24: location must say something (lat/lon, country or continent)`,
			`geo.yaml:12:13: geo: default: location: lat 95 must be in -90..90`,
		}},
		{"DNSSEC keys", "dnssec_keys.yaml", []string{
			`dnssec_keys.yaml:7:11: zone "example.org.": key "../keys/missing": open ` + filepath.Join("testdata", "keys", "missing.key") + `: no such file or directory`,
			`dnssec_keys.yaml:8:11: zone "example.org.": key "../keys/bad/Kexample.org.+008+11331": ` + filepath.Join("testdata", "keys", "bad", "Kexample.org.+008+11331.key") + `: algorithm RSASHA256`,
			`dnssec_keys.yaml:9:11: zone "example.org.": key "../keys/bad/Kmismatch": ` + filepath.Join("testdata", "keys", "bad", "Kmismatch.private") + `: the private key does not match the public key`,
			`dnssec_keys.yaml:10:11: zone "example.org.": key "../keys/bad/Kexample.net.+013+54111.key": ` + filepath.Join("testdata", "keys", "bad", "Kexample.net.+013+54111.key") + `: the key is for example.net.`,
			`dnssec_keys.yaml:11:11: zone "example.org.": key "../keys/Kexample.org.+013+45830.private": key tag 45830 is ../keys/Kexample.org.+013+45830's too`,
		}},
		{"duplicate zone", "dup_zone.yaml", []string{`dup_zone.yaml:4:5: zone "example.org.": served twice`}},
		{"bad policy", "bad_policy.yaml", []string{`bad_policy.yaml:12:7: group "www.example.org.": policy "random": want one of`}},
		{"secret_file retired", "secret_file.yaml", []string{`secret_file.yaml:12:5: groups[0].secret_file: retired key: write secret: {file: PATH}`}},
		{"empty file", "empty.yaml", []string{`empty.yaml:1:1: no zones: dnsd would answer every query REFUSED; list zones, or set allow_no_zones: true if that is meant`}},
		{"no zones", "no_zones.yaml", []string{`no_zones.yaml:2:1: no zones: dnsd would answer every query REFUSED`}},
		{"listen without port", "bad_listen.yaml", []string{`bad_listen.yaml:1:10: listen "127.0.0.1": want HOST:PORT`}},
		{"admin TLS and limits", "admin_tls.yaml", []string{
			`admin_tls.yaml:2:1: admin_tls: needs admin (the admin listen address)`,
			`admin_tls.yaml:2:13: admin_tls.cert_file: cannot use "missing.crt": no such file or directory`,
			`admin_tls.yaml:2:37: admin_tls.key_file: cannot use "missing.key": no such file or directory`,
			`admin_tls.yaml:3:16: limits.max_conns_per_client: must be >= 0 (0 is no cap), got -1`,
			`admin_tls.yaml:3:42: limits.max_header_bytes: must be in 4KiB..1MiB, got 1024`,
		}},
		{"cluster", "cluster.yaml", []string{
			`cluster.yaml:3:3: cluster: node "ns 1": want a name without slashes or white space`,
			`cluster.yaml:5:17: cluster: etcd endpoint "http://127.0.0.1": want http://host:port or https://host:port`,
			`cluster.yaml:5:37: cluster: etcd endpoint "ftp://127.0.0.1:2379": want http://host:port`,
			`cluster.yaml:5:61: cluster: etcd endpoint "http://u:p@127.0.0.1:2379": a host and port only`,
			`cluster.yaml:6:5: cluster: etcd prefix "transmirror": want a key path starting with /`,
			`cluster.yaml:7:5: cluster: etcd cert_file: stat ` + filepath.Join("testdata", "bad", "missing.crt"),
			`cluster.yaml:4:3: cluster: etcd cert_file and key_file go together`,
			`cluster.yaml:4:3: cluster: etcd username is required with a password`,
			`cluster.yaml:9:5: cluster: etcd lease_ttl 1.5s must be within 2s..5m0s`,
			`cluster.yaml:9:5: cluster: etcd lease_ttl 1.5s: etcd counts whole seconds`,
		}},
		{"quorum share of all nodes", "cluster_quorum.yaml", []string{`cluster_quorum.yaml:5:27: cluster: quorum down_share 1 must be within (0,1)`}},
		{"quorum share of no node", "cluster_quorum_zero.yaml", []string{`cluster_quorum_zero.yaml:7:5: cluster: quorum down_share 0 must be within (0,1)`}},
		{"cluster without etcd", "cluster_empty.yaml", []string{`cluster_empty.yaml:2:1: cluster: etcd.endpoints: at least one etcd client URL is required`}},
		{"every error at once", "many.yaml", []string{
			"many.yaml:2:3: server: max_udp_size 100 must be in 512..4096",
			`many.yaml:9:9: group "www.example.org.": member "FRA_1": name must match [a-z0-9-]+`,
			`many.yaml:10:9: group "www.example.org.": member "FRA_1": host "bad host" is not a domain name`,
			`many.yaml:11:9: group "www.example.org.": member "FRA_1": at least one address is required`,
			`many.yaml:15:20: group "www.example.org.": member "FRA_1": location: lat 91 must be in -90..90`,
			`many.yaml:15:37: group "www.example.org.": member "FRA_1": location: country "Deutschland"`,
			`many.yaml:15:59: group "www.example.org.": member "FRA_1": location: continent "XX"`,
			`many.yaml:12:9: group "www.example.org.": member "FRA_1": capacity must be > 0`,
			`many.yaml:13:9: group "www.example.org.": member "FRA_1": bandwidth 100 B/s is below 1000 B/s (8kbit/s): write the unit, e.g. 100Mbit/s (0: no limit)`,
			`many.yaml:14:9: group "www.example.org.": member "FRA_1": weight -2 must be > 0`,
			`many.yaml:16:9: group "www.example.org.": member "FRA_1": probe "ftp://example.org/"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join("testdata", "bad", tt.file)
			_, err := Load(file)
			if err == nil {
				t.Fatalf("Load(%s) succeeded", tt.file)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Load(%s) error:\n%v\nwant it to contain:\n%s", tt.file, err, want)
				}
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, filepath.Join("testdata", "bad")+string(filepath.Separator)) {
					t.Errorf("error line %q does not start with a file name", line)
				}
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tt.want) {
				t.Errorf("%d error lines, want %d:\n%v", n, len(tt.want), err)
			}
		})
	}
}

func TestFromFlags(t *testing.T) {
	zone := filepath.Join("testdata", "good", "example.org.zone")
	cfg, err := FromFlags([]string{"127.0.0.1:5300"}, []string{"example.org=" + zone})
	if err != nil {
		t.Fatalf("FromFlags: %v", err)
	}
	s, err := Build(cfg)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if z := s.Zone("example.org."); z == nil || z.File != zone {
		t.Fatalf("zone = %+v", s.Zones)
	}
	at := s.Config.Zones[0].AllowTransfer
	if len(at) != 2 || !at[0].Contains(netip.MustParseAddr("127.0.0.1")) || !at[1].Contains(netip.IPv6Loopback()) {
		t.Errorf("AllowTransfer = %v", at)
	}

	tests := []struct {
		name   string
		listen []string
		zones  []string
		want   string
	}{
		{"no equals", nil, []string{"foo"}, `zones: -zone "foo": want ORIGIN=FILE`},
		{"empty file", nil, []string{"foo="}, `-zone "foo=": want ORIGIN=FILE`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromFlags(tt.listen, tt.zones)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("FromFlags error = %v, want %q", err, tt.want)
			}
		})
	}

	// Build errors of flag configs have no position but name the object.
	cfg, err = FromFlags([]string{"nonsense"}, []string{"example.org=does-not-exist.zone"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(cfg)
	for _, want := range []string{`zones: listen "nonsense": want HOST:PORT`, `zones: zone "example.org.": open does-not-exist.zone`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Build error = %v, want %q", err, want)
		}
	}
}

func TestSetZonesLongestFirst(t *testing.T) {
	dir := t.TempDir()
	write := func(name, origin string) string {
		t.Helper()
		text := "$TTL 60\n@ SOA ns.example.net. h 1 2 3 4 5\n@ NS ns.example.net.\n"
		return writeFile(t, dir, name, text)
	}
	cfg := &Config{Zones: []ZoneConfig{
		{Origin: "org.", File: write("org.zone", "org.")},
		{Origin: "b.example.org.", File: write("b.zone", "b.example.org.")},
		{Origin: "example.org.", File: write("e.zone", "example.org.")},
	}, Groups: []GroupConfig{{
		Name:    "www.b.example.org",
		Members: []MemberConfig{{Name: "m1", Host: "m1.example.org", Addresses: []netip.Addr{netip.MustParseAddr("::ffff:192.0.2.1")}, Capacity: 1}},
	}}}
	s, err := Build(cfg)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	var got []string
	for _, z := range s.Zones {
		got = append(got, z.Origin)
	}
	if strings.Join(got, " ") != "b.example.org. example.org. org." {
		t.Errorf("Zones = %v", got)
	}
	if z := s.Find("x.b.example.org."); z == nil || z.Origin != "b.example.org." {
		t.Errorf("Find = %v", z)
	}
	if a := s.Group("www.b.example.org.").Members[0].Addresses[0]; a != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("address = %v, want it unmapped", a)
	}
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGroupTTLUnseen: ttl.unseen defaults to ttl.min and is kept when given.
func TestGroupTTLUnseen(t *testing.T) {
	zone, err := os.ReadFile(filepath.Join("testdata", "good", "example.org.zone"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		ttl  string
		want TTLBounds
	}{
		{"absent-is-min", "{min: 30, max: 120}", TTLBounds{Min: 30, Max: 120, Unseen: 30}},
		{"defaults-everywhere", "{}", TTLBounds{Min: DefaultTTLMin, Max: DefaultTTLMax, Unseen: DefaultTTLMin}},
		{"given", "{min: 30, max: 120, unseen: 120}", TTLBounds{Min: 30, Max: 120, Unseen: 120}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), zone, 0o644); err != nil {
				t.Fatal(err)
			}
			cfg := "zones:\n  - origin: example.org.\n    file: example.org.zone\ngroups:\n  - name: unseen.example.org.\n    ttl: " + tc.ttl +
				"\n    members:\n      - {name: fra1, host: fra1.example.org., addresses: [192.0.2.10], capacity: 100}\n"
			file := filepath.Join(dir, "dnsd.yaml")
			if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Group("unseen.example.org.").TTL; got != tc.want {
				t.Errorf("TTL = %+v, want %+v", got, tc.want)
			}
		})
	}
}
