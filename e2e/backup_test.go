package e2e

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestBackupRestore: the state of a dnsd installed from the packages
// (members added at run time, a drain), saved with transmirror-backup on
// one system, restored on a fresh one (a second system of the test's own,
// the packages just installed) comes back there: the members are in the
// group, the drained one is still drained and out of the answers. A
// restore while dnsd runs is refused.
func TestBackupRestore(t *testing.T) {
	pkgs := debs(t)
	install := func(s *sysroot) {
		s.install(t, pkgs["transmirror-dnsd"], pkgs["transmirror-groupctl"])
		s.writeFile(t, "/etc/transmirror/dnsd.yaml", pkgDNSD)
	}
	old := bootSysroot(t)
	install(old)
	old.must(t, "systemctl", "start", "transmirror-dnsd")
	waitAdmin(t, old)
	for _, m := range []struct{ name, addr string }{{"m1", "127.0.0.41"}, {"m2", "127.0.0.42"}} {
		old.must(t, "groupctl", "-secret-file", "/etc/transmirror/group.secret", "add", "www.example.org",
			"-name", m.name, "-host", m.name+".mirrors.example.org", "-addr", m.addr, "-capacity", "100")
	}
	old.must(t, "groupctl", "-secret-file", "/etc/transmirror/group.secret", "drain", "www.example.org", "m2")
	if out, err := old.run("transmirror-backup", "restore", "/etc/hostname"); err == nil || !strings.Contains(out, "is running: stop it first") {
		t.Errorf("a restore while dnsd runs: %v\n%s", err, out)
	}
	old.must(t, "transmirror-backup", "save", "/root/dnsd.tgz")
	backup := old.must(t, "base64", "-w0", "/root/dnsd.tgz")
	if _, err := base64.StdEncoding.DecodeString(backup); err != nil {
		t.Fatalf("the backup read back: %v", err)
	}

	fresh := bootSysroot(t)
	install(fresh)
	fresh.writeFile(t, "/root/dnsd.tgz.b64", backup)
	fresh.must(t, "sh", "-c", "base64 -d /root/dnsd.tgz.b64 > /root/dnsd.tgz")
	fresh.must(t, "transmirror-backup", "restore", "/root/dnsd.tgz")
	fresh.must(t, "systemctl", "start", "transmirror-dnsd")
	waitAdmin(t, fresh)
	probetest.Until(t, 30*time.Second, func() string {
		status, err := fresh.run("groupctl", "status", "www.example.org")
		if err != nil || !strings.Contains(status, "m1") || !strings.Contains(status, "m2") || !strings.Contains(status, "draining") {
			return fmt.Sprintf("after the restore, groupctl status: %v\n%s", err, status)
		}
		return ""
	})
	for range 5 { // one member per answer: every answer must be m1's
		if out, _ := fresh.run("dig", "+short", "+tries=1", "@127.0.0.1", "www.example.org", "A"); strings.TrimSpace(out) != "127.0.0.41" {
			t.Fatalf("after the restore dnsd answers %q, want m1's 127.0.0.41 only (m2 drained)", strings.TrimSpace(out))
		}
	}
}

// waitAdmin waits until the installed dnsd's admin API answers.
func waitAdmin(t *testing.T, s *sysroot) {
	t.Helper()
	waitActive(t, s, "transmirror-dnsd")
	probetest.Until(t, 30*time.Second, func() string {
		if out, err := s.run("groupctl", "list"); err != nil {
			return fmt.Sprintf("groupctl list: %v\n%s", err, out)
		}
		return ""
	})
}
