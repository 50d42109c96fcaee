package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/probe/probetest"
)

// The self-registration scenario (issue 16): a mirror with join on adds
// itself to a real dnsd at start, survives a restart without a duplicate,
// and on SIGTERM leaves the answers before it stops serving, so that
// clients that honour the TTL never reach a closed port.

const (
	joinStaticIP = "127.0.47.1" // sta1, in dnsd's config file
	joinIP       = "127.0.47.2" // joi1, joins by itself
)

func TestJoinAndLeave(t *testing.T) {
	dir := t.TempDir()
	content := faultContent()
	if err := os.MkdirAll(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "root"), "f.bin", string(content))
	cfgPath := faultDNSD(t, dir, 2, "state_file: state.json\n", faultMember{name: "sta1", ip: joinStaticIP})
	// ttl.max is what the leave waits for: short, so that the test is.
	cfg := readFileT(t, cfgPath)
	cfg = strings.Replace(cfg, "ttl: {min: 1, max: 1}", "ttl: {min: 1, max: 2}", 1)
	writeFile(t, dir, "dnsd.yaml", cfg)
	d := startDNSD(t, true, "-config", cfgPath)

	mirrorCfg := joinMirrorConfig(d)
	port, _ := startFaultMirrors(t, dir, []faultMember{{name: "sta1", ip: joinStaticIP}}, mirrorCfg)
	listen := net.JoinHostPort(joinIP, port)
	joi := faultMember{name: "joi1", ip: joinIP}

	// Start → in the answers.
	began := time.Now()
	m, _, err := launchFaultMirror(t, dir, joi, listen, mirrorCfg)
	if err != nil {
		t.Fatal(err)
	}
	probetest.Until(t, 5*time.Second, func() string {
		if a := types(d.Dig(t, faultGroup, "A").Answer); !has(a, "A "+joinIP) {
			return fmt.Sprintf("dig %s A: %v, no %s", faultGroup, a, joinIP)
		}
		return ""
	})
	t.Logf("figure: start → in dnsd's answers: %v", time.Since(began).Round(time.Millisecond))

	// A restart of a member that did not leave (killed): no duplicate.
	if err := m.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-m.done
	if m, _, err = launchFaultMirror(t, dir, joi, listen, mirrorCfg); err != nil {
		t.Fatal(err)
	}
	probetest.Until(t, 5*time.Second, func() string {
		if !strings.Contains(m.Logs(), `msg="joined the group"`) {
			return "the restarted mirror has not joined"
		}
		return ""
	})
	if !strings.Contains(m.Logs(), "how=kept") {
		t.Errorf("the restarted mirror did not keep its member:\n%s", m.Logs())
	}
	v, err := groupView(d.Admin)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mv := range v.Members {
		if mv.Name == "joi1" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the view lists joi1 %d times after a restart, want once: %+v", n, v.Members)
	}
	out, err := groupctl(t, d.Admin, faultSecret, "status", faultGroup)
	if err != nil {
		t.Fatalf("groupctl status: %v\n%s", err, out)
	}
	if !joinedInStatus(out, "joi1") || joinedInStatus(out, "sta1") {
		t.Errorf("groupctl status does not show joi1 (only) as joined:\n%s", out)
	}

	// Removed behind its back (an operator, a lost state file): it
	// finds out at its next check (join.check_interval: 1s) and joins
	// again.
	if out, err := groupctl(t, d.Admin, faultSecret, "remove", faultGroup, "joi1"); err != nil {
		t.Fatalf("groupctl remove: %v\n%s", err, out)
	}
	removed := time.Now()
	probetest.Until(t, 10*time.Second, func() string {
		v, err := groupView(d.Admin)
		if err != nil {
			return err.Error()
		}
		for _, mv := range v.Members {
			if mv.Name == "joi1" {
				return ""
			}
		}
		return "joi1 is not back in the group"
	})
	probetest.Until(t, 5*time.Second, func() string {
		if a := types(d.Dig(t, faultGroup, "A").Answer); !has(a, "A "+joinIP) {
			return fmt.Sprintf("dig %s A: %v, no %s", faultGroup, a, joinIP)
		}
		return ""
	})
	t.Logf("figure: removed → joined again and in dnsd's answers: %v", time.Since(removed).Round(time.Millisecond))
	if !strings.Contains(m.Logs(), "joining again") {
		t.Errorf("the mirror did not log that it joins again:\n%s", m.Logs())
	}

	// The leave, under load of clients that honour the TTL.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	alog := newAnswerLog(time.Now())
	polled := pollAnswers(ctx, d.Addr, alog)
	clients := runTTLClients(ctx, 4, d.Addr, port, content)
	probetest.Until(t, 5*time.Second, func() string {
		if clients.from(joinIP) < 20 {
			return fmt.Sprintf("%d files fetched from %s", clients.from(joinIP), joinIP)
		}
		return ""
	})
	term := time.Now()
	m.Signal(syscall.SIGTERM)

	// Out of the answers while it still serves.
	var outAt time.Duration
	probetest.Until(t, 5*time.Second, func() string {
		if a := types(d.Dig(t, faultGroup, "A").Answer); has(a, "A "+joinIP) {
			return fmt.Sprintf("dig still answers %s: %v", joinIP, a)
		}
		outAt = time.Since(term)
		return ""
	})
	if m.Exited() {
		t.Fatalf("the mirror exited before its wait:\n%s", m.Logs())
	}
	exitAt := waitLeft(t, m, joinIP, port, content, term)
	lastAnswered, _ := alog.lastNamed(joinIP)
	lastAnswered -= term.Sub(alog.start)
	served := clients.lastFrom(joinIP).Sub(term)
	// Some more fetches from sta1 after the exit.
	after := clients.total()
	probetest.Until(t, 5*time.Second, func() string {
		if clients.total() < after+20 {
			return "clients stalled after the exit"
		}
		return ""
	})
	stop()
	<-polled
	clients.wait()
	if f := clients.failed.Load(); f > 0 {
		t.Errorf("%d of %d fetches failed during the leave: %s", f, clients.total(), clients.firstErrors())
	}
	if served <= lastAnswered {
		t.Errorf("the last file from %s was served %v after SIGTERM, not after its last answer (%v)", joinIP, served, lastAnswered)
	}
	t.Logf("figure: leave timeline after SIGTERM: last answer naming it asked %v, dig without it %v, last file served from it %v, exit %v; %d fetches, %d from it, none failed",
		lastAnswered.Round(time.Millisecond), outAt.Round(time.Millisecond), served.Round(time.Millisecond), exitAt.Round(time.Millisecond), clients.total(), clients.from(joinIP))

	if st, err := memberStates(d.Admin); err != nil || st["joi1"] != "" {
		t.Errorf("joi1 still in the view after its leave: %v %v", st, err)
	}
}

