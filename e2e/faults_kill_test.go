package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestFaultMirrorKilled: three mirrors (a, which half the clients have
// cached, loaded over its capacity, so it redirects to b and c), retrying
// clients fetching a file through dnsd; b is killed with SIGKILL under
// that load. What is judged is dnsd: no fresh answer (asked of dnsd by the
// poller or by a client, never a cached one) names b later than the bound
// of its health block plus one interval after the kill, and the last one
// naming it is within that bound too. That no fetch gives up is checked
// as well, but the retrying clients would get the file from a and c
// whatever dnsd answered.
func TestFaultMirrorKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	members := []faultMember{
		{name: "a", ip: "127.0.41.1", capacity: 30},
		{name: "b", ip: "127.0.41.2", capacity: 100000},
		{name: "c", ip: "127.0.41.3", capacity: 100000},
	}
	d := startDNSD(t, true, "-config", faultDNSD(t, dir, len(members), "", members...))
	content := faultContent()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "file.bin", string(content))
	port, ms := startFaultMirrors(t, dir, members, func(m faultMember, listen string) string {
		return fmt.Sprintf(`listen: ["%s"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s.mirrors.example.test
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 200ms}
root: %s
capacity: %g
run_queue: none
timeouts: {shutdown: 2s}
redirect: {enabled: true, max_share: 0.5, min_size: 1KiB, never: ["/"]}
`, listen, faultGroup, m.name, m.name, d.Admin, faultSecret, root, m.capacity)
	})
	// The members are static; their probe URLs, known now, come with a
	// reload of dnsd's config.
	for i := range members {
		members[i].probe = "http://" + ms[i].admin + "/v1/load"
	}
	faultDNSD(t, dir, len(members), "", members...)
	d.Signal(syscall.SIGHUP)
	waitMembersUp(t, d.Admin, members)

	b := ms[1]
	start := time.Now()
	log := newAnswerLog(start, b.ip)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	polled := pollAnswers(ctx, d.Addr, log)
	// Half the clients have a's address cached, the others take dnsd's
	// answer as it comes.
	n := 0
	load := runRetryingClients(ctx, 8, 10*time.Millisecond, "/file.bin", func() *retryingClient {
		c := newRetryingClient(d.Addr, port, content, log)
		if n++; n%2 == 0 {
			c.pin = members[0].ip
		}
		return c
	})
	// Under load for a second at least, until a has redirected a few (or
	// 5 s went by: the redirects are not what is judged).
	warm := time.NewTimer(5 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	for time.Since(start) < time.Second || load.sum(func(c *retryingClient) *atomic.Int64 { return &c.hops }) < 20 {
		select {
		case <-warm.C:
		case <-tick.C:
			continue
		}
		break
	}
	tick.Stop()
	warm.Stop()
	before := load.sum(func(c *retryingClient) *atomic.Int64 { return &c.fetches })

	b.Signal(syscall.SIGKILL)
	killed := time.Since(start)
	<-b.done
	bound := faultHealth.exitBound()
	probetest.Until(t, bound+10*time.Second, func() string {
		// Gone: no answer naming b for two health intervals.
		last, _ := log.lastNamed(b.ip)
		if quiet := time.Since(start) - max(last, killed); quiet < 2*faultHealth.Interval {
			return fmt.Sprintf("dnsd named b %v after the kill", (last - killed).Round(time.Millisecond))
		}
		return ""
	})
	// The load goes on for two more seconds without b.
	<-time.After(2 * time.Second)
	cancel()
	load.wait()
	<-polled

	last, _ := log.lastNamed(b.ip)
	took := max(last-killed, 0)
	fetches := load.sum(func(c *retryingClient) *atomic.Int64 { return &c.fetches })
	t.Logf("b killed %v into the load; the last answer naming it was asked %v after the kill; bound %v (%s; the issue's fall × interval + jitter = %v is for a member that does not push)",
		killed.Round(time.Millisecond), took.Round(time.Millisecond), bound, faultHealth.exitBoundText(),
		time.Duration(faultHealth.Fall)*faultHealth.Interval+faultHealth.Jitter)
	t.Logf("clients: %d fetches (%d after the kill), %d needed another round, %d tries, %d redirects followed (%d of them to a dead mirror, retried), %d gave up; %d answers seen (%d naming b after the kill)",
		fetches, fetches-before, load.sum(func(c *retryingClient) *atomic.Int64 { return &c.retried }), load.sum(func(c *retryingClient) *atomic.Int64 { return &c.tries }),
		load.sum(func(c *retryingClient) *atomic.Int64 { return &c.hops }), load.sum(func(c *retryingClient) *atomic.Int64 { return &c.hopFailed }), load.gaveUp.Load(), log.n, log.namedAfter(b.ip, killed))
	if took > bound+faultHealth.Interval {
		t.Errorf("b was in dnsd's answers %v after SIGKILL, want within %v (+ %v for a busy host)", took, bound, faultHealth.Interval)
	}
	if late := log.namedAfter(b.ip, killed+bound+faultHealth.Interval); late > 0 {
		t.Errorf("%d fresh answers named b later than %v after SIGKILL (bound %v + %v for a busy host), want 0",
			late, bound+faultHealth.Interval, bound, faultHealth.Interval)
	}
	if n := load.gaveUp.Load(); n > 0 {
		t.Errorf("%d of %d fetches gave up after retrying every address for %v; first: %s", n, fetches, retryingGiveUp, load.firstErrors())
	}
	if fetches-before < 50 {
		t.Errorf("only %d fetches after the kill: no load", fetches-before)
	}
}
