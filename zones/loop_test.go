package zones

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// loopZone is a zone with aliases of the group www.example.org.: one
// CNAME, a chain of two, a wildcard, and aliases that lead elsewhere.
const loopZone = `$ORIGIN example.org.
$TTL 300
@       SOA  ns1 hostmaster 1 3600 900 604800 60
        NS   ns1
ns1     A    192.0.2.53
alias   CNAME www
chain1  CNAME chain2
chain2  CNAME WWW.example.org.
*.wild  CNAME www
a       CNAME b
b       CNAME a
away    CNAME www.example.net.
fra1    A    192.0.2.10
`

// loopSet writes dnsd.yaml with the group www.example.org. whose one
// member has host host, beside loopZone, and builds it.
func loopSet(t *testing.T, host string) (*Set, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(loopZone), 0o644); err != nil {
		t.Fatal(err)
	}
	data := `zones:
  - origin: example.org.
    file: example.org.zone
groups:
  - name: www.example.org.
    secret: s
    members:
      - name: m1
        host: ` + host + `
        addresses: [192.0.2.10]
        capacity: 10
`
	cfg, err := Parse(filepath.Join(dir, "dnsd.yaml"), []byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return Build(cfg)
}

// TestMemberHostLoop: a member whose host name is the group's own name,
// in any case, with or without the trailing dot, or an alias of it
// through the served zones (CNAME, chain, wildcard), is refused in the
// config file (naming file:line, group and member) and in GROUP-ADD
// (naming the field); host names that lead elsewhere are fine.
func TestMemberHostLoop(t *testing.T) {
	tests := []struct {
		name string
		host string
		want string // error substring, "" for none
	}{
		{"the group's name", "www.example.org.", `is the group's own name: redirects to it would loop`},
		{"upper case, no trailing dot", "WWW.example.org", `is the group's own name`},
		{"a CNAME of the group", "alias.example.org", `is an alias of the group's name (alias.example.org. CNAME www.example.org.)`},
		{"a chain of CNAMEs", "Chain1.example.org.", `(chain1.example.org. CNAME chain2.example.org., chain2.example.org. CNAME www.example.org.)`},
		{"a wildcard CNAME", "x.wild.example.org", `(x.wild.example.org. CNAME www.example.org.)`},
		{"a CNAME loop elsewhere", "a.example.org", ""},
		{"a CNAME out of the zones", "away.example.org", ""},
		{"a host of its own", "fra1.example.org", ""},
		{"below the group's name", "m1.www.example.org", ""},
	}
	for _, tc := range tests {
		t.Run("config/"+tc.name, func(t *testing.T) {
			_, err := loopSet(t, tc.host)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			want := `dnsd.yaml:9:9: group "www.example.org.": member "m1": host "` + tc.host + `" `
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want %q and %q", err, want, tc.want)
			}
		})
	}
	base, err := loopSet(t, "fra1.example.org")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run("runtime/"+tc.name, func(t *testing.T) {
			m := MemberConfig{Name: "new1", Host: tc.host, Addresses: []netip.Addr{netip.MustParseAddr(globalAddr)}, Capacity: 10}
			_, err := base.WithMembers(map[string][]MemberConfig{"www.example.org.": {m}})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			want := `zones: group "www.example.org.": member "new1": host: "` + tc.host + `" `
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want %q and %q", err, want, tc.want)
			}
		})
	}
}
