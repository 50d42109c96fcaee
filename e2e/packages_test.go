package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// The Debian packages as an operator gets them (make deb, before the e2e
// tests): what they hold, what lintian says, and the packages installed
// with dpkg into a system of the test's own (bootSysroot: the real
// systemd) and run as shipped: the units start the daemons as the
// transmirror user on the configs in /etc/transmirror and the state in
// /var/lib/transmirror, dnsd answers the group name with the joined
// mirror, a file comes through the group name, a GROUP-ADD survives a
// restart of dnsd, and a stop of the mirror's unit leaves the group
// (GROUP-EXIT, seen by dnsd) before the mirror exits, within the unit's
// stop timeout.

// debs returns the packages make deb built, by name.
func debs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"transmirror-dnsd", "transmirror-mirror", "transmirror-groupctl"} {
		m, _ := filepath.Glob(filepath.Join("..", "dist", name+"_*_amd64.deb"))
		if len(m) != 1 {
			t.Fatalf("%s: %d packages in dist/, want 1: run make deb (make e2e does)", name, len(m))
		}
		abs, err := filepath.Abs(m[0])
		if err != nil {
			t.Fatal(err)
		}
		out[name] = abs
	}
	return out
}

// TestPackageContents: each package's files, conffiles and control
// fields, and lintian's verdict: nothing, down to its informational
// tags, but what the packages' overrides explain.
func TestPackageContents(t *testing.T) {
	for _, tool := range []string{"dpkg-deb", "lintian"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it): %v", tool, err)
		}
	}
	pkgs := debs(t)
	tests := []struct {
		pkg       string
		files     []string
		conffiles []string
		depends   []string
	}{
		{"transmirror-dnsd", []string{"./usr/bin/dnsd", "./lib/systemd/system/transmirror-dnsd.service", "./etc/transmirror/dnsd.yaml",
			"./etc/transmirror/example.org.zone", "./var/lib/transmirror/", "./usr/share/doc/transmirror-dnsd/copyright"},
			[]string{"/etc/transmirror/dnsd.yaml", "/etc/transmirror/example.org.zone"}, []string{"adduser", "libc6"}},
		{"transmirror-mirror", []string{"./usr/bin/mirror", "./lib/systemd/system/transmirror-mirror.service", "./etc/transmirror/mirror.yaml"},
			[]string{"/etc/transmirror/mirror.yaml"}, []string{"adduser", "libc6"}},
		{"transmirror-groupctl", []string{"./usr/bin/groupctl", "./usr/share/doc/transmirror-groupctl/copyright"}, nil, []string{"libc6"}},
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			contents := run(t, "dpkg-deb", "--contents", pkgs[tt.pkg])
			for _, f := range tt.files {
				if !regexp.MustCompile(`\s` + regexp.QuoteMeta(f) + `(\s|$)`).MatchString(contents) {
					t.Errorf("no %s in the package:\n%s", f, contents)
				}
			}
			info := ""
			if len(tt.conffiles) > 0 {
				info = run(t, "dpkg-deb", "--info", pkgs[tt.pkg], "conffiles")
			}
			for _, f := range tt.conffiles {
				if !strings.Contains(info, f+"\n") {
					t.Errorf("%s is not a conffile: %q", f, info)
				}
			}
			depends := run(t, "dpkg-deb", "--field", pkgs[tt.pkg], "Depends")
			for _, d := range tt.depends {
				if !strings.Contains(depends, d) {
					t.Errorf("Depends %q lacks %s", strings.TrimSpace(depends), d)
				}
			}
		})
	}
	t.Run("lintian", func(t *testing.T) {
		args := []string{"--info", "--fail-on", "error,warning,info"}
		for _, p := range pkgs {
			args = append(args, p)
		}
		out, err := exec.Command("lintian", args...).CombinedOutput()
		tags := regexp.MustCompile(`(?m)^[EWI]: .*$`).FindAllString(string(out), -1)
		if err != nil || len(tags) > 0 {
			t.Errorf("lintian: %v\n%s", err, out)
		}
	})
}

