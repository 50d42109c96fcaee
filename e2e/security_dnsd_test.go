package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The dnsd findings of the security review (issue 21), each reproduced
// against the real binaries.

// secDNSD writes into dir the zone of the e2e tests with a wildcard alias
// of the group (*.any CNAME www) and a dnsd config serving the fault
// scenario's group with the members given as YAML flow mappings, group
// keys added from groupKeys (indented lines); it returns the config's
// path.
func secDNSD(t *testing.T, dir, groupKeys string, members ...string) string {
	t.Helper()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "example.test.zone", string(zone)+"\n*.any IN CNAME www\n")
	var mb strings.Builder
	for _, m := range members {
		mb.WriteString("      - " + m + "\n")
	}
	return writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
state_file: state.json
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: 1, max: 1}
    secret: %s
    allow_private: true
%s    members:
%s`, faultGroup, faultSecret, groupKeys, mb.String()))
}

// dnsdCheck runs dnsd -check -config cfg and returns its exit status and
// output.
func dnsdCheck(t *testing.T, cfg string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin("dnsd"), "-check", "-config", cfg).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// TestSecurityMemberHostIsGroup: a member whose host name is the group's
// own name, or an alias of it in the zones dnsd serves, would make the
// mirrors redirect to the group again. dnsd -check refuses it in the
// config file (naming file:line, group and member), and a signed
// GROUP-ADD is refused with a 400 that names the host field.
func TestSecurityMemberHostIsGroup(t *testing.T) {
	for _, tc := range []struct{ name, host, want string }{
		{"the group's name", "www.example.test.", `host "www.example.test." is the group's own name`},
		{"upper case, no dot", "WWW.example.test", `host "WWW.example.test" is the group's own name`},
		{"a CNAME of the group", "docs.example.test.", `is an alias of the group's name (docs.example.test. CNAME www.example.test.)`},
		{"a wildcard CNAME", "fra1.any.example.test.", `(fra1.any.example.test. CNAME www.example.test.)`},
	} {
		t.Run("check/"+tc.name, func(t *testing.T) {
			cfg := secDNSD(t, t.TempDir(), "", "{name: fra1, host: fra1.mirrors.example.test., addresses: [127.0.1.1], capacity: 1000}",
				fmt.Sprintf("{name: bad1, host: %q, addresses: [127.0.1.2], capacity: 1000}", tc.host))
			code, out := dnsdCheck(t, cfg)
			want := `dnsd.yaml:14:22: group "www.example.test.": member "bad1": `
			if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, tc.want) {
				t.Errorf("dnsd -check: exit %d, want 1 with %q and %q:\n%s", code, want, tc.want, out)
			}
		})
	}
	d := startDNSD(t, true, "-config", secDNSD(t, t.TempDir(), "", "{name: fra1, host: fra1.mirrors.example.test., addresses: [127.0.1.1], capacity: 1000}"))
	for _, tc := range []struct{ name, host, want string }{
		{"the group's name", "www.example.test", `host: "www.example.test" is the group's own name: redirects to it would loop`},
		{"upper case with the dot", "WWW.EXAMPLE.TEST.", `host: "WWW.EXAMPLE.TEST." is the group's own name`},
		{"a CNAME of the group", "docs.example.test", `host: "docs.example.test" is an alias of the group's name`},
		{"a wildcard CNAME", "x.any.example.test", `host: "x.any.example.test" is an alias of the group's name (x.any.example.test. CNAME www.example.test.)`},
	} {
		t.Run("group-add/"+tc.name, func(t *testing.T) {
			out, err := groupctl(t, d.Admin, faultSecret, "add", faultGroup, "-name", "bad1", "-host", tc.host, "-addr", "127.0.1.2", "-capacity", "1000")
			if err == nil || !strings.Contains(out, "400") || !strings.Contains(out, tc.want) {
				t.Errorf("groupctl add: %v, want a 400 with %q:\n%s", err, tc.want, out)
			}
		})
	}
	if out, err := groupctl(t, d.Admin, faultSecret, "add", faultGroup, "-name", "fra2", "-host", "fra2.mirrors.example.test", "-addr", "127.0.1.3", "-capacity", "1000"); err != nil {
		t.Errorf("groupctl add of a member with a host of its own: %v\n%s", err, out)
	}
}

// ipList returns n addresses 127.0.x.1.. as a comma-separated list.
func ipList(x, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("127.0.%d.%d", x, i+1))
	}
	return out
}

