package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestZonemaster: Zonemaster (zonemaster-cli, every module, DNSSEC's
// included) finds nothing at ERROR or above in the signed zone on dnsd,
// but for the name servers' loopback addresses (ADDRESS01), which are
// this test's set-up. Zonemaster asks port 53 and walks down from the
// root, so the test runs in a network namespace of its own with only lo:
// a second dnsd serves a root zone (Zonemaster's hints) that delegates
// example.test, with the DS that `dnsd -ds` prints, to the dnsd under
// test on 127.0.0.1 and 127.0.0.3. With a wrong DS in the root,
// Zonemaster reports DS02_NO_MATCH_DS_DNSKEY (the check can fail).
func TestZonemaster(t *testing.T) {
	for _, tool := range []string{"zonemaster-cli", "ip", "unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it): %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatal("Zonemaster asks port 53, in a network namespace of the test's own, which only root can make: run the e2e tests as root")
	}
	ns := newNetns(t)
	dir := zonemasterZone(t)
	ds := dnsdDS(t, filepath.Join(dir, "child.yaml"))
	writeFile(t, dir, "root.zone", rootZone(ds))
	root := ns.startDNSD(t, "-config", filepath.Join(dir, "root.yaml"))
	ns.startDNSD(t, "-config", filepath.Join(dir, "child.yaml"))

	msgs := ns.zonemaster(t, dir)
	ran := map[string]bool{}
	for _, m := range msgs {
		ran[m.Module] = true
		if m.Level != "ERROR" && m.Level != "CRITICAL" {
			continue
		}
		if m.Tag == "NAMESERVER_IP_PRIVATE_NETWORK" && strings.HasPrefix(fmt.Sprint(m.Args["ns_ip"]), "127.") {
			continue // the set-up: name servers on loopback
		}
		t.Errorf("zonemaster: %s %s %s %v", m.Level, m.Testcase, m.Tag, m.Args)
	}
	for _, module := range []string{"BASIC", "DELEGATION", "DNSSEC", "NAMESERVER", "SYNTAX", "ZONE", "CONSISTENCY"} { // CONNECTIVITY says nothing above DEBUG when all is well
		if !ran[module] {
			t.Errorf("zonemaster: no message of the %s module (of %d messages)", module, len(msgs))
		}
	}

	// A DS that matches no key of the zone: Zonemaster must say so.
	bad := ds[:len(ds)-1] + string("0123456789ABCDEF"[(strings.IndexByte("0123456789ABCDEF", ds[len(ds)-1])+1)%16])
	writeFile(t, dir, "root.zone", rootZone(bad))
	root.Signal(syscall.SIGHUP)
	want := bad[strings.LastIndexByte(bad, ' ')+1:]
	probetest.Until(t, 10*time.Second, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, _ := ns.command(ctx, "dig", "+short", "+norec", "+tries=1", "@127.0.0.2", "example.test", "DS").CombinedOutput()
		if !strings.Contains(strings.ReplaceAll(strings.ToUpper(string(out)), " ", ""), want) {
			return "the root serves DS " + strings.TrimSpace(string(out)) + ", not the wrong one yet"
		}
		return ""
	})
	found := false
	for _, m := range ns.zonemaster(t, dir) {
		found = found || m.Tag == "DS02_NO_MATCH_DS_DNSKEY"
	}
	if !found {
		t.Error("zonemaster with a wrong DS in the parent: no DS02_NO_MATCH_DS_DNSKEY")
	}
}

// netns is a network namespace of the test's own, with only lo (up),
// held by a sleeping process; it goes when that process is stopped.
type netns struct{ pid string }

// newNetns makes one for the test.
func newNetns(t *testing.T) *netns {
	t.Helper()
	holder := start(t, "unshare", []string{"--net", "--", "sh", "-c", "ip link set lo up && echo up && exec sleep 600"},
		func(line string) bool { return line == "up" })
	return &netns{pid: strconv.Itoa(holder.cmd.Process.Pid)}
}

// command is name with args run in the namespace, killed when ctx ends.
func (n *netns) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--target", n.pid, "--net", "--", name}, args...)...)
}

// startDNSD starts the real dnsd in the namespace (nsenter executes it:
// the PID the test stops is dnsd's).
func (n *netns) startDNSD(t *testing.T, args ...string) *proc {
	t.Helper()
	return start(t, "nsenter", append([]string{"--target", n.pid, "--net", "--", bin("dnsd")}, args...),
		func(line string) bool { return strings.Contains(line, `msg="dnsd started"`) })
}

