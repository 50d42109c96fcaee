package zones

import (
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
)

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
	good := MemberConfig{Name: "new1", Host: "new1.example.org", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.99")}, Capacity: 10}
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