// run runs name with args on this machine and returns its output,
// failing the test on an error.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The operator's configs of TestPackageInstall: dnsd on 127.0.0.1:53 with
// its admin on 127.0.0.1:8053, a group with no member in the file, which
// the mirror joins at start (on 127.0.0.20) and leaves at stop.
const (
	pkgDNSD = `listen: ["127.0.0.1:53"]
admin: 127.0.0.1:8053
admin_token: {file: admin.token}
state_file: /var/lib/transmirror/dnsd-state.json
zones:
  - origin: example.org.
    file: example.org.zone
groups:
  - name: www.example.org.
    ttl: {min: 1, max: 2}
    answers: 1
    secret: {file: group.secret}
    allow_private: true
    members: []
`
	pkgMirror = `listen: ["127.0.0.20:80"]
admin: 127.0.0.20:9180
group: www.example.org
member: ams1
host: ams1.mirrors.example.org
capacity: 1000
run_queue: none
dnsd: {url: "http://127.0.0.1:8053", secret: {file: group.secret}}
join:
  enabled: true
  addresses: [127.0.0.20]
  leave_wait: 2s
timeouts: {shutdown: 5s}
root: /srv/mirror
`
)

// TestPackageInstall installs the packages into a system of the test's
// own and runs them as shipped.
func TestPackageInstall(t *testing.T) {
	pkgs := debs(t)
	s := bootSysroot(t)
	s.install(t, pkgs["transmirror-dnsd"], pkgs["transmirror-mirror"], pkgs["transmirror-groupctl"])
	t.Run("installed", func(t *testing.T) { checkInstalled(t, s) })
	t.Run("configs as shipped", func(t *testing.T) {
		s.must(t, "mkdir", "-p", "/srv/mirror")
		for _, c := range [][]string{{"dnsd", "dnsd.yaml"}, {"mirror", "mirror.yaml"}} {
			s.must(t, "runuser", "-u", "transmirror", "--", c[0], "-check", "-config", "/etc/transmirror/"+c[1])
		}
	})
	s.writeFile(t, "/etc/transmirror/dnsd.yaml", pkgDNSD)
	s.writeFile(t, "/etc/transmirror/mirror.yaml", pkgMirror)
	s.writeFile(t, "/srv/mirror/pub/hello.txt", "hello from ams1\n")
	s.must(t, "systemctl", "enable", "--now", "transmirror-dnsd")
	waitActive(t, s, "transmirror-dnsd")
	s.must(t, "systemctl", "start", "transmirror-mirror")
	waitActive(t, s, "transmirror-mirror")
	t.Run("answers and serves", func(t *testing.T) { checkServes(t, s) })
	t.Run("GROUP-ADD survives a restart", func(t *testing.T) { checkAddSurvives(t, s) })
	t.Run("a stop leaves the group", func(t *testing.T) { checkLeave(t, s) })
}

// checkInstalled: the user, the state directory, the secrets, and the
// units known to systemd but not enabled.
func checkInstalled(t *testing.T, s *sysroot) {
	for _, c := range []struct{ cmd, want string }{
		{"id -un transmirror", "transmirror\n"},
		{"stat -c '%U:%G %a' /var/lib/transmirror", "transmirror:transmirror 750\n"},
		{"stat -c '%U:%G %a' /etc/transmirror/group.secret", "transmirror:transmirror 600\n"},
		{"stat -c '%U:%G %a' /etc/transmirror/admin.token", "transmirror:transmirror 600\n"},
		{"wc -c < /etc/transmirror/group.secret", "65\n"},
		{"systemctl is-enabled transmirror-dnsd transmirror-mirror || true", "disabled\ndisabled\n"},
		{"dnsd -version | cut -d' ' -f1", "dnsd\n"},
	} {
		if out, _ := s.run("sh", "-c", c.cmd); out != c.want {
			t.Errorf("%s: %q, want %q", c.cmd, out, c.want)
		}
	}
}

// waitActive waits until unit is active.
func waitActive(t *testing.T, s *sysroot, unit string) {
	t.Helper()
	probetest.Until(t, 30*time.Second, func() string {
		if out, _ := s.run("systemctl", "is-active", unit); strings.TrimSpace(out) != "active" {
			logs, _ := s.run("journalctl", "--no-pager", "-n", "30", "-u", unit)
			return fmt.Sprintf("%s is %s:\n%s", unit, strings.TrimSpace(out), logs)
		}
		return ""
	})
}

// checkServes: dnsd answers the group name with the mirror that joined,
// and the file comes through the group name from that address.
func checkServes(t *testing.T, s *sysroot) {
	var addr string
	probetest.Until(t, 30*time.Second, func() string {
		out, _ := s.run("dig", "+short", "+tries=1", "@127.0.0.1", "www.example.org", "A")
		if addr = strings.TrimSpace(out); addr != "127.0.0.20" {
			return "dnsd answers www.example.org with " + addr + ", not the joined mirror yet"
		}
		return ""
	})
	out := s.must(t, "curl", "-sS", "--max-time", "10", "--resolve", "www.example.org:80:"+addr, "http://www.example.org/pub/hello.txt")
	if out != "hello from ams1\n" {
		t.Errorf("GET through the group name: %q", out)
	}
}