// joinMirrorConfig returns the config of the join scenarios' mirrors,
// pushing to and viewing from the dnsd nodes: joi1 joins by itself, any
// other is a member from dnsd's config.
func joinMirrorConfig(nodes ...*dnsdProc) func(m faultMember, listen string) string {
	var urls []string
	for _, d := range nodes {
		urls = append(urls, fmt.Sprintf("%q", "http://"+d.Admin))
	}
	return func(m faultMember, listen string) string {
		join := ""
		if m.name == "joi1" {
			join = fmt.Sprintf("join: {enabled: true, addresses: [%s], check_interval: 1s}\n", m.ip)
		}
		return fmt.Sprintf(`listen: [%q]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s.mirrors.example.test
root: root
capacity: 1000
redirect: {enabled: false}
dnsd: {urls: [%s], secret: %s, push_interval: 300ms, view_interval: 300ms}
%s`, listen, faultGroup, m.name, m.name, strings.Join(urls, ", "), faultSecret, join)
	}
}

// waitLeft checks that a mirror leaving since term still serves at
// ip:port, waits until it exits, wants exit code 0 and returns when it
// exited, after term.
func waitLeft(t *testing.T, m *faultMirrorProc, ip, port string, content []byte, term time.Time) time.Duration {
	t.Helper()
	if code, err := getFile(ip, port, content); err != nil || code != http.StatusOK {
		t.Errorf("the leaving mirror does not serve during its wait: %d %v", code, err)
	}
	select {
	case <-m.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("the mirror did not exit within 15 s of SIGTERM:\n%s", m.Logs())
	}
	exitAt := time.Since(term)
	if code := m.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, m.Logs())
	}
	return exitAt
}