// TestSecurityMemberAddressCap: a member with more addresses than
// zones.MaxMemberAddresses is refused in the config file and in a
// signed GROUP-ADD (a 400 naming the field), and an answer carries at
// most the group's answers addresses, over TCP too, whatever its members
// hold.
func TestSecurityMemberAddressCap(t *testing.T) {
	big := "{name: big1, host: big1.mirrors.example.test., addresses: [" + strings.Join(ipList(3, 17), ", ") + "], capacity: 1000}"
	code, out := dnsdCheck(t, secDNSD(t, t.TempDir(), "", big))
	if want := `dnsd.yaml:13:56: group "www.example.test.": member "big1": addresses: 17, at most 16 per member`; code != 1 || !strings.Contains(out, want) {
		t.Errorf("dnsd -check: exit %d, want 1 with %q:\n%s", code, want, out)
	}
	d := startDNSD(t, true, "-config", secDNSD(t, t.TempDir(), "    answers: 2\n",
		"{name: big1, host: big1.mirrors.example.test., addresses: ["+strings.Join(ipList(3, 16), ", ")+"], capacity: 1000}",
		"{name: fra1, host: fra1.mirrors.example.test., addresses: [127.0.1.1], capacity: 1000}"))
	out, err := groupctl(t, d.Admin, faultSecret, "add", faultGroup, "-name", "big2", "-host", "big2.mirrors.example.test",
		"-addr", strings.Join(ipList(4, 17), ","), "-capacity", "1000")
	if want := `member "big2": addresses: 17, at most 16 per member`; err == nil || !strings.Contains(out, "400") || !strings.Contains(out, want) {
		t.Errorf("groupctl add of 17 addresses: %v, want a 400 with %q:\n%s", err, want, out)
	}
	if out, err := groupctl(t, d.Admin, faultSecret, "add", faultGroup, "-name", "big3", "-host", "big3.mirrors.example.test",
		"-addr", strings.Join(ipList(5, 16), ","), "-capacity", "1000"); err != nil {
		t.Fatalf("groupctl add of 16 addresses: %v\n%s", err, out)
	}
	for _, proto := range []string{"+notcp", "+tcp"} {
		for range 20 { // the members picked change from answer to answer
			r := d.Dig(t, proto, faultGroup, "A")
			if r.Status != "NOERROR" || len(r.Answer) == 0 || len(r.Answer) > 2 {
				t.Fatalf("dig %s: %s with %d records, want NOERROR with 1 or 2 (answers: 2):\n%s", proto, r.Status, len(r.Answer), r.Raw)
			}
		}
	}
	r := d.Dig(t, "+tcp", faultGroup, "A")
	t.Logf("TCP answer with members of 16 addresses and answers: 2: %d records, %d bytes", len(r.Answer), r.Size)
}

// TestSecurityAllDrained: with every member drained (groupctl drain),
// dnsd answers with the drained members by default (fail open, as with
// every member down); with when_all_drained: nodata it answers NODATA:
// NOERROR, no address, the SOA in the authority section, AA. Undrained
// again, the members are back. A value other than answer or nodata is a
// config error.
func TestSecurityAllDrained(t *testing.T) {
	code, out := dnsdCheck(t, secDNSD(t, t.TempDir(), "    when_all_drained: refuse\n",
		"{name: fra1, host: fra1.mirrors.example.test., addresses: [127.0.1.1], capacity: 1000}"))
	if want := `dnsd.yaml:12:5: group "www.example.test.": when_all_drained "refuse": want answer or nodata`; code != 1 || !strings.Contains(out, want) {
		t.Errorf("dnsd -check: exit %d, want 1 with %q:\n%s", code, want, out)
	}
	members := []string{
		"{name: fra1, host: fra1.mirrors.example.test., addresses: [127.0.1.1], capacity: 1000}",
		"{name: nyc1, host: nyc1.mirrors.example.test., addresses: [127.0.2.1], capacity: 1000}",
	}
	for _, tc := range []struct {
		name, keys string
		nodata     bool
	}{
		{"default", "", false},
		{"nodata", "    when_all_drained: nodata\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startDNSD(t, true, "-config", secDNSD(t, t.TempDir(), tc.keys, members...))
			drain := func(verb string) {
				t.Helper()
				for _, m := range []string{"fra1", "nyc1"} {
					if out, err := groupctl(t, d.Admin, faultSecret, verb, faultGroup, m); err != nil {
						t.Fatalf("groupctl %s %s: %v\n%s", verb, m, err, out)
					}
				}
			}
			if r := d.Dig(t, faultGroup, "A"); r.Status != "NOERROR" || len(r.Answer) == 0 {
				t.Fatalf("before the drains: %s with %d records:\n%s", r.Status, len(r.Answer), r.Raw)
			}
			drain("drain")
			r := d.Dig(t, faultGroup, "A")
			switch {
			case r.Status != "NOERROR" || !r.Flags["aa"]:
				t.Errorf("every member drained: %s, aa %v; want NOERROR with AA:\n%s", r.Status, r.Flags["aa"], r.Raw)
			case tc.nodata && (len(r.Answer) != 0 || len(r.Authority) != 1 || r.Authority[0].Type != "SOA"):
				t.Errorf("every member drained, when_all_drained: nodata: want NODATA with the SOA in authority:\n%s", r.Raw)
			case !tc.nodata && len(r.Answer) == 0:
				t.Errorf("every member drained, by default: want the drained members (fail open):\n%s", r.Raw)
			}
			drain("undrain")
			if r := d.Dig(t, faultGroup, "A"); r.Status != "NOERROR" || len(r.Answer) == 0 {
				t.Errorf("undrained: %s with %d records:\n%s", r.Status, len(r.Answer), r.Raw)
			}
		})
	}
}
