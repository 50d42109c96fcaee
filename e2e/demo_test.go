package e2e

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// demoAddrs are the fixed loopback addresses of tmdemo: its printed
// commands name them, so it can not use port 0.
var demoAddrs = []struct{ network, addr, what string }{
	{"udp", "127.0.0.1:5300", "dnsd DNS"},
	{"tcp", "127.0.0.1:5300", "dnsd DNS"},
	{"tcp", "127.0.0.1:8053", "dnsd admin"},
	{"tcp", "127.0.1.1:8080", "fra1 front end"},
	{"tcp", "127.0.2.1:8080", "nyc1 front end"},
	{"tcp", "127.0.3.1:8080", "sin1 front end"},
	{"tcp", "127.0.1.1:8443", "fra1 front end, https"},
	{"tcp", "127.0.2.1:8443", "nyc1 front end, https"},
	{"tcp", "127.0.3.1:8443", "sin1 front end, https"},
}

var (
	demoDigRE  = regexp.MustCompile(`\+subnet=(\S+) .*# \w+ .*: (127\.\d+\.\d+\.\d+) (\w+)$`)
	demoTempRE = regexp.MustCompile(`(?m)^temp dir: (\S+)`)
	demoPIDsRE = regexp.MustCompile(`(?m)^pids: ([\d ]+)$`)
)

// TestDemo is make demo's "done when": the real tmdemo starts the whole
// group (dnsd, three front ends, six back ends), every dig and curl it
// prints (the https one trusting the demo's CA) gives what it says when
// run exactly as printed, its groupctl
// command shows the members up; SIGINT stops it with exit status 0,
// leaving no process and no temporary directory behind.
func TestDemo(t *testing.T) {
	for _, a := range demoAddrs {
		var c interface{ Close() error }
		var err error
		if a.network == "udp" {
			c, err = net.ListenPacket(a.network, a.addr)
		} else {
			c, err = net.Listen(a.network, a.addr)
		}
		if err != nil {
			t.Fatalf("tmdemo needs %s %s (%s) free, and it is not: %v; stop whatever holds it (another tmdemo or dnsd -demo?)", a.network, a.addr, a.what, err)
		}
		c.Close()
	}

	began := time.Now()
	p := start(t, bin("tmdemo"), []string{"-bin", binDir}, func(line string) bool {
		return strings.Contains(line, "Ctrl-C stops it.")
	})
	t.Logf("tmdemo ready after %v", time.Since(began).Round(time.Millisecond))
	out := p.Logs()
	tmp := demoTempRE.FindStringSubmatch(out)
	pidsLine := demoPIDsRE.FindStringSubmatch(out)
	if tmp == nil || pidsLine == nil {
		t.Fatalf("tmdemo did not print its temp dir and pids:\n%s", out)
	}
	var pids []int
	for _, f := range strings.Fields(pidsLine[1]) {
		n, _ := strconv.Atoi(f)
		pids = append(pids, n)
	}
	if len(pids) != 10 {
		t.Errorf("tmdemo started %d processes, want 10 (dnsd, 3 front ends, 6 back ends)", len(pids))
	}
	var cmds []string
	for _, line := range strings.Split(out, "\n") {
		if c, ok := strings.CutPrefix(line, "  $ "); ok {
			cmds = append(cmds, c)
		}
	}

	want := map[string]string{ // client subnet → the address of its region's mirror
		"198.51.100.0/24": "127.0.1.1",
		"203.0.113.0/24":  "127.0.2.1",
		"192.0.2.0/24":    "127.0.3.1",
		"2001:db8:3::/48": "127.0.3.1",
	}
	digs, curls, statuses := 0, 0, 0
	for _, c := range cmds {
		switch {
		case strings.HasPrefix(c, "dig "):
			m := demoDigRE.FindStringSubmatch(c)
			if m == nil {
				continue // the dig to repeat under load: no fixed answer
			}
			digs++
			if want[m[1]] != m[2] {
				t.Errorf("tmdemo says %s gets %s, want %s", m[1], m[2], want[m[1]])
			}
			if got := strings.TrimSpace(sh(t, c)); got != want[m[1]] {
				t.Errorf("%s\n  printed %q, want %s", c, got, want[m[1]])
			}
		case strings.HasPrefix(c, "curl "):
			curls++
			got := strings.TrimSpace(sh(t, c))
			files, _ := filepath.Glob(filepath.Join(tmp[1], "*", "pub", "file-0001.bin"))
			if len(files) != 1 {
				t.Fatalf("file-0001.bin not found under %s", tmp[1])
			}
			fi, err := os.Stat(files[0])
			if err != nil {
				t.Fatal(err)
			}
			if w := "200 " + strconv.FormatInt(fi.Size(), 10); got != w {
				t.Errorf("%s\n  printed %q, want %q", c, got, w)
			}
		case strings.Contains(c, "groupctl ") && strings.Contains(c, " status ") && statuses == 0:
			statuses++
			got := sh(t, c)
			for _, m := range []string{"fra1", "nyc1", "sin1"} {
				if !regexp.MustCompile(`(?m)^` + m + `\s+up\s`).MatchString(got) {
					t.Errorf("%s\n  does not show %s up:\n%s", c, m, got)
				}
			}
		}
	}
	if digs < 4 || curls != 2 || statuses != 1 {
		t.Errorf("ran %d dig, %d curl (http and https) and %d groupctl status commands, want 4, 2 and 1; tmdemo printed:\n%s", digs, curls, statuses, out)
	}

	p.Signal(syscall.SIGINT)
	probetest.Until(t, 20*time.Second, func() string {
		if !p.Exited() {
			return "tmdemo still running after SIGINT"
		}
		return ""
	})
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("tmdemo exited with %d after SIGINT, want 0:\n%s", code, p.Logs())
	}
	for _, pid := range pids {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			continue
		}
		// The PID exists: it is a leak unless it was reused by another program.
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && (cmdline == nil || strings.Contains(string(cmdline), binDir)) {
			t.Errorf("pid %d (%s) is still there after tmdemo exited", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	if _, err := os.Stat(tmp[1]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the temp dir %s is still there: %v", tmp[1], err)
	}
	t.Logf("whole run %v", time.Since(began).Round(time.Millisecond))
}

// sh runs a printed command line with sh -c, exactly as printed.
func sh(t *testing.T, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", line).CombinedOutput()
	if err != nil {
		t.Errorf("sh -c %q: %v\n%s", line, err, out)
	}
	return string(out)
}
