package zones

import (
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func mustRRs(t *testing.T, lines ...string) []dns.RR {
	t.Helper()
	var rrs []dns.RR
	for _, s := range lines {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("NewRR(%q): %v", s, err)
		}
		rrs = append(rrs, rr)
	}
	return rrs
}

func testZone(t *testing.T) *Zone {
	t.Helper()
	return NewZone("Example.ORG", mustRRs(t,
		"z.example.org. 300 IN A 192.0.2.9",
		"example.org. 300 IN NS ns1.example.org.",
		"example.org. 300 IN SOA ns1.example.org. h.example.org. 1 2 3 4 5",
		"NS1.example.org. 300 IN A 192.0.2.53",
		"a.b.c.example.org. 300 IN A 192.0.2.1",
		"*.wild.example.org. 300 IN A 192.0.2.2",
		"sub.example.org. 300 IN NS ns.sub.example.org.",
		"ns.sub.example.org. 300 IN A 192.0.2.3",
		"deep.x.sub.example.org. 300 IN A 192.0.2.4",
		"inner.sub.example.org. 300 IN NS ns.other.",
		"example.org. 300 IN A 192.0.2.10",
		"www.example.com. 300 IN A 192.0.2.11", // outside: dropped
		"dup.example.org. 300 IN A 192.0.2.5",
		"DUP.example.org. 600 IN A 192.0.2.5", // duplicate: dropped
	))
}

func TestZoneExists(t *testing.T) {
	z := testZone(t)
	tests := []struct {
		name string
		want bool
	}{
		{"example.org.", true},
		{"EXAMPLE.org", true},
		{"ns1.example.org.", true},
		{"a.b.c.example.org.", true},
		{"b.c.example.org.", true},  // empty non-terminal
		{"c.example.org.", true},    // empty non-terminal
		{"wild.example.org.", true}, // empty non-terminal above a wildcard
		{"*.wild.example.org.", true},
		{"x.wild.example.org.", false}, // wildcard synthesis is the server's job
		{"x.sub.example.org.", true},   // ENT below a cut (occluded, but present)
		{"nope.example.org.", false},
		{"d.c.example.org.", false},
		{"org.", false},
		{"www.example.com.", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := z.Exists(tt.name); got != tt.want {
				t.Errorf("Exists(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestZoneCut(t *testing.T) {
	z := testZone(t)
	tests := []struct {
		name  string
		cut   string
		isCut bool
	}{
		{"example.org.", "", false},
		{"www.example.org.", "", false},
		{"a.b.c.example.org.", "", false},
		{"sub.example.org.", "sub.example.org.", true},
		{"SUB.example.org", "sub.example.org.", true},
		{"ns.sub.example.org.", "sub.example.org.", false},
		{"deep.x.sub.example.org.", "sub.example.org.", false},
		{"inner.sub.example.org.", "sub.example.org.", true}, // highest cut wins
		{"a.inner.sub.example.org.", "sub.example.org.", false},
		{"other.org.", "", false},
		{"org.", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := z.Cut(tt.name); got != tt.cut {
				t.Errorf("Cut(%q) = %q, want %q", tt.name, got, tt.cut)
			}
			if got := z.IsCut(tt.name); got != tt.isCut {
				t.Errorf("IsCut(%q) = %v, want %v", tt.name, got, tt.isCut)
			}
		})
	}
	if got := NewZone("example.org.", nil).Cut("a.example.org."); got != "" {
		t.Errorf("Cut in a zone without cuts = %q", got)
	}
}

func TestZoneRRset(t *testing.T) {
	z := testZone(t)
	tests := []struct {
		name string
		typ  uint16
		want int
	}{
		{"example.org.", dns.TypeSOA, 1},
		{"example.org.", dns.TypeNS, 1},
		{"EXAMPLE.ORG.", dns.TypeA, 1},
		{"ns1.example.org.", dns.TypeA, 1},
		{"ns1.example.org.", dns.TypeAAAA, 0},
		{"b.c.example.org.", dns.TypeA, 0},
		{"dup.example.org.", dns.TypeA, 1},
		{"nope.example.org.", dns.TypeA, 0},
		{"www.example.com.", dns.TypeA, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+dns.TypeToString[tt.typ], func(t *testing.T) {
			got := z.RRset(tt.name, tt.typ)
			if len(got) != tt.want {
				t.Fatalf("RRset = %v, want %d records", got, tt.want)
			}
			for _, rr := range got {
				if rr.Header().Name != dns.CanonicalName(tt.name) {
					t.Errorf("owner %q is not canonical", rr.Header().Name)
				}
			}
		})
	}
	if n := z.Node("Ns1.Example.Org"); n == nil || n.Name != "ns1.example.org." {
		t.Errorf("Node = %+v", n)
	}
	if z.Node("b.c.example.org.") != nil {
		t.Error("an empty non-terminal has a node")
	}
	if z.SOA == nil || z.SOA.Serial != 1 {
		t.Errorf("SOA = %v", z.SOA)
	}
}

func TestZoneRecords(t *testing.T) {
	z := testZone(t)
	var got []string
	for _, rr := range z.Records() {
		got = append(got, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
	}
	// SOA first, then names in RFC 4034 §6.1 order, types ascending.
	want := []string{
		"example.org. SOA",
		"example.org. A",
		"example.org. NS",
		"a.b.c.example.org. A",
		"dup.example.org. A",
		"ns1.example.org. A",
		"sub.example.org. NS",
		"inner.sub.example.org. NS",
		"ns.sub.example.org. A",
		"deep.x.sub.example.org. A",
		"*.wild.example.org. A",
		"z.example.org. A",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Records() =\n%q\nwant\n%q", got, want)
	}
	if z.Names() != 10 {
		t.Errorf("Names() = %d, want 10", z.Names())
	}
}

func TestCanonicalLess(t *testing.T) {
	// The example of RFC 4034 §6.1, in order.
	names := []string{
		"example.",
		"a.example.",
		"yljkjljk.a.example.",
		"Z.a.example.",
		"zABC.a.EXAMPLE.",
		"z.example.",
		`\001.z.example.`,
		"*.z.example.",
		`\200.z.example.`,
	}
	for i := range names {
		names[i] = dns.CanonicalName(names[i])
	}
	for i := 0; i < len(names); i++ {
		for j := 0; j < len(names); j++ {
			if got, want := canonicalLess(names[i], names[j]), i < j; got != want {
				t.Errorf("canonicalLess(%q, %q) = %v, want %v", names[i], names[j], got, want)
			}
		}
	}
}
