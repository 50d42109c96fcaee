package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The e2e keys (BIND's dnssec-keygen): a KSK and a ZSK of example.test,
// and under other/ a CSK of the same zone that no trust anchor names.
var (
	e2eKeys   = []string{"Kexample.test.+013+14967", "Kexample.test.+013+02907"}
	otherKeys = []string{"other/Kexample.test.+013+37867"}
)

// startSignedDNSD starts dnsd on the e2e config with example.test signed
// by keys (names under testdata/keys), and returns it with the DS lines
// that `dnsd -ds` prints for that config and the config's directory.
func startSignedDNSD(t *testing.T, keys []string) (d *dnsdProc, ds, dir string) {
	t.Helper()
	dir = t.TempDir()
	conf, err := os.ReadFile(filepath.Join("testdata", "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, k := range keys {
		for _, ext := range []string{".key", ".private"} {
			data, err := os.ReadFile(filepath.Join("testdata", "keys", k+ext))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, filepath.Base(k)+ext, string(data))
			if err := os.Chmod(filepath.Join(dir, filepath.Base(k)+ext), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		paths = append(paths, filepath.Base(k))
	}
	signed := strings.Replace(string(conf), "    allow_transfer: [127.0.0.1/32]\n",
		"    allow_transfer: [127.0.0.1/32]\n    dnssec: {keys: ["+strings.Join(paths, ", ")+"]}\n", 1)
	signed = strings.Replace(signed, "  - name: www.example.test.\n", "  - name: www.example.test.\n    allow_private: true # members added on loopback\n", 1)
	writeFile(t, dir, "dnsd.yaml", signed)
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "example.test.zone", string(zone))
	cfg := filepath.Join(dir, "dnsd.yaml")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin("dnsd"), "-ds", "-config", cfg).Output()
	if err != nil {
		t.Fatalf("dnsd -ds: %v\n%s", err, out)
	}
	return startDNSD(t, true, "-config", cfg), strings.TrimSpace(string(out)), dir
}

// validatingUnbound is unbound validating example.test with the trust
// anchor ds (the DS lines of `dnsd -ds`), its stub the dnsd at port.
func validatingUnbound(t *testing.T, port, ds string) *unboundProc {
	t.Helper()
	extra := "    module-config: \"validator iterator\"\n    val-log-level: 2\n"
	for _, line := range strings.Split(ds, "\n") {
		extra += "    trust-anchor: \"" + line + "\"\n"
	}
	return startUnboundStubs(t, []string{"127.0.0.1@" + port}, extra, "example.test.")
}

// TestDNSSECValidatingResolver: a real validating resolver (unbound with
// the DS that `dnsd -ds` prints as its trust anchor) resolves every kind
// of answer of the signed zone with the AD bit: static names, the group
// name, a wildcard, a CNAME chain, a name that does not exist (compact
// denial: NOERROR, no answer), NODATA, the DNSKEY RRset.
func TestDNSSECValidatingResolver(t *testing.T) {
	d, ds, _ := startSignedDNSD(t, e2eKeys)
	if n := strings.Count(ds, "\n") + 1; n != 1 || !strings.Contains(ds, "IN\tDS\t14967 13 2 ") {
		t.Fatalf("dnsd -ds printed %q, want the KSK's one DS", ds)
	}
	u := validatingUnbound(t, d.Port, ds)
	for _, tc := range []struct {
		name, qname, qtype string
		answers            int // records of the asked type
	}{
		{"static A", "mail.example.test", "A", 1},
		{"group A", "www.example.test", "A", 2},
		{"group AAAA", "www.example.test", "AAAA", 1},
		{"wildcard", "img.cdn.example.test", "A", 1},
		{"CNAME chain", "alias.example.test", "A", 1},
		{"CNAME into the group", "docs.example.test", "A", 2},
		{"no such name", "nope.example.test", "A", 0},
		{"NODATA", "mail.example.test", "AAAA", 0},
		{"empty non-terminal", "mirrors.example.test", "A", 0},
		{"DNSKEY", "example.test", "DNSKEY", 2},
		{"MX", "example.test", "MX", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dig(t, "127.0.0.1", u.Port, "+dnssec", tc.qname, tc.qtype)
			if r.Status != "NOERROR" || !r.Flags["ad"] {
				t.Fatalf("status %s flags %v, want NOERROR with ad\n%s\nunbound:\n%s", r.Status, r.Flags, r.Raw, u.Logs())
			}
			n := 0
			for _, rr := range r.Answer {
				if rr.Type == tc.qtype {
					n++
				}
			}
			if n != tc.answers {
				t.Errorf("%d %s records, want %d\n%s", n, tc.qtype, tc.answers, r.Raw)
			}
		})
	}
}

// TestDNSSECWrongKey: a node that signs with a key the trust anchor does
// not name makes the validating resolver answer SERVFAIL, for a static
// name and for the group name.
func TestDNSSECWrongKey(t *testing.T) {
	_, ds, _ := startSignedDNSD(t, e2eKeys)
	other, _, _ := startSignedDNSD(t, otherKeys)
	u := validatingUnbound(t, other.Port, ds)
	for _, q := range []string{"mail.example.test", "www.example.test"} {
		if r := dig(t, "127.0.0.1", u.Port, "+dnssec", q, "A"); r.Status != "SERVFAIL" || r.Flags["ad"] {
			t.Errorf("%s: status %s flags %v, want SERVFAIL\n%s", q, r.Status, r.Flags, r.Raw)
		}
	}
}

