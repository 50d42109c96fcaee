package zones

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func parseZoneFile(t *testing.T, origin, file string, allowInclude bool) (*Zone, error) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ParseZone(origin, file, f, allowInclude)
}

func TestParseZoneGood(t *testing.T) {
	file := filepath.Join("testdata", "good", "example.org.zone")
	z, err := parseZoneFile(t, "Example.ORG", file, false)
	if err != nil {
		t.Fatalf("ParseZone: %v", err)
	}
	if z.Origin != "example.org." || z.File != file {
		t.Errorf("Origin, File = %q, %q", z.Origin, z.File)
	}
	if z.SOA == nil || z.SOA.Serial != 2024010101 || z.SOA.Minttl != 60 {
		t.Fatalf("SOA = %v", z.SOA)
	}
	tests := []struct {
		name  string
		owner string
		typ   uint16
		want  []string // rdata, in zone order
		ttl   uint32
		line  int
	}{
		{"apex NS relative and absolute", "example.org.", dns.TypeNS, []string{"ns1.example.org.", "ns2.example.net."}, 300, 10},
		{"owner carried over", "ns1.example.org.", dns.TypeAAAA, []string{"2001:db8::53"}, 300, 13},
		{"relative owner", "fra1.mirrors.example.org.", dns.TypeA, []string{"192.0.2.10"}, 300, 16},
		{"wildcard", "*.wild.example.org.", dns.TypeA, []string{"192.0.2.99"}, 300, 20},
		{"below empty non-terminals", "a.b.c.example.org.", dns.TypeA, []string{"192.0.2.1"}, 300, 21},
		{"delegation", "sub.example.org.", dns.TypeNS, []string{"ns.sub.example.org.", "ns.example.net."}, 300, 24},
		{"glue", "ns.sub.example.org.", dns.TypeA, []string{"192.0.2.200"}, 300, 26},
		{"relative CNAME target", "alias.example.org.", dns.TypeCNAME, []string{"www.example.org."}, 300, 28},
		{"explicit TTL beats $TTL", "mail.example.org.", dns.TypeMX, []string{"10 mx.example.org."}, 3600, 30},
		{"second $TTL", "MX.example.org.", dns.TypeA, []string{"192.0.2.25"}, 60, 31},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rrs := z.RRset(tt.owner, tt.typ)
			if len(rrs) != len(tt.want) {
				t.Fatalf("RRset(%s, %s) = %v, want %d records", tt.owner, dns.TypeToString[tt.typ], rrs, len(tt.want))
			}
			for i, rr := range rrs {
				if got := rdata(rr); got != tt.want[i] {
					t.Errorf("record %d rdata = %q, want %q", i, got, tt.want[i])
				}
				if rr.Header().Ttl != tt.ttl {
					t.Errorf("record %d TTL = %d, want %d", i, rr.Header().Ttl, tt.ttl)
				}
			}
			if got := z.line(rrs[0]); got != tt.line {
				t.Errorf("line of %v = %d, want %d", rrs[0], got, tt.line)
			}
		})
	}
	if got := z.line(z.SOA); got != 4 {
		t.Errorf("line of the SOA = %d, want 4 (where it starts)", got)
	}
}

// rdata is the text of rr after its header.
func rdata(rr dns.RR) string {
	return strings.TrimPrefix(rr.String(), rr.Header().String())
}

