package yamlconf

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testConfig has a key of every kind the daemons' configs use.
type testConfig struct {
	Listen []string `yaml:"listen"`
	Admin  string   `yaml:"admin"`
	Server struct {
		MaxUDPSize     int      `yaml:"max_udp_size"`
		TCPIdleTimeout Duration `yaml:"tcp_idle_timeout"`
		Enabled        bool     `yaml:"enabled"`
	} `yaml:"server"`
	Zones []struct {
		Origin        string         `yaml:"origin"`
		AllowTransfer []netip.Prefix `yaml:"allow_transfer"`
	} `yaml:"zones"`
	Members []struct {
		Name      string       `yaml:"name"`
		Addresses []netip.Addr `yaml:"addresses"`
		Memory    ByteSize     `yaml:"memory"`
		Capacity  float64      `yaml:"capacity"`
		Bandwidth Bandwidth    `yaml:"bandwidth"`
		Location  Location     `yaml:"location"`
	} `yaml:"members"`
	Geo Geo `yaml:"geo"`
}

// panicConfig has a key whose decoding panics, like a decoder bug.
type panicConfig struct {
	Hook panicker `yaml:"hook"`
}

// panicker stands for a decoder bug: decoding it panics.
type panicker struct{}

func (*panicker) UnmarshalYAML([]byte) error { panic("boom") }

// oneError matches what every error of Decode looks like.
var oneError = regexp.MustCompile(`^c\.yaml:[0-9]+:[0-9]+: [^\n]+$`)

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"not a mapping", "- a\n", "c.yaml:1:1: wrong type: want mapping, got sequence"},
		{"sequence wanted", "listen: 5\n", "c.yaml:1:9: listen: wrong type: want sequence, got int"},
		{"wrong scalar type", "server:\n  max_udp_size: big\n", "c.yaml:2:17: server.max_udp_size: wrong type: want integer, got string"},
		{"overflow", "server:\n  max_udp_size: 99999999999999999999999\n", "c.yaml:2:17: server.max_udp_size: 99999999999999999999999 is out of range for integer"},
		{"bad duration", "server:\n  tcp_idle_timeout: 10\n", `c.yaml:2:21: server.tcp_idle_timeout: invalid duration "10": want e.g. 10s or 1m30s`},
		{"bad prefix", "zones:\n  - origin: a.\n    allow_transfer: [10.0.0.0/33]\n", `c.yaml:3:22: zones[0].allow_transfer[0]: invalid prefix "10.0.0.0/33": want e.g. 192.0.2.0/24 or 2001:db8::/32`},
		{"bad IP address", "members:\n  - addresses: [192.0.2.1, 192.0.2.300]\n", `c.yaml:2:28: members[0].addresses[1]: invalid IP address "192.0.2.300"`},
		{"bad size", "members:\n  - memory: 8 gigs\n", `c.yaml:2:13: members[0].memory: invalid size "8 gigs": want e.g. 1048576, 512MiB or 8GiB`},
		{"bad bandwidth", "members:\n  - bandwidth: 1 Gigabit\n", `c.yaml:2:16: members[0].bandwidth: invalid bandwidth "1 Gigabit": want e.g. 1Gbit/s, 100Mbit/s or 12.5MB/s`},
		{"bandwidth as a sequence", "members:\n  - bandwidth: [1]\n", "wrong type: want string, got sequence"},
		{"duration as a mapping", "server:\n  tcp_idle_timeout: {a: 1}\n", "wrong type: want string, got mapping"},
		{"duplicate key", "admin: a\nadmin: b\n", `c.yaml:2:1: mapping key "admin" already defined`},
		{"two documents", "admin: a\n---\nadmin: b\n", "c.yaml:2:1: more than one YAML document"},
		{"unknown top-level key", "listne: []\n", "c.yaml:1:1: listne: unknown field"},
		{"unknown nested key", "members:\n  - name: a\n    capcity: 1\n", "c.yaml:3:5: members[0].capcity: unknown field"},
		{"tag", "listen: !foo [a]\n", "c.yaml:1:9: listen: YAML tag !foo is not supported"},
		{"tag on a scalar", "admin: !!binary aGk=\n", "c.yaml:1:8: admin: YAML tag !!binary is not supported"},
		{"syntax", "listen: [a\nadmin: b\n", "c.yaml:"},
		{"key with a line break", "\"a\\nb\": 1\n", `c.yaml:1:1: a\nb: unknown field`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c testConfig
			_, err := Decode("c.yaml", []byte(tt.yaml), &c)
			if err == nil {
				t.Fatalf("Decode succeeded, want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if !oneError.MatchString(err.Error()) {
				t.Errorf("error %q is not one line of FILE:LINE:COL: what", err)
			}
		})
	}
}