// TestDNSSECGroupChanges: the group answer validates (delv, with the DS
// as its trust anchor, asking dnsd itself so that nothing is cached)
// after a member is added at run time and after one is drained; a reload
// with a broken key is refused naming the key file, and the old keys go
// on signing.
func TestDNSSECGroupChanges(t *testing.T) {
	d, ds, dir := startSignedDNSD(t, e2eKeys)
	anchor := writeFile(t, t.TempDir(), "anchor.conf", "trust-anchors {\n"+dsAnchor(t, ds)+"};\n")
	validated := func(step, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "delv", "@127.0.0.1", "-p", d.Port, "-a", anchor, "+root=example.test",
			"+nortrace", "+tcp", "www.example.test", "A").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "; fully validated") || !strings.Contains(string(out), want) {
			t.Fatalf("%s: delv: %v, want a fully validated answer with %s:\n%s", step, err, want, out)
		}
	}
	validated("at start", "127.0.1.1")
	if out, err := groupctl(t, d.Admin, "e2e-secret", "add", "www.example.test", "-name", "par1", "-host", "par1.mirrors.example.test",
		"-addr", "127.0.3.1", "-capacity", "100"); err != nil {
		t.Fatalf("groupctl add: %v\n%s", err, out)
	}
	if out, err := groupctl(t, d.Admin, "e2e-secret", "drain", "www.example.test", "fra1"); err != nil {
		t.Fatalf("groupctl drain: %v\n%s", err, out)
	}
	validated("with par1 added and fra1 drained", "127.0.3.1")

	zsk := filepath.Base(e2eKeys[1]) + ".private"
	writeFile(t, dir, zsk, "Private-key-format: v1.3\nAlgorithm: 13 (ECDSAP256SHA256)\nPrivateKey: AAAA\n")
	resp, err := http.Post("http://"+d.Admin+"/-/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), zsk) {
		t.Errorf("reload with a broken key: %d %s; want 400 naming %s", resp.StatusCode, body, zsk)
	}
	validated("after the refused reload", "127.0.3.1")
}

// dsAnchor turns DS lines into delv's trust-anchors entries.
func dsAnchor(t *testing.T, ds string) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(ds, "\n") {
		f := strings.Fields(line)
		if len(f) != 8 || f[3] != "DS" {
			t.Fatalf("DS line %q", line)
		}
		b.WriteString("  " + f[0] + " static-ds " + f[4] + " " + f[5] + " " + f[6] + " \"" + f[7] + "\";\n")
	}
	return b.String()
}

// TestDNSViz: DNSViz probes the signed zone on dnsd (its apex, the
// group name, a name that does not exist) and finds nothing at warning
// level or above; the group's RRSIGs and the denial's NSEC are there and
// valid. (Debian's dnsviz can not load trust anchors with its pygraphviz,
// so the chain to the DS is left to unbound and delv above.)
func TestDNSViz(t *testing.T) {
	if _, err := exec.LookPath("dnsviz"); err != nil {
		t.Fatalf("dnsviz is not installed (make deps installs it): %v", err)
	}
	d, _, dir := startSignedDNSD(t, e2eKeys)
	probe := filepath.Join(dir, "probe.json")
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "dnsviz", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("dnsviz %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// "+": only the server named is asked, nothing above the zone; -4:
	// not the zone's ::1 either. (DNSViz connects one UDP socket towards
	// a root server's address to learn its own source address; that
	// sends nothing.)
	run("probe", "-4", "-A", "-x", "example.test+:ns1.example.test=127.0.0.1:"+d.Port, "-o", probe,
		"example.test", "www.example.test", "nope.example.test")
	if out := run("grok", "-l", "warning", "-r", probe); strings.TrimSpace(out) != "" {
		t.Errorf("dnsviz grok -l warning:\n%s", out)
	}
	printed := run("print", "-r", probe)
	for _, want := range []string{
		`www\.example\.test\n  \[-\]  A: [0-9., ]+\n  \[-\]    RRSIG: example\.test/13/2907 \([0-9 -]+\) \[\.\]`,
		`NSEC: nope\.example\.test\. \\000\.nope\.example\.test\. RRSIG NSEC TYPE128\n *\[-\] *RRSIG: example\.test/13/2907 \([0-9 -]+\) \[\.\]`,
		`DNSKEY: [0-9/, .\[\]]*13/2907/256 \[\.\]`,
		`DNSKEY: [0-9/, .\[\]]*13/14967/257 \[\.\][0-9/, .\[\]]*\n *\[-\] *RRSIG: example\.test/13/14967 \([0-9 -]+\) \[\.\]`,
	} {
		if !regexp.MustCompile(want).MatchString(printed) {
			t.Errorf("dnsviz print has no %s:\n%s", want, printed)
		}
	}
}