func TestParseZoneBad(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		include bool
		want    string
	}{
		{"missing SOA", "no_soa.zone", false, `no_soa.zone:2: zone "example.org." has no SOA record at the apex`},
		{"SOA not at apex", "soa_not_apex.zone", false, `soa_not_apex.zone:4: SOA record at "www.example.org.", not at the apex`},
		{"two SOAs", "two_soa.zone", false, `two_soa.zone:5: second SOA record at the apex (the first is at line 2)`},
		{"no NS", "no_ns.zone", false, `no_ns.zone:2: zone "example.org." has no NS records at the apex`},
		{"CNAME beside A", "cname_beside_a.zone", false, `cname_beside_a.zone:6: CNAME at "www.example.org." beside other data (A at line 4)`},
		{"two CNAMEs", "two_cnames.zone", false, `two_cnames.zone:5: second CNAME at "www.example.org." (the first is at line 4)`},
		{"NS in bailiwick without glue", "ns_no_glue.zone", false, `ns_no_glue.zone:4: NS "sub.example.org." -> "ns.sub.example.org.": in-bailiwick name server has no glue`},
		{"apex NS in zone without address", "ns_apex_no_glue.zone", false, `ns_apex_no_glue.zone:3: NS "example.org." -> "ns1.example.org."`},
		{"owner outside origin", "outside_origin.zone", false, `outside_origin.zone:4: owner "www.example.com." is outside the zone "example.org."`},
		{"syntax error", "syntax.zone", false, `syntax.zone:4: bad A A: "192.0.2.300"`},
		{"$INCLUDE not allowed", "include.zone", false, `include.zone:4: $INCLUDE directive not allowed`},
		{"DNAME", "dname.zone", false, `dname.zone:4: DNAME at "old.example.org.": DNAME is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseZoneFile(t, "example.org.", filepath.Join("testdata", "bad", tt.file), tt.include)
			if err == nil {
				t.Fatalf("ParseZone(%s) succeeded, want error %q", tt.file, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseZone(%s) error:\n%v\nwant it to contain:\n%s", tt.file, err, tt.want)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, filepath.Join("testdata", "bad", tt.file)+":") {
					t.Errorf("error line %q does not start with FILE:LINE", line)
				}
			}
		})
	}
}

func TestParseZoneInline(t *testing.T) {
	const head = "$TTL 300\n@ SOA ns1.example.net. h 1 2 3 4 5\n@ NS ns1.example.net.\n"
	tests := []struct {
		name    string
		text    string
		include bool
		want    string // "" = valid
	}{
		{"minimal", head, false, ""},
		{"no final newline", head + "www A 192.0.2.1", false, ""},
		{"RRSIG beside CNAME is fine", head + "www CNAME a.example.net.\nwww RRSIG CNAME 8 3 300 20300101000000 20200101000000 1 example.org. AAAA\n", false, ""},
		{"duplicate records collapse", head + "www A 192.0.2.1\nwww A 192.0.2.1\n", false, ""},
		{"glue below a sibling delegation is not ours", head + "a NS ns.b\nb NS ns.example.net.\n", false, ""},
		{"AAAA glue is enough", head + "sub NS ns.sub\nns.sub AAAA 2001:db8::1\n", false, ""},
		{"CNAME at the apex", head + "@ CNAME example.net.\n", false, `z.zone:4: CNAME at "example.org." beside other data (SOA at line 2)`},
		{"all errors reported", head + "www A 192.0.2.1\nwww CNAME x.example.net.\nx.example.com. A 192.0.2.2\n",
			false, "z.zone:5: CNAME at \"www.example.org.\" beside other data (A at line 4)\nz.zone:6: owner"},
		{"CH class", head + "www CH A 192.0.2.1\n", false, `z.zone:4: www.example.org. A: class CH is not supported`},
		{"empty", "", false, `z.zone:1: zone "example.org." has no SOA record`},
		{"missing include is an error with a line", head + "$INCLUDE does-not-exist.zone\n", true, `z.zone:4: failed to open`},
		{"unknown type names the line", head + "\n\nwww BOGUS 1\n", false, `z.zone:6:`},
		{"multi-line record line is where it starts", head + "txt TXT ( \"a\"\n \"b\" )\ntxt CNAME x.example.net.\n", false, `z.zone:6: CNAME at "txt.example.org." beside other data (TXT at line 4)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			z, err := ParseZone("example.org.", "z.zone", strings.NewReader(tt.text), tt.include)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ParseZone: %v", err)
				}
				if z.SOA == nil {
					t.Fatal("no SOA")
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseZone succeeded, want error %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error:\n%v\nwant it to contain:\n%s", err, tt.want)
			}
		})
	}
}

