package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// startE2EDNSD copies testdata into a temp dir (so tests may edit it) and
// starts dnsd on it.
func startE2EDNSD(t *testing.T) (*dnsdProc, string) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"dnsd.yaml", "example.test.zone"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, f, string(data))
	}
	return startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml")), dir
}

// TestDigAuthoritative checks dnsd's authoritative semantics with the real
// dig, one named case per behaviour, parsing dig's output.
func TestDigAuthoritative(t *testing.T) {
	d, _ := startE2EDNSD(t)

	type want struct {
		status     string
		flags      []string // must be set
		noFlags    []string // must not be set
		answer     []string // "TYPE data", in any order; nil = don't check
		authority  []string
		additional []string // must be contained
		check      func(t *testing.T, r *digResult)
	}
	cases := []struct {
		name string
		args []string
		want want
	}{
		{"exact A: AA, no RA, RD copied", []string{"mail.example.test", "A"},
			want{status: "NOERROR", flags: []string{"qr", "aa", "rd"}, noFlags: []string{"ra", "tc"},
				answer: []string{"A 127.0.0.25"}}},
		{"norec: RD not set in reply", []string{"+norec", "mail.example.test", "A"},
			want{status: "NOERROR", flags: []string{"aa"}, noFlags: []string{"rd", "ra"}, answer: []string{"A 127.0.0.25"}}},
		{"case of the question preserved", []string{"MaIl.ExAmPlE.tEsT", "A"},
			want{status: "NOERROR", answer: []string{"A 127.0.0.25"}, check: func(t *testing.T, r *digResult) {
				if len(r.Question) != 1 || r.Question[0].Name != "MaIl.ExAmPlE.tEsT." {
					t.Errorf("question = %v, want MaIl.ExAmPlE.tEsT.", r.Question)
				}
			}}},
		{"apex MX with additional glue", []string{"example.test", "MX"},
			want{status: "NOERROR", flags: []string{"aa"}, answer: []string{"MX 10 mail.example.test."},
				additional: []string{"A 127.0.0.25"}}},
		{"CNAME chain followed in zone", []string{"alias.example.test", "A"},
			want{status: "NOERROR", flags: []string{"aa"},
				answer: []string{"CNAME chain1.example.test.", "CNAME mail.example.test.", "A 127.0.0.25"}}},
		{"CNAME loop bounded", []string{"loop1.example.test", "A"},
			want{check: func(t *testing.T, r *digResult) {
				if r.Status != "NOERROR" && r.Status != "SERVFAIL" {
					t.Errorf("status %q, want NOERROR or SERVFAIL", r.Status)
				}
				if len(r.Answer) > 9 {
					t.Errorf("%d answers: loop not bounded", len(r.Answer))
				}
			}}},
		{"CNAME leaving the zone stops there", []string{"out.example.test", "A"},
			want{status: "NOERROR", answer: []string{"CNAME www.example.net."}}},
		{"CNAME into the group", []string{"docs.example.test", "A"},
			want{status: "NOERROR", check: func(t *testing.T, r *digResult) {
				if len(r.Answer) < 2 || r.Answer[0].Type != "CNAME" || r.Answer[1].Type != "A" {
					t.Errorf("answer %v, want CNAME then group A records", r.Answer)
				}
			}}},
		{"wildcard synthesised with the query name", []string{"foo.cdn.example.test", "A"},
			want{status: "NOERROR", flags: []string{"aa"}, answer: []string{"A 127.0.9.9"}, check: func(t *testing.T, r *digResult) {
				if r.Answer[0].Name != "foo.cdn.example.test." {
					t.Errorf("owner %q, want foo.cdn.example.test.", r.Answer[0].Name)
				}
			}}},
		{"wildcard NODATA for a missing type", []string{"foo.cdn.example.test", "MX"},
			want{status: "NOERROR", answer: []string{}, authority: []string{"SOA ns1.example.test. hostmaster.example.test. 2026113001 3600 600 604800 60"}}},
		{"referral below a delegation: no AA, NS and glue", []string{"+norec", "www.sub.example.test", "A"},
			want{status: "NOERROR", noFlags: []string{"aa"}, answer: []string{},
				authority:  []string{"NS ns.sub.example.test."},
				additional: []string{"A 127.0.0.53", "AAAA fd00::53"}}},
		{"NXDOMAIN with SOA, negative TTL = min(TTL, MINIMUM)", []string{"nope.example.test", "A"},
			want{status: "NXDOMAIN", flags: []string{"aa"}, answer: []string{},
				authority: []string{"SOA ns1.example.test. hostmaster.example.test. 2026113001 3600 600 604800 60"},
				check: func(t *testing.T, r *digResult) {
					if r.Authority[0].TTL != 60 {
						t.Errorf("SOA TTL %d, want 60", r.Authority[0].TTL)
					}
				}}},
		{"empty non-terminal is NODATA", []string{"mirrors.example.test", "A"},
			want{status: "NOERROR", flags: []string{"aa"}, answer: []string{},
				authority: []string{"SOA ns1.example.test. hostmaster.example.test. 2026113001 3600 600 604800 60"}}},
		{"NODATA for an existing name", []string{"mail.example.test", "AAAA"},
			want{status: "NOERROR", answer: []string{}, authority: []string{"SOA ns1.example.test. hostmaster.example.test. 2026113001 3600 600 604800 60"}}},
		{"outside every zone: REFUSED", []string{"www.example.com", "A"},
			want{status: "REFUSED", noFlags: []string{"aa", "ra"}, answer: []string{}}},
		{"unknown opcode: NOTIMP", []string{"+opcode=5", "example.test", "SOA"},
			want{status: "NOTIMP", noFlags: []string{"aa", "ra", "tc"}}},
		{"no question: FORMERR", []string{"+header-only", "example.test", "SOA"},
			want{status: "FORMERR"}},
		{"EDNS: OPT echoed with the server's size", []string{"+bufsize=4096", "example.test", "SOA"},
			want{status: "NOERROR", check: func(t *testing.T, r *digResult) {
				if r.EDNS == nil || r.EDNS.Version != 0 || r.EDNS.UDP != 1232 {
					t.Errorf("EDNS %+v, want version 0 udp 1232", r.EDNS)
				}
			}}},
		{"EDNS version 1: BADVERS", []string{"+edns=1", "+noednsnegotiation", "example.test", "SOA"},
			want{status: "BADVERS", answer: []string{}, check: func(t *testing.T, r *digResult) {
				if r.EDNS == nil || r.EDNS.Version != 0 {
					t.Errorf("EDNS %+v, want an OPT of version 0", r.EDNS)
				}
			}}},
		{"unknown EDNS option ignored", []string{"+ednsopt=65001:abcd", "mail.example.test", "A"},
			want{status: "NOERROR", answer: []string{"A 127.0.0.25"}}},
		{"cookie passed over", []string{"+cookie", "mail.example.test", "A"},
			want{status: "NOERROR", answer: []string{"A 127.0.0.25"}}},
		{"NSID", []string{"+nsid", "example.test", "SOA"},
			want{status: "NOERROR", check: func(t *testing.T, r *digResult) {
				if r.EDNS == nil || !strings.Contains(r.EDNS.Options["NSID"], "e2e-ns1") {
					t.Errorf("EDNS %+v: want an NSID option with e2e-ns1", r.EDNS)
				}
			}}},
		{"too big for 512 bytes without EDNS: TC", []string{"+noedns", "+ignore", "big.example.test", "TXT"},
			want{status: "NOERROR", flags: []string{"tc"}, check: func(t *testing.T, r *digResult) {
				if r.Size > 512 {
					t.Errorf("UDP reply of %d bytes, want ≤ 512", r.Size)
				}
			}}},
		{"bufsize 1000: TC within 1000 bytes", []string{"+bufsize=1000", "+ignore", "big.example.test", "TXT"},
			want{status: "NOERROR", flags: []string{"tc"}, check: func(t *testing.T, r *digResult) {
				if r.Size > 1000 {
					t.Errorf("UDP reply of %d bytes, want ≤ 1000", r.Size)
				}
			}}},
		{"bufsize 4096 still capped at 1232", []string{"+bufsize=4096", "+ignore", "big.example.test", "TXT"},
			want{status: "NOERROR", flags: []string{"tc"}, check: func(t *testing.T, r *digResult) {
				if r.Size > 1232 {
					t.Errorf("UDP reply of %d bytes, want ≤ 1232", r.Size)
				}
			}}},
		{"same query over TCP: whole answer", []string{"+tcp", "big.example.test", "TXT"},
			want{status: "NOERROR", noFlags: []string{"tc"}, check: func(t *testing.T, r *digResult) {
				if len(r.Answer) != 40 || r.Proto != "TCP" {
					t.Errorf("%d TXT records over %s, want 40 over TCP", len(r.Answer), r.Proto)
				}
			}}},
		{"dig retries over TCP after TC", []string{"big.example.test", "TXT"},
			want{status: "NOERROR", check: func(t *testing.T, r *digResult) {
				if len(r.Answer) != 40 || !strings.Contains(r.Raw, "Truncated, retrying in TCP mode") {
					t.Errorf("%d records; want 40 after a TCP retry:\n%s", len(r.Answer), r.Raw)
				}
			}}},
		{"ANY over UDP: minimal (RFC 8482)", []string{"+notcp", "example.test", "ANY"},
			want{status: "NOERROR", flags: []string{"aa"}, check: func(t *testing.T, r *digResult) {
				if r.Proto != "UDP" || len(r.Answer) == 0 || len(r.Answer) > 2 {
					t.Errorf("ANY over %s gave %d records, want one RRset over UDP: %v", r.Proto, len(r.Answer), r.Answer)
				}
			}}},
		{"ANY over TCP: everything", []string{"+tcp", "example.test", "ANY"},
			want{status: "NOERROR", check: func(t *testing.T, r *digResult) {
				got := map[string]bool{}
				for _, x := range r.Answer {
					got[x.Type] = true
				}
				for _, typ := range []string{"SOA", "NS", "MX", "TXT"} {
					if !got[typ] {
						t.Errorf("ANY over TCP lacks %s: %v", typ, r.Answer)
					}
				}
			}}},
		{"CH TXT id.server", []string{"id.server", "CH", "TXT"},
			want{status: "NOERROR", answer: []string{`TXT "ns1.e2e.test"`}}},
		{"CH TXT hostname.bind", []string{"hostname.bind", "CH", "TXT"},
			want{status: "NOERROR", answer: []string{`TXT "ns1.e2e.test"`}}},
		{"CH TXT version.bind", []string{"version.bind", "CH", "TXT"},
			want{status: "NOERROR", answer: []string{`TXT "transmirror-e2e"`}}},
		{"CH TXT version.server", []string{"version.server", "CH", "TXT"},
			want{status: "NOERROR", answer: []string{`TXT "transmirror-e2e"`}}},
		{"TSIG with an unknown key: NOTAUTH", []string{"-y", "hmac-sha256:nokey.e2e.:c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", "example.test", "SOA"},
			want{check: func(t *testing.T, r *digResult) {
				if r.Status != "NOTAUTH" && !strings.Contains(r.Raw, "BADKEY") {
					t.Errorf("want NOTAUTH/BADKEY, got:\n%s", r.Raw)
				}
				if len(r.Answer) != 0 {
					t.Errorf("a request signed with an unknown key got an answer: %v", r.Answer)
				}
			}}},
		{"group A answer", []string{"www.example.test", "A"},
			want{status: "NOERROR", flags: []string{"aa"}, check: func(t *testing.T, r *digResult) {
				if len(r.Answer) != 2 {
					t.Errorf("%d A records, want 2: %v", len(r.Answer), r.Answer)
				}
				for _, x := range r.Answer {
					if x.Type != "A" || x.TTL < 20 || x.TTL > 60 {
						t.Errorf("record %v: want A with TTL within [20,60]", x)
					}
				}
			}}},
		{"group AAAA answer", []string{"www.example.test", "AAAA"},
			want{status: "NOERROR", answer: []string{"AAAA fd00:1::1"}}},
		{"group MX: NODATA", []string{"www.example.test", "MX"},
			want{status: "NOERROR", answer: []string{}, authority: []string{"SOA ns1.example.test. hostmaster.example.test. 2026113001 3600 600 604800 60"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := d.Dig(t, tc.args...)
			w := tc.want
			if w.status != "" && r.Status != w.status {
				t.Fatalf("status %q, want %q:\n%s", r.Status, w.status, r.Raw)
			}
			for _, f := range w.flags {
				if !r.Flags[f] {
					t.Errorf("flag %s not set (flags %v)", f, r.Flags)
				}
			}
			for _, f := range w.noFlags {
				if r.Flags[f] {
					t.Errorf("flag %s set, want it clear", f)
				}
			}
			sameSet(t, "answer", types(r.Answer), w.answer)
			sameSet(t, "authority", types(r.Authority), w.authority)
			for _, a := range w.additional {
				if !slices.Contains(types(r.Additional), a) {
					t.Errorf("additional %v lacks %q", types(r.Additional), a)
				}
			}
			if w.check != nil {
				w.check(t, r)
			}
			if t.Failed() {
				t.Logf("dig output:\n%s", r.Raw)
			}
		})
	}
}

func sameSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	if want == nil {
		return
	}
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

// TestDigAXFR checks zone transfers: allowed addresses get SOA … SOA over
// TCP, others are refused.
func TestDigAXFR(t *testing.T) {
	d, _ := startE2EDNSD(t)
	t.Run("allowed from 127.0.0.1", func(t *testing.T) {
		r := d.Dig(t, "-b", "127.0.0.1", "example.test", "AXFR")
		if len(r.Answer) < 10 {
			t.Fatalf("AXFR gave %d records:\n%s", len(r.Answer), r.Raw)
		}
		first, last := r.Answer[0], r.Answer[len(r.Answer)-1]
		if first.Type != "SOA" || last.Type != "SOA" || !strings.Contains(first.Data, "2026113001") {
			t.Errorf("AXFR must start and end with the SOA (serial 2026113001): first %v, last %v", first, last)
		}
		if r.Proto != "TCP" {
			t.Errorf("AXFR over %q, want TCP", r.Proto)
		}
		n := 0
		for _, x := range r.Answer {
			if x.Type == "TXT" && x.Name == "big.example.test." {
				n++
			}
		}
		if n != 40 {
			t.Errorf("AXFR carried %d of the 40 big TXT records", n)
		}
	})
	t.Run("refused from 127.0.0.2", func(t *testing.T) {
		r := d.Dig(t, "-b", "127.0.0.2", "example.test", "AXFR")
		if !strings.Contains(r.Raw, "Transfer failed") {
			t.Errorf("AXFR from a disallowed address was not refused:\n%s", r.Raw)
		}
		for _, x := range r.Answer {
			if x.Type == "A" {
				t.Errorf("refused AXFR leaked %v", x)
			}
		}
	})
	t.Run("SOA serial visible", func(t *testing.T) {
		r := d.Dig(t, "+short", "example.test", "SOA")
		if !strings.Contains(r.Raw, " 2026113001 ") {
			t.Errorf("SOA serial not in %q", r.Raw)
		}
	})
}
