package e2e

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// unboundProc is a real recursive resolver (Debian's unbound) whose only
// way out is a stub zone pointing at dnsd on loopback.
type unboundProc struct {
	*proc
	Port string
}

// startUnbound starts unbound on a loopback port with stub zones for origins
// served by dnsd at dnsdPort. It can reach nothing past loopback: every
// name outside the stub zones is refused locally ("." refuse, with the stub
// origins transparent and the default "test." zone off), so it never primes
// the root or sends a packet anywhere but to dnsd.
func startUnbound(t testing.TB, dnsdPort string, origins ...string) *unboundProc {
	t.Helper()
	return startUnboundStubs(t, []string{"127.0.0.1@" + dnsdPort}, "", origins...)
}

// startUnboundStubs is startUnbound with several stub addresses (ip@port)
// for each origin, an NS set that unbound spreads its queries over and
// retries the others of, and extra server options (indented lines; a
// module-config among them replaces the iterator alone).
func startUnboundStubs(t testing.TB, stubs []string, extra string, origins ...string) *unboundProc {
	t.Helper()
	if _, err := exec.LookPath("unbound"); err != nil {
		t.Fatalf("unbound is not installed (make deps installs it): %v", err)
	}
	dir := t.TempDir()
	var lastErr string
	for try := 0; try < 5; try++ {
		_, port, _ := net.SplitHostPort(probetest.FreeAddr(t, "udp"))
		conf := fmt.Sprintf(`server:
    interface: 127.0.0.1
    port: %s
    do-daemonize: no
    chroot: ""
    username: ""
    directory: "%s"
    pidfile: "%s"
    logfile: ""
    use-syslog: no
    log-time-ascii: yes
    verbosity: 1
    num-threads: 1
    do-ip4: yes
    do-ip6: no
    do-udp: yes
    do-tcp: yes
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    module-config: "iterator"
    qname-minimisation: no
    prefetch: no
    local-zone: "." refuse
    local-zone: "test." nodefault
%sremote-control:
    control-enable: no
`, port, dir, filepath.Join(dir, "unbound.pid"), extra)
		for _, o := range origins {
			conf = strings.Replace(conf, "remote-control:", fmt.Sprintf("    local-zone: %q transparent\nremote-control:", o), 1)
			conf += fmt.Sprintf("stub-zone:\n    name: %q\n", o)
			for _, a := range stubs {
				conf += fmt.Sprintf("    stub-addr: %s\n", a)
			}
		}
		if strings.Contains(extra, "module-config:") {
			conf = strings.Replace(conf, "    module-config: \"iterator\"\n", "", 1)
		}
		cf := writeFile(t, dir, "unbound.conf", conf)
		if out, err := exec.Command("unbound-checkconf", cf).CombinedOutput(); err != nil {
			t.Fatalf("unbound-checkconf: %v\n%s", err, out)
		}
		u := &unboundProc{Port: port}
		p := startNoWait(t, "unbound", "-d", "-c", cf)
		u.proc = p
		// Ready when it answers; a port taken in the meantime makes it exit.
		ready := false
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) && !p.Exited() {
			r := dig(t, "127.0.0.1", port, "+time=1", "localhost", "A")
			if r.Status != "" {
				ready = true
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if ready {
			return u
		}
		lastErr = p.Logs()
		p.Stop()
	}
	t.Fatalf("unbound did not start:\n%s", lastErr)
	return nil
}

// startNoWait starts a binary and returns without waiting for a log line.
func startNoWait(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	return start(t, name, args, func(string) bool { return true })
}

// TestUnboundResolvesDelegatedZone resolves names of the zone served by dnsd
// through a real recursive resolver: what delegating a zone means for users.
func TestUnboundResolvesDelegatedZone(t *testing.T) {
	d, _ := startE2EDNSD(t)
	u := startUnbound(t, d.Port, "example.test.")
	ask := func(args ...string) *digResult { return dig(t, "127.0.0.1", u.Port, args...) }

	cases := []struct {
		name   string
		args   []string
		status string
		check  func(t *testing.T, r *digResult)
	}{
		{"static A", []string{"mail.example.test", "A"}, "NOERROR", func(t *testing.T, r *digResult) {
			sameSet(t, "answer", types(r.Answer), []string{"A 127.0.0.25"})
			if !r.Flags["ra"] || r.Flags["aa"] {
				t.Errorf("flags %v: a recursive answer has ra and no aa", r.Flags)
			}
		}},
		{"group A within its TTL bounds", []string{"www.example.test", "A"}, "NOERROR", func(t *testing.T, r *digResult) {
			if len(r.Answer) != 2 {
				t.Errorf("answer %v, want 2 group members", r.Answer)
			}
			for _, x := range r.Answer {
				if x.TTL > 60 {
					t.Errorf("%v: TTL above the group max of 60", x)
				}
			}
		}},
		{"CNAME into the group", []string{"docs.example.test", "A"}, "NOERROR", func(t *testing.T, r *digResult) {
			if len(r.Answer) < 2 || r.Answer[0].Type != "CNAME" {
				t.Errorf("answer %v, want CNAME + group addresses", r.Answer)
			}
		}},
		{"wildcard", []string{"img.cdn.example.test", "A"}, "NOERROR", func(t *testing.T, r *digResult) {
			sameSet(t, "answer", types(r.Answer), []string{"A 127.0.9.9"})
		}},
		{"NXDOMAIN", []string{"nope.example.test", "A"}, "NXDOMAIN", func(t *testing.T, r *digResult) {
			if len(r.Authority) != 1 || r.Authority[0].Type != "SOA" {
				t.Errorf("authority %v, want the SOA", r.Authority)
			}
		}},
		{"big answer through TCP fallback", []string{"big.example.test", "TXT"}, "NOERROR", func(t *testing.T, r *digResult) {
			if len(r.Answer) != 40 {
				t.Errorf("%d TXT records through unbound, want 40", len(r.Answer))
			}
		}},
		{"outside the stub zones: refused, never sent out", []string{"www.example.com", "A"}, "REFUSED", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ask(tc.args...)
			if r.Status != tc.status {
				t.Fatalf("status %q, want %q:\n%s", r.Status, tc.status, r.Raw)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
			if t.Failed() {
				t.Logf("dig output:\n%s", r.Raw)
			}
		})
	}
}