func TestParseZoneInclude(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "main.zone")
	if err := os.WriteFile(filepath.Join(dir, "inc.zone"), []byte("www A 192.0.2.1\nwww CNAME x.example.net.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	text := "$TTL 300\n@ SOA ns1.example.net. h 1 2 3 4 5\n@ NS ns1.example.net.\n$INCLUDE inc.zone\n"
	if err := os.WriteFile(main, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := parseZoneFile(t, "example.org.", main, true)
	// Records from an included file are named by the $INCLUDE line, and
	// not quoted.
	if want := main + ":4: a record of the included file: CNAME at \"…\" beside other data (… at line 4)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want it to contain %q", err, want)
	}
	_, err = parseZoneFile(t, "example.org.", main, false)
	if want := main + ":4: $INCLUDE directive not allowed"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want it to contain %q", err, want)
	}
}

func TestParseZoneBadOrigin(t *testing.T) {
	for _, origin := range []string{"", "a..b"} {
		if _, err := ParseZone(origin, "z.zone", strings.NewReader(""), false); err == nil {
			t.Errorf("ParseZone(origin %q) succeeded", origin)
		}
	}
}

// TestParseZoneIncludeConfined: an $INCLUDE reaches only files in the
// zone file's directory, and an error in an included file names its file
// and line and the kind of error, never the text written there.
func TestParseZoneIncludeConfined(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "zones")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const secret = "root:$6$s3cr3tHash:19000:0:99999:7:::"
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(base, "shadow"), secret+"\n")
	write(filepath.Join(dir, "shadow"), secret+"\n")
	write(filepath.Join(dir, "ok.inc"), "www A 192.0.2.1\n")
	write(filepath.Join(dir, "outside.inc"), "www.example.com. A 192.0.2.1\n")
	write(filepath.Join(dir, "nested.inc"), "$INCLUDE ../shadow\n")
	if err := os.Symlink(filepath.Join(base, "shadow"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(dir, "sub", "ok.inc"), "mail A 192.0.2.2\n")
	const head = "$TTL 300\n@ SOA ns1.example.net. h 1 2 3 4 5\n@ NS ns1.example.net.\n"
	main := filepath.Join(dir, "main.zone")
	tests := []struct {
		name, include string
		want          string // "" = valid
	}{
		{"same directory", "ok.inc", ""},
		{"absolute, same directory", filepath.Join(dir, "ok.inc"), ""},
		{"a subdirectory", "sub/ok.inc", ""},
		{"parent directory", "../shadow", main + ":4: zones: $INCLUDE outside the zone file's directory " + dir},
		{"absolute elsewhere", filepath.Join(base, "shadow"), main + ":4: zones: $INCLUDE outside the zone file's directory"},
		{"symbolic link out", "link", main + ":4: zones: $INCLUDE outside the zone file's directory"},
		{"nested include out", "nested.inc", filepath.Join(dir, "nested.inc") + ":1: zones: $INCLUDE outside the zone file's directory"},
		{"syntax error in an included file", "shadow", filepath.Join(dir, "shadow") + ":1: "},
		{"bad record in an included file", "outside.inc", main + `:4: a record of the included file: owner "…" is outside the zone "example.org."`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			write(main, head+"$INCLUDE "+tt.include+"\n")
			z, err := parseZoneFile(t, "example.org.", main, true)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ParseZone: %v", err)
				}
				if len(z.RRset("www.example.org.", dns.TypeA))+len(z.RRset("mail.example.org.", dns.TypeA)) != 1 {
					t.Errorf("the included record is not served")
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("error %v, want it to start %q", err, tt.want)
			}
			for _, leak := range []string{"root", "s3cr3t", "www.example.com"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q quotes the included file (%q)", err, leak)
				}
			}
			if !errors.Is(err, ErrIncludeOutside) && strings.Contains(tt.want, "outside the zone file's directory") {
				t.Errorf("error %v is not ErrIncludeOutside", err)
			}
		})
	}
}