// TestDecodePanic checks that a panic of the decoder is an error.
func TestDecodePanic(t *testing.T) {
	var c panicConfig
	_, err := Decode("c.yaml", []byte("hook: x\n"), &c)
	if want := "c.yaml:1:1: malformed YAML (decoder failed: boom)"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestDecode(t *testing.T) {
	data := []byte(`listen: [":53", "[::1]:53"]
server:
  tcp_idle_timeout: 1m30s
  enabled: false
members:
  - name: fra1
    addresses: [192.0.2.1, "2001:db8::1"]
    memory: 512MiB
    bandwidth: 1Gbit/s
    location: {lat: 50.11, lon: 8.68, country: de}
  - name: ams1
    bandwidth: 125000000
geo:
  networks:
    - {prefix: 198.51.100.0/24, location: {continent: EU}}
`)
	var c testConfig
	pos, err := Decode("c.yaml", data, &c)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Members[0]
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"strings", strings.Join(c.Listen, " "), ":53 [::1]:53"},
		{"duration", c.Server.TCPIdleTimeout.D(), 90 * time.Second},
		{"address", m.Addresses[1], netip.MustParseAddr("2001:db8::1")},
		{"size", m.Memory, ByteSize(512 << 20)},
		{"bandwidth", m.Bandwidth, Bandwidth(125e6)},
		{"bandwidth as a number", c.Members[1].Bandwidth, Bandwidth(125e6)},
		{"location", *m.Location.Lat, 50.11},
		{"country as written", m.Location.Country, "de"},
		{"prefix", c.Geo.Networks[0].Prefix, netip.MustParsePrefix("198.51.100.0/24")},
		{"document", mustAt(t, pos, ""), Position{1, 1}},
		{"key", mustAt(t, pos, "server.tcp_idle_timeout"), Position{3, 3}},
		{"sequence item", mustAt(t, pos, "listen[1]"), Position{1, 17}},
		{"mapping item", mustAt(t, pos, "members[0]"), Position{6, 5}},
		{"flow key", mustAt(t, pos, "members[0].location.country"), Position{10, 39}},
		{"not written: nearest ancestor", mustAt(t, pos, "members[0].weight"), Position{6, 5}},
		{"written false", pos.Has("server.enabled"), true},
		{"not written", pos.Has("admin"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
	if _, ok := pos.Of("members[0].weight"); ok {
		t.Error("Of finds a key that was not written")
	}
}

func mustAt(t *testing.T, pos Positions, path string) Position {
	t.Helper()
	p, ok := pos.At(path)
	if !ok {
		t.Fatalf("no position for %q", path)
	}
	return p
}

func TestDecodeEmpty(t *testing.T) {
	tests := []struct {
		name string
		yaml string
	}{
		{"nothing", ""},
		{"comment only", "# nothing here\n"},
		{"document marker", "---\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := testConfig{Admin: "kept"}
			pos, err := Decode("c.yaml", []byte(tt.yaml), &c)
			if err != nil {
				t.Fatal(err)
			}
			if c.Admin != "kept" || len(pos) != 0 {
				t.Errorf("config %+v, positions %v", c, pos)
			}
			if _, ok := pos.At("admin"); ok {
				t.Error("an empty file has positions")
			}
		})
	}
}