// checkAddSurvives: a member added with groupctl through the installed
// dnsd is still there after systemctl restart (the state file under
// /var/lib/transmirror, which the unit lets dnsd write).
func checkAddSurvives(t *testing.T, s *sysroot) {
	s.must(t, "groupctl", "-secret-file", "/etc/transmirror/group.secret", "add", "www.example.org",
		"-name", "nyc1", "-host", "nyc1.mirrors.example.org", "-addr", "127.0.0.30", "-capacity", "500")
	s.must(t, "systemctl", "restart", "transmirror-dnsd")
	waitAdmin(t, s)
	probetest.Until(t, 30*time.Second, func() string {
		out, err := s.run("groupctl", "status", "www.example.org")
		if err != nil || !strings.Contains(out, "nyc1") {
			return fmt.Sprintf("after a restart, groupctl status: %v\n%s", err, out)
		}
		return ""
	})
}

// checkLeave: systemctl stop of the joined mirror returns once it left:
// dnsd logged the member's removal before the mirror's last line, the
// unit ended in success (no kill at TimeoutStopSec), and dnsd answers
// without it.
func checkLeave(t *testing.T, s *sysroot) {
	s.must(t, "systemctl", "stop", "transmirror-mirror")
	if out, _ := s.run("systemctl", "show", "-p", "Result", "--value", "transmirror-mirror"); strings.TrimSpace(out) != "success" {
		t.Errorf("the mirror's unit ended in %q, want success", strings.TrimSpace(out))
	}
	removed := journalTime(t, s, "transmirror-dnsd", `"msg":"member removed".*"member":"ams1"`)
	stopped := journalTime(t, s, "transmirror-mirror", `mirror stopped`)
	if removed.IsZero() || stopped.IsZero() || removed.After(stopped) {
		t.Errorf("dnsd removed ams1 at %v, the mirror stopped at %v: want the removal first", removed, stopped)
	}
	if out, _ := s.run("groupctl", "status", "www.example.org"); strings.Contains(out, "ams1") {
		t.Errorf("ams1 is still a member after its stop:\n%s", out)
	}
}

// journalTime is when unit last logged a line matching pattern, zero for
// never.
func journalTime(t *testing.T, s *sysroot, unit, pattern string) time.Time {
	t.Helper()
	out := s.must(t, "journalctl", "--no-pager", "-o", "short-iso-precise", "-u", unit)
	re := regexp.MustCompile(pattern)
	var at time.Time
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !re.MatchString(line) {
			continue
		}
		if ts, err := time.Parse("2006-01-02T15:04:05.999999-0700", f[0]); err == nil {
			at = ts
		}
	}
	if at.IsZero() {
		t.Logf("no line of %s matches %q:\n%s", unit, pattern, out)
	}
	return at
}

// TestMakeInstall: make install puts the binaries, the units (their
// binaries moved to PREFIX) and the configs under DESTDIR, and keeps a
// config that is there.
func TestMakeInstall(t *testing.T) {
	dest := t.TempDir()
	kept := "# the operator's own\n"
	if err := os.MkdirAll(filepath.Join(dest, "etc", "transmirror"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dest, "etc", "transmirror"), "dnsd.yaml", kept)
	run(t, "make", "-C", "..", "--no-print-directory", "install", "DESTDIR="+dest, "PREFIX=/opt/tm")
	for _, f := range []string{"opt/tm/bin/dnsd", "opt/tm/bin/mirror", "opt/tm/bin/groupctl", "etc/transmirror/mirror.yaml",
		"etc/transmirror/example.org.zone", "var/lib/transmirror"} {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("make install: %v", err)
		}
	}
	unit, err := os.ReadFile(filepath.Join(dest, "opt/tm/lib/systemd/system/transmirror-dnsd.service"))
	if err != nil || !strings.Contains(string(unit), "\nExecStart=/opt/tm/bin/dnsd ") || strings.Contains(string(unit), "/usr/bin/") {
		t.Errorf("the installed unit (%v):\n%s", err, unit)
	}
	if got, _ := os.ReadFile(filepath.Join(dest, "etc/transmirror/dnsd.yaml")); string(got) != kept {
		t.Errorf("make install replaced the operator's dnsd.yaml:\n%s", got)
	}
}
