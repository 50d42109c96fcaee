package zones

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// capsSet builds a config of the group www.example.org. with members
// (YAML flow mappings) and the group keys given (indented lines).
func capsSet(t *testing.T, keys string, members ...string) (*Set, error) {
	t.Helper()
	dir := t.TempDir()
	zone, err := os.ReadFile(filepath.Join("testdata", "good", "example.org.zone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), zone, 0o644); err != nil {
		t.Fatal(err)
	}
	data := "zones:\n  - origin: example.org.\n    file: example.org.zone\ngroups:\n  - name: www.example.org.\n    secret: s\n" + keys + "    members:\n"
	for _, m := range members {
		data += "      - " + m + "\n"
	}
	cfg, err := Parse(filepath.Join(dir, "dnsd.yaml"), []byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return Build(cfg)
}

// addrList returns n distinct global addresses as a YAML flow sequence
// and as addresses.
func addrList(n int) (string, []netip.Addr) {
	var s []string
	var as []netip.Addr
	for i := range n {
		a := netip.AddrFrom4([4]byte{192, 0, 3, byte(i + 1)})
		s = append(s, a.String())
		as = append(as, a)
	}
	return "[" + strings.Join(s, ", ") + "]", as
}

// TestMemberCaps: the caps on a member (addresses, name, probe URL) and
// on a group's members, in the config file (file:line, group, member) and
// in GROUP-ADD (the field).
func TestMemberCaps(t *testing.T) {
	sixteen, _ := addrList(MaxMemberAddresses)
	seventeen, seventeenAddrs := addrList(MaxMemberAddresses + 1)
	longName := strings.Repeat("a", MaxMemberNameLen+1)
	longProbe := "http://p.example.org/" + strings.Repeat("x", MaxProbeLen)
	tests := []struct {
		name   string
		member string
		want   string // error substring, "" for none
	}{
		{"16 addresses", "{name: m1, host: m1.example.org, addresses: " + sixteen + ", capacity: 1}", ""},
		{"17 addresses", "{name: m1, host: m1.example.org, addresses: " + seventeen + ", capacity: 1}", `dnsd.yaml:8:42: group "www.example.org.": member "m1": addresses: 17, at most 16 per member`},
		{"a name of 63 bytes", "{name: " + longName[1:] + ", host: m1.example.org, addresses: [192.0.3.1], capacity: 1}", ""},
		{"a name of 64 bytes", "{name: " + longName + ", host: m1.example.org, addresses: [192.0.3.1], capacity: 1}", `member "` + longName + `": name is 64 bytes long, at most 63`},
		{"a long probe URL", "{name: m1, host: m1.example.org, addresses: [192.0.3.1], capacity: 1, probe: " + longProbe + "}", `member "m1": probe is 533 bytes long, at most 512`},
		{"a probe URL with a quote", `{name: m1, host: m1.example.org, addresses: [192.0.3.1], capacity: 1, probe: 'http://p.example.org/"x'}`, `probe "http://p.example.org/\"x": want the characters of RFC 3986`},
		{"a probe URL with an escape", "{name: m1, host: m1.example.org, addresses: [192.0.3.1], capacity: 1, probe: 'http://p.example.org/%22x'}", ""},
	}
	for _, tc := range tests {
		t.Run("config/"+tc.name, func(t *testing.T) {
			_, err := capsSet(t, "", tc.member)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "dnsd.yaml:8:") {
				t.Fatalf("error %v, want %q at dnsd.yaml:8", err, tc.want)
			}
		})
	}
	base, err := capsSet(t, "", "{name: fra1, host: fra1.example.org, addresses: [192.0.2.10], capacity: 1}")
	if err != nil {
		t.Fatal(err)
	}
	t.Run("runtime/17 addresses", func(t *testing.T) {
		m := MemberConfig{Name: "m1", Host: "m1.example.org", Addresses: seventeenAddrs, Capacity: 1}
		_, err := base.WithMembers(map[string][]MemberConfig{"www.example.org.": {m}})
		if want := `zones: group "www.example.org.": member "m1": addresses: 17, at most 16 per member`; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
	t.Run("runtime/a long name", func(t *testing.T) {
		m := MemberConfig{Name: longName, Host: "m1.example.org", Addresses: seventeenAddrs[:1], Capacity: 1}
		_, err := base.WithMembers(map[string][]MemberConfig{"www.example.org.": {m}})
		if want := `name is 64 bytes long, at most 63`; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
	many := func(n int) []string {
		var ms []string
		for i := range n {
			ms = append(ms, fmt.Sprintf("{name: m%d, host: m%d.example.org, addresses: [192.0.3.1], capacity: 1}", i, i))
		}
		return ms
	}
	t.Run("one member over the cap in the file", func(t *testing.T) {
		_, err := capsSet(t, "", many(MaxGroupMembers+1)...)
		if want := fmt.Sprintf(`dnsd.yaml:7:5: group "www.example.org.": %d members, at most %d`, MaxGroupMembers+1, MaxGroupMembers); err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want %q", err, want)
		}
	})
	t.Run("the default max_runtime_members makes room", func(t *testing.T) {
		inFile := MaxGroupMembers - DefaultMaxRuntimeMembers/2
		set, err := capsSet(t, "", many(inFile)...)
		if err != nil {
			t.Fatal(err)
		}
		if got := set.Group("www.example.org").MaxRuntimeMembers; got != MaxGroupMembers-inFile {
			t.Errorf("max_runtime_members %d with %d members in the file, want %d", got, inFile, MaxGroupMembers-inFile)
		}
	})
}

// TestWhenAllDrained: when_all_drained is answer (the default) or
// nodata, nothing else.
func TestWhenAllDrained(t *testing.T) {
	tests := []struct{ name, keys, want, err string }{
		{"default", "", WhenAllDrainedAnswer, ""},
		{"answer", "    when_all_drained: answer\n", WhenAllDrainedAnswer, ""},
		{"nodata", "    when_all_drained: nodata\n", WhenAllDrainedNoData, ""},
		{"upper case", "    when_all_drained: NODATA\n", "", `dnsd.yaml:7:5: group "www.example.org.": when_all_drained "NODATA": want answer or nodata`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := capsSet(t, tc.keys, "{name: m1, host: m1.example.org, addresses: [192.0.3.1], capacity: 1}")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := set.Group("www.example.org").WhenAllDrained; got != tc.want {
				t.Errorf("when_all_drained %q, want %q", got, tc.want)
			}
		})
	}
}
