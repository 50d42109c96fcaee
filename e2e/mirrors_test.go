package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/transmirror/transmirror/probe/probetest"
)

// mirrorProc is a running mirror with the addresses it reported.
type mirrorProc struct {
	*proc
	HTTP  string // public host:port
	HTTPS string // the first public HTTPS host:port (tls.listen); "" without
	Admin string // admin host:port
}

var (
	httpAddrRE  = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	httpsAddrRE = regexp.MustCompile(`msg="https listening" addr=(\S+)`)
)

// startMirror writes a mirror config into dir and starts the real mirror.
// Its load is its requests alone (run_queue: none): the host's load
// average would make it redirect the tests' requests on a busy machine.
func startMirror(t testing.TB, dir, name, dnsdAdmin, secret string, extra string) *mirrorProc {
	t.Helper()
	root := filepath.Join(dir, name+"-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "hello.txt", "hello from "+name+"\n")
	cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: %s
host: %s.mirrors.example.test
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 200ms}
root: %s
capacity: 1000
run_queue: none
%s`, name, name, dnsdAdmin, secret, root, extra)
	return runMirror(t, writeFile(t, dir, name+".yaml", cfg), name)
}

// runMirror starts the real mirror on the config at path and waits until
// it has reported its public and admin addresses.
func runMirror(t testing.TB, path, name string, args ...string) *mirrorProc {
	t.Helper()
	m, err := launchMirror(t, path, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// launchMirror is runMirror returning an error, rather than failing the
// test, when the process exits before it is ready (its address taken).
func launchMirror(t testing.TB, path, name string, args ...string) (*mirrorProc, error) {
	t.Helper()
	m := &mirrorProc{}
	p, err := launch(t, bin("mirror"), append([]string{"-config", path}, args...), func(line string) bool {
		if mm := httpAddrRE.FindStringSubmatch(line); mm != nil && m.HTTP == "" {
			m.HTTP = mm[1]
		}
		if mm := httpsAddrRE.FindStringSubmatch(line); mm != nil && m.HTTPS == "" {
			m.HTTPS = mm[1]
		}
		if mm := adminAddrRE.FindStringSubmatch(line); mm != nil {
			m.Admin = mm[1]
		}
		return strings.Contains(line, `msg="mirror started"`)
	})
	if err != nil {
		return nil, fmt.Errorf("mirror %s: %w", name, err)
	}
	m.proc = p
	if m.HTTP == "" || m.Admin == "" {
		t.Fatalf("mirror %s did not report its addresses:\n%s", name, m.Logs())
	}
	return m, nil
}

// onePort starts n processes that must all listen on one port, each on
// its own loopback address: start(i, port) starts the i-th on port ("0":
// any; the first one picks it) and returns it with the address it
// listens on, or an error when it could not (the port taken on its
// address). Should one fail, the ones started are stopped and all start
// again on another port, up to 5 times. It returns the port and the
// processes in order.
func onePort[P interface{ Stop() }](t testing.TB, n int, start func(i int, port string) (P, string, error)) (string, []P) {
	t.Helper()
	var lastErr error
	for attempt := 1; attempt <= 5; attempt++ {
		var started []P
		port := "0"
		lastErr = nil
		for i := range n {
			p, addr, err := start(i, port)
			if err != nil {
				lastErr = err
				break
			}
			started = append(started, p)
			if port == "0" {
				_, port, _ = net.SplitHostPort(addr)
			}
		}
		if lastErr == nil {
			return port, started
		}
		t.Logf("attempt %d: %v; trying another port", attempt, lastErr)
		for _, p := range started {
			p.Stop()
		}
	}
	t.Fatalf("could not start %d processes on one port: %v", n, lastErr)
	return "", nil
}

// groupctl runs the real groupctl against a dnsd admin address.
func groupctl(t testing.TB, admin, secret string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin("groupctl"), append([]string{"-server", "http://" + admin}, args...)...)
	cmd.Env = append(os.Environ(), "TRANSMIRROR_SECRET="+secret)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// startMembersDNSD starts dnsd on testdata/members.yaml in dir.
func startMembersDNSD(t *testing.T, dir string) *dnsdProc {
	t.Helper()
	for _, f := range []struct{ src, dst string }{
		{filepath.Join("testdata", "members.yaml"), "dnsd.yaml"},
		{filepath.Join("testdata", "example.test.zone"), "example.test.zone"},
	} {
		if _, err := os.Stat(filepath.Join(dir, f.dst)); err == nil {
			continue
		}
		data, err := os.ReadFile(f.src)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, f.dst, string(data))
	}
	return startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))
}

// answers returns the A records dig gets for the group.
func answers(t *testing.T, d *dnsdProc) []string {
	r := d.Dig(t, "www.example.test", "A")
	if r.Status != "NOERROR" {
		t.Fatalf("dig: %s\n%s", r.Status, r.Raw)
	}
	var out []string
	for _, x := range r.Answer {
		out = append(out, x.Data)
	}
	return out
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// membersHealthConfig is the health block of testdata/members.yaml, the
// config of the dnsd that the membership tests run.
type membersHealthConfig struct {
	Interval, Timeout, Jitter time.Duration
	Fall                      int
}

// membersHealth reads it.
func membersHealth(t *testing.T) membersHealthConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "members.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Health struct {
			Interval, Timeout, Jitter string
			Fall                      int
		} `yaml:"health"`
	}
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("members.yaml: %v", err)
	}
	var h membersHealthConfig
	for _, d := range []struct {
		text string
		to   *time.Duration
	}{{c.Health.Interval, &h.Interval}, {c.Health.Timeout, &h.Timeout}, {c.Health.Jitter, &h.Jitter}} {
		if *d.to, err = time.ParseDuration(d.text); err != nil {
			t.Fatalf("members.yaml: health: %v", err)
		}
	}
	if h.Fall = c.Health.Fall; h.Fall < 1 || h.Interval <= 0 {
		t.Fatalf("members.yaml: health %+v: the test needs interval and fall", c.Health)
	}
	return h
}

// exitBound is the longest dnsd may keep a member whose mirror has
// stopped in its answers, from the stop: the mirror's last push (before
// it stopped) keeps it fresh for two intervals, during which dnsd does
// not pull; then the watcher pulls once an interval from the end of the
// freshness, each pull up to a jitter late, and the fall-th failing pull,
// which ends within the probe timeout, takes it out:
//
//	2·interval + (fall−1)·interval + jitter + timeout
func (h membersHealthConfig) exitBound() time.Duration {
	return 2*h.Interval + time.Duration(h.Fall-1)*h.Interval + h.Jitter + h.Timeout
}

func (h membersHealthConfig) exitBoundText() string {
	return fmt.Sprintf("push freshness 2 × %v + (fall %d − 1) × interval %v + jitter %v + probe timeout %v",
		h.Interval, h.Fall, h.Interval, h.Jitter, h.Timeout)
}

// TestMembershipWithRealMirror drives the real binaries: groupctl adds a
// mirror, dig sees it; the mirror process stops, dig stops seeing it
// within the bound of exitBound; a restart of dnsd keeps the run-time
// member; groupctl remove takes it out at once.
func TestMembershipWithRealMirror(t *testing.T) {
	const secret = "e2e-group-secret"
	dir := t.TempDir()
	d := startMembersDNSD(t, dir)
	m := startMirror(t, dir, "fra9", d.Admin, secret, "")

	out, err := groupctl(t, d.Admin, secret, "add", "www.example.test", "-name", "fra9", "-host", "fra9.mirrors.example.test",
		"-addr", "127.0.9.1", "-capacity", "1000", "-lat", "50.11", "-lon", "8.68", "-country", "DE",
		"-probe", "http://"+m.Admin+"/v1/load")
	if err != nil {
		t.Fatalf("groupctl add: %v\n%s", err, out)
	}
	probetest.Until(t, 5*time.Second, func() string {
		if a := answers(t, d); !has(a, "127.0.9.1") {
			return fmt.Sprintf("dig does not see the added mirror: %v", a)
		}
		return ""
	})
	probetest.Until(t, 5*time.Second, func() string {
		out, err := groupctl(t, d.Admin, secret, "status", "www.example.test")
		if err != nil || !regexp.MustCompile(`fra9\s+up\s+runtime`).MatchString(out) {
			return fmt.Sprintf("groupctl status does not show fra9 up: %v\n%s", err, out)
		}
		return ""
	})
	out, _ = groupctl(t, d.Admin, secret, "status", "www.example.test")
	t.Logf("groupctl status:\n%s", out)

	// Stop the mirror process; from then on, the bound (see exitBound) on
	// when dnsd takes it out of its answers.
	hc := membersHealth(t)
	bound := hc.exitBound()
	headroom := hc.Interval // dnsd's timers late on a busy host
	m.Stop()
	stopped := time.Now() // it has exited: no push after this
	// lastSeen is when the last dig that still had the mirror was sent:
	// the mirror was still in the answers then. The time a dig takes is
	// not the mirror's, so it is not counted against the bound.
	var lastSeen, gone time.Duration
	probetest.Until(t, 10*time.Second, func() string {
		sent := time.Since(stopped)
		if a := answers(t, d); has(a, "127.0.9.1") {
			lastSeen = sent
			return fmt.Sprintf("dig still sees the stopped mirror %v after the stop", time.Since(stopped).Round(time.Millisecond))
		}
		gone = time.Since(stopped)
		return ""
	})
	t.Logf("the stopped mirror was in the answers %v after the stop and gone %v after it (bound %v: %s)",
		lastSeen.Round(time.Millisecond), gone.Round(time.Millisecond), bound, hc.exitBoundText())
	if lastSeen > bound+headroom {
		t.Errorf("dig still saw the stopped mirror %v after the stop, want it gone within %v (+ %v headroom)", lastSeen, bound, headroom)
	}

	// Restart dnsd: the run-time member is still there (down now).
	d.Stop()
	d2 := startMembersDNSD(t, dir)
	out, err = groupctl(t, d2.Admin, secret, "-o", "json", "status", "www.example.test")
	if err != nil || !strings.Contains(out, `"name":"fra9"`) || !strings.Contains(out, `"source":"runtime"`) {
		t.Fatalf("after a restart fra9 must still be a member: %v\n%s", err, out)
	}

	// Remove it: gone at once, and stays gone after another restart.
	if out, err := groupctl(t, d2.Admin, secret, "remove", "www.example.test", "fra9"); err != nil {
		t.Fatalf("groupctl remove: %v\n%s", err, out)
	}
	if out, _ := groupctl(t, d2.Admin, secret, "-o", "json", "status", "www.example.test"); strings.Contains(out, `"fra9"`) {
		t.Errorf("fra9 still listed after remove:\n%s", out)
	}
	// A write without the secret changes nothing.
	if out, err := groupctl(t, d2.Admin, "wrong-secret", "remove", "www.example.test", "sin1"); err == nil || !strings.Contains(out, "401") {
		t.Errorf("remove with a wrong secret: %v\n%s", err, out)
	}
}
