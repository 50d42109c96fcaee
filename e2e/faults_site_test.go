package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestFaultSiteBackendsDown: a site (a front end over two back ends) is a
// member of the group. When both back ends stop, the front end is not
// serving: its /-/healthy answers 503, it stops pushing and its load
// report answers 503, so dnsd takes the site out of its answers; when the
// back ends come back (on the same addresses), so does the site.
func TestFaultSiteBackendsDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	other := faultMember{name: "sin1", ip: "127.0.43.1"}
	d := startDNSD(t, true, "-config", faultDNSD(t, dir, 4, "", other))
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	content := faultContent()
	writeFile(t, root, "file.bin", string(content))

	// The back ends; a restart puts each on the address it had.
	backendCfg := func(name, listen string) string {
		return writeFile(t, dir, name+".yaml", fmt.Sprintf(`listen: ["%s"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s.site.example.test
root: %q
capacity: 1000
redirect: {enabled: false}
timeouts: {shutdown: 2s}
`, listen, faultGroup, name, name, root))
	}
	names := []string{"be1", "be2"}
	bes := make([]*mirrorProc, len(names))
	var lines string
	for i, name := range names {
		bes[i] = runMirror(t, backendCfg(name, "127.0.0.1:0"), name)
		lines += fmt.Sprintf("  - {name: %s, url: \"http://%s\"}\n", name, bes[i].HTTP)
	}
	const feInterval, feTimeout, feFall, feRise = 200 * time.Millisecond, 150 * time.Millisecond, 2, 2
	const pushInterval = 200 * time.Millisecond
	fe := runMirror(t, writeFile(t, dir, "fe.yaml", fmt.Sprintf(`listen: ["127.0.43.2:0"]
admin: 127.0.0.1:0
group: %s
member: fe
host: fe.mirrors.example.test
dnsd: {url: "http://%s", secret: %q, push_interval: %v, view_interval: 1s}
capacity: 1000
redirect: {enabled: false}
timeouts: {shutdown: 2s}
backends:
%ssite:
  mode: proxy
  health: {interval: %v, timeout: %v, rise: %d, fall: %d}
`, faultGroup, d.Admin, faultSecret, pushInterval, lines, feInterval, feTimeout, feRise, feFall)), "fe")
	feIP, _, _ := net.SplitHostPort(fe.HTTP)
	faultAdd(t, d, faultMember{name: "fe", ip: feIP, probe: "http://" + fe.Admin + "/v1/load"})

	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	status := func(u string) int {
		resp, err := hc.Get(u)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	start := time.Now()
	log := newAnswerLog(start)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polled := pollAnswers(ctx, d.Addr, log)
	named := func(within time.Duration) bool {
		last, ok := log.lastNamed(feIP)
		return ok && time.Since(start)-last < within
	}
	probetest.Until(t, 10*time.Second, func() string {
		if st, err := memberStates(d.Admin); err != nil || st["fe"] != "up" || !named(100*time.Millisecond) {
			return fmt.Sprintf("the site is not up and answered: %v %v", st, err)
		}
		return ""
	})
	if c := status("http://" + fe.HTTP + "/file.bin"); c != http.StatusOK {
		t.Fatalf("GET /file.bin through the front end: %d", c)
	}

	// Both back ends fail.
	for _, be := range bes {
		be.Stop()
	}
	failed := time.Since(start)
	var unhealthy time.Duration
	probetest.Until(t, 10*time.Second, func() string {
		if c := status("http://" + fe.HTTP + "/-/healthy"); c != http.StatusServiceUnavailable {
			return fmt.Sprintf("the front end's /-/healthy answers %d with no back end", c)
		}
		unhealthy = time.Since(start)
		return ""
	})
	if c := status("http://" + fe.Admin + "/v1/load"); c != http.StatusServiceUnavailable {
		t.Errorf("the front end's load report answers %d with no back end, want 503", c)
	}
	h := faultHealth
	feBound := time.Duration(feFall)*feInterval + feTimeout
	bound := feBound + h.exitBound()
	probetest.Until(t, bound+10*time.Second, func() string {
		if st, _ := memberStates(d.Admin); st["fe"] != "down" || named(2*h.Interval) {
			return fmt.Sprintf("dnsd still has the site: %q", st["fe"])
		}
		return ""
	})
	lastNamed, _ := log.lastNamed(feIP)
	out := lastNamed - failed
	t.Logf("back ends stopped: the front end unhealthy %v later, the last answer naming the site asked %v later (bound %v: the front end's fall %d × %v + timeout %v, then %s)",
		(unhealthy - failed).Round(time.Millisecond), out.Round(time.Millisecond), bound, feFall, feInterval, feTimeout, h.exitBoundText())
	if out > bound+h.Interval {
		t.Errorf("dnsd named the site %v after its back ends stopped, want within %v (+ %v for a busy host)", out, bound, h.Interval)
	}

	// The back ends come back where they were.
	for i, name := range names {
		bes[i] = runMirror(t, backendCfg(name, bes[i].HTTP), name)
	}
	back := time.Since(start)
	var healthy, answered time.Duration
	probetest.Until(t, 15*time.Second, func() string {
		if healthy == 0 {
			if c := status("http://" + fe.HTTP + "/-/healthy"); c != http.StatusOK {
				return fmt.Sprintf("the front end's /-/healthy answers %d with its back ends back", c)
			}
			healthy = time.Since(start)
		}
		if !named(100 * time.Millisecond) {
			return "dnsd does not name the site again"
		}
		answered = time.Since(start)
		return ""
	})
	cancel()
	<-polled
	// Back: the front end's rise checks, then dnsd's rise successes from
	// its pushes (twice rise for a member that flapped).
	backBound := time.Duration(feRise)*feInterval + feTimeout + time.Duration(2*faultRise+1)*pushInterval
	t.Logf("back ends back: the front end healthy %v later, the site in dnsd's answers %v later (bound %v: rise %d × %v + timeout %v, then 2 × rise %d pushes every %v and one more)",
		(healthy - back).Round(time.Millisecond), (answered - back).Round(time.Millisecond), backBound, feRise, feInterval, feTimeout, faultRise, pushInterval)
	if took := answered - back; took > backBound+h.Interval {
		t.Errorf("the site was back in dnsd's answers %v after its back ends, want within %v (+ %v for a busy host)", took, backBound, h.Interval)
	}
	if c := status("http://" + fe.HTTP + "/file.bin"); c != http.StatusOK {
		t.Errorf("GET /file.bin through the front end after the back ends came back: %d", c)
	}
}