// joinedInStatus reports whether groupctl status shows member's source as
// joined.
func joinedInStatus(out, member string) bool {
	for line := range strings.SplitSeq(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == member {
			return f[2] == "joined"
		}
	}
	return false
}

// getFile fetches /f.bin from ip:port once on a fresh connection.
func getFile(ip, port string, content []byte) (int, error) {
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(ip, port)+"/f.bin", nil)
	if err != nil {
		return 0, err
	}
	req.Host = faultGroup
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode == http.StatusOK && !bytes.Equal(b, content) {
		return 0, fmt.Errorf("%d bytes that are not the file", len(b))
	}
	return resp.StatusCode, nil
}

// ttlClients are clients that resolve the group through dnsd and keep the
// answer for its TTL, as a stub resolver's cache does, then fetch the file
// from its addresses in turn, each on a new connection. They never retry:
// any failure counts.
type ttlClients struct {
	done   chan struct{}
	failed atomic.Int64
	mu     sync.Mutex
	errs   []string
	by     map[string]int
	last   map[string]time.Time
	n      int
}

func runTTLClients(ctx context.Context, n int, dnsAddr, port string, content []byte) *ttlClients {
	r := &ttlClients{done: make(chan struct{}), by: map[string]int{}, last: map[string]time.Time{}}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			c := &dns.Client{Net: "udp", Timeout: time.Second}
			var addrs []string
			var expires time.Time
			for i := 0; ctx.Err() == nil; i++ {
				if time.Now().After(expires) {
					a, ttl, err := resolveTTL(c, dnsAddr)
					if err != nil {
						r.fail(err)
						continue
					}
					addrs, expires = a, time.Now().Add(ttl)
				}
				ip := addrs[i%len(addrs)]
				code, err := getFile(ip, port, content)
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("status %d", code)
				}
				if err != nil {
					r.fail(fmt.Errorf("%s: %w", ip, err))
				} else {
					r.served(ip)
				}
				select {
				case <-ctx.Done():
				case <-time.After(10 * time.Millisecond):
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return r
}

// resolveTTL asks dnsd for the group's A records and returns them with
// the smallest TTL of the answer.
func resolveTTL(c *dns.Client, addr string) ([]string, time.Duration, error) {
	resp, _, err := c.Exchange(new(dns.Msg).SetQuestion(faultGroup+".", dns.TypeA), addr)
	if err != nil {
		return nil, 0, err
	}
	var out []string
	ttl := uint32(1 << 31)
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
			ttl = min(ttl, a.Hdr.Ttl)
		}
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("no address: %s", dns.RcodeToString[resp.Rcode])
	}
	return out, time.Duration(ttl) * time.Second, nil
}

func (r *ttlClients) fail(err error) {
	r.failed.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if len(r.errs) < 5 {
		r.errs = append(r.errs, err.Error())
	}
}

func (r *ttlClients) served(ip string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.by[ip]++
	r.last[ip] = time.Now()
}

func (r *ttlClients) from(ip string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by[ip]
}

func (r *ttlClients) lastFrom(ip string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[ip]
}

func (r *ttlClients) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

func (r *ttlClients) firstErrors() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "; ")
}

func (r *ttlClients) wait() { <-r.done }