// zonemasterMsg is one message of zonemaster-cli --json.
type zonemasterMsg struct {
	Level, Module, Testcase, Tag string
	Args                         map[string]any
}

// zonemaster runs zonemaster-cli on example.test in the namespace, with
// the root of dir's hints file, over IPv4 (the zone's name servers have
// no IPv6 address), and returns its messages from INFO up.
func (n *netns) zonemaster(t *testing.T, dir string) []zonemasterMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := n.command(ctx, "zonemaster-cli", "--hints", filepath.Join(dir, "hints"), "--no-ipv6", "--level", "INFO",
		"--json", "--no-progress", "example.test").Output()
	if err != nil {
		t.Fatalf("zonemaster-cli: %v\n%s", err, out)
	}
	var msgs []zonemasterMsg
	if err := json.Unmarshal(out, &msgs); err != nil {
		t.Fatalf("zonemaster-cli --json: %v\n%s", err, out)
	}
	return msgs
}

// dnsdDS is the one DS line `dnsd -ds` prints for config.
func dnsdDS(t *testing.T, config string) string {
	t.Helper()
	out, err := exec.Command(bin("dnsd"), "-ds", "-config", config).Output()
	if err != nil {
		t.Fatalf("dnsd -ds: %v\n%s", err, out)
	}
	ds := strings.TrimSpace(string(out))
	if strings.Count(ds, "\n") != 0 || !strings.Contains(ds, "\tDS\t") {
		t.Fatalf("dnsd -ds printed %q, want one DS", ds)
	}
	return ds
}

// zonemasterZone writes the signed zone example.test and the configs of
// its dnsd (child.yaml, on 127.0.0.1:53 and 127.0.0.3:53, with the e2e
// keys) and of the root's (root.yaml, on 127.0.0.2:53), and Zonemaster's
// hints, into a new directory.
func zonemasterZone(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, k := range e2eKeys {
		for _, ext := range []string{".key", ".private"} {
			data, err := os.ReadFile(filepath.Join("testdata", "keys", k+ext))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, k+ext), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeFile(t, dir, "example.test.zone", `$ORIGIN example.test.
$TTL 3600
@     IN SOA   ns1 hostmaster 2026120401 14400 3600 1209600 3600
      IN NS    ns1
      IN NS    ns2
      IN MX    10 mail
ns1   IN A     127.0.0.1
ns2   IN A     127.0.0.3
mail  IN A     127.0.0.25
docs  IN CNAME www
*.cdn IN A     127.0.9.9
`)
	writeFile(t, dir, "child.yaml", `listen: ["127.0.0.1:53", "127.0.0.3:53"]
zones:
  - origin: example.test.
    file: example.test.zone
    dnssec: {keys: [`+strings.Join(e2eKeys, ", ")+`]}
groups:
  - name: www.example.test.
    ttl: {min: 20, max: 60}
    answers: 2
    allow_private: true
    members:
      - {name: fra1, host: fra1.mirrors.example.test., addresses: [127.0.1.1], capacity: 100, location: {lat: 50.11, lon: 8.68}}
      - {name: nyc1, host: nyc1.mirrors.example.test., addresses: [127.0.2.1], capacity: 100, location: {lat: 40.71, lon: -74.01}}
`)
	writeFile(t, dir, "root.yaml", "listen: [\"127.0.0.2:53\"]\nzones:\n  - origin: .\n    file: root.zone\n")
	writeFile(t, dir, "hints", ".                    3600000 IN NS a.root-servers.test.\na.root-servers.test. 3600000 IN A  127.0.0.2\n")
	return dir
}

// rootZone is the root zone that delegates example.test to its two name
// servers with the DS line ds.
func rootZone(ds string) string {
	return `$ORIGIN .
$TTL 86400
.                    IN SOA a.root-servers.test. hostmaster.root-servers.test. 2026120401 1800 900 604800 86400
.                    IN NS  a.root-servers.test.
a.root-servers.test. IN A   127.0.0.2
example.test.        IN NS  ns1.example.test.
example.test.        IN NS  ns2.example.test.
ns1.example.test.    IN A   127.0.0.1
ns2.example.test.    IN A   127.0.0.3
` + ds + "\n"
}
