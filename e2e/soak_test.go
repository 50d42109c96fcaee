//go:build soak

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/miekg/dns"
)

// The soak (make soak; not part of make test): dnsd and three mirrors on
// loopback under mixed DNS and HTTP load for SOAK_DURATION (default 10m),
// while members flap: every flap period one mirror is stopped (SIGTERM)
// and, a quarter period later, started again on its address; in between a
// member is drained and undrained with groupctl. It asserts that
//
//   - no client request fails: the DNS clients are stub resolvers (three
//     tries of 1 s, then a failure; every answer NOERROR with an address)
//     and the HTTP clients follow DNS as the fault scenarios' client
//     model does (retryingClient: next address after a failed connect or a
//     cut response, a new resolution 100 ms later when none is left, one
//     302 followed, a failure after 15 s without the file, or at once on
//     any status but 200 and 302, or a body that is not the file);
//   - the goroutines and the resident memory of dnsd and of each mirror
//     stay within soakGoroutineSlack and soakRSSFactor × + soakRSSSlack
//     of the most seen in the warm-up (the first tenth of the run, at
//     least 15 s, without flapping), for the restarted mirrors the warm-up
//     of their first incarnation.
//
// The flapping starts after the warm-up. SOAK_DURATION=1m make soak tries
// it short.
const (
	soakGoroutineSlack = 50
	soakRSSFactor      = 1.5
	soakRSSSlack       = 32 << 20
	soakSampleEvery    = 2 * time.Second
)

func TestSoak(t *testing.T) {
	duration := 10 * time.Minute
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 30*time.Second {
			t.Fatalf("SOAK_DURATION=%q: want a duration of at least 30s", s)
		}
		duration = d
	}
	warm := max(duration/10, 15*time.Second)
	flapEvery := min(max(duration/20, 8*time.Second), 30*time.Second)

	dir := t.TempDir()
	members := []faultMember{
		{name: "a", ip: "127.0.46.1", capacity: 2000},
		{name: "b", ip: "127.0.46.2", capacity: 2000},
		{name: "c", ip: "127.0.46.3", capacity: 2000},
	}
	d := startDNSD(t, true, "-config", faultDNSD(t, dir, len(members), "state_file: state.json\n", members...))
	content := faultContent()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "file.bin", string(content))
	cfg := func(m faultMember, listen string) string {
		return fmt.Sprintf(`listen: ["%s"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s.mirrors.example.test
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 500ms}
root: %s
capacity: %g
run_queue: none
timeouts: {shutdown: 5s}
redirect: {enabled: true, max_share: 0.5, min_size: 1KiB, never: ["/"]}
`, listen, faultGroup, m.name, m.name, d.Admin, faultSecret, root, m.capacity)
	}
	port, ms := startFaultMirrors(t, dir, members, cfg)
	// The probe URLs name the admin ports, which change with a restart:
	// the mirrors' pushes keep them watched, a stopped one goes stale.
	var mu sync.Mutex // guards ms
	current := func(i int) *faultMirrorProc {
		mu.Lock()
		defer mu.Unlock()
		return ms[i]
	}
	waitMembersUp(t, d.Admin, members)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()

	// HTTP clients: eight of the client model, two with a's address cached.
	n := 0
	load := runRetryingClients(ctx, 8, 20*time.Millisecond, "/file.bin", func() *retryingClient {
		c := newRetryingClient(d.Addr, port, content, nil)
		if n++; n%4 == 0 {
			c.pin = members[0].ip
		}
		return c
	})
	// DNS clients: two stub resolvers asking for the group and the
	// members' own names, one query every 5 ms each.
	var dnsSent, dnsRetried, dnsFailed atomic.Int64
	var dnsErrMu sync.Mutex
	var dnsErrs []string
	var dnsWG sync.WaitGroup
	names := []string{faultGroup + ".", "docs.example.test.", "a.mirrors.example.test.", "q1.any.example.test."}
	for i := range 2 {
		dnsWG.Go(func() {
			c := &dns.Client{Net: []string{"udp", "tcp"}[i%2], Timeout: time.Second}
			for k := 0; ctx.Err() == nil; k++ {
				m := new(dns.Msg).SetQuestion(names[k%len(names)], dns.TypeA)
				dnsSent.Add(1)
				var err error
				for try := range 3 {
					var r *dns.Msg
					if r, _, err = c.Exchange(m, d.Addr); err == nil {
						if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
							err = fmt.Errorf("%s: rcode %s, %d answers", names[k%len(names)], dns.RcodeToString[r.Rcode], len(r.Answer))
						}
						break
					}
					if try == 0 {
						dnsRetried.Add(1)
					}
				}
				if err != nil {
					dnsFailed.Add(1)
					dnsErrMu.Lock()
					if len(dnsErrs) < 5 {
						dnsErrs = append(dnsErrs, err.Error())
					}
					dnsErrMu.Unlock()
				}
				select {
				case <-ctx.Done():
				case <-time.After(5 * time.Millisecond):
				}
			}
		})
	}

	// Flapping: in each period, one mirror stopped and started again, one
	// member drained and undrained.
	var stops, restarts, drains atomic.Int64
	var chaosErr atomic.Pointer[string]
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		select { // the warm-up is the steady state the bounds come from
		case <-ctx.Done():
			return
		case <-time.After(warm):
		}
		tick := time.NewTicker(flapEvery / 4)
		defer tick.Stop()
		for step := 0; ; step++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			i := (step / 4) % len(members)
			drained := members[(i+1)%len(members)].name
			var err error
			switch step % 4 {
			case 0:
				current(i).Stop()
				stops.Add(1)
			case 1:
				var p *faultMirrorProc
				if p, _, err = launchFaultMirror(t, dir, members[i], net.JoinHostPort(members[i].ip, port), cfg); err == nil {
					mu.Lock()
					ms[i] = p
					mu.Unlock()
					restarts.Add(1)
				}
			case 2:
				var out string
				if out, err = groupctl(t, d.Admin, faultSecret, "drain", faultGroup, drained); err != nil {
					err = fmt.Errorf("groupctl drain %s: %w: %s", drained, err, out)
				}
				drains.Add(1)
			case 3:
				var out string
				if out, err = groupctl(t, d.Admin, faultSecret, "undrain", faultGroup, drained); err != nil {
					err = fmt.Errorf("groupctl undrain %s: %w: %s", drained, err, out)
				}
			}
			if err != nil {
				msg := fmt.Sprintf("step %d at %v: %v", step, time.Since(start).Round(time.Second), err)
				chaosErr.CompareAndSwap(nil, &msg)
			}
		}
	}()

	// Samples: goroutines and RSS of every process, every soakSampleEvery.
	type sample struct {
		at         time.Duration
		goroutines float64
		rss        int64
	}
	samples := map[string][]sample{} // "dnsd", "a#1" (mirror a, first incarnation), …
	incarnation := map[string]int{}
	lastPID := map[string]int{}
	tick := time.NewTicker(soakSampleEvery)
	for ctx.Err() == nil {
		take := func(key string, pid int, admin string) {
			g, err := goroutines(admin)
			if err != nil {
				return // stopping, or stopped: the next sample has the new one
			}
			rss, err := rssBytes(pid)
			if err != nil {
				return
			}
			samples[key] = append(samples[key], sample{time.Since(start), g, rss})
		}
		take("dnsd", d.cmd.Process.Pid, d.Admin)
		for i, m := range members {
			p := current(i)
			if p.Exited() {
				continue
			}
			if lastPID[m.name] != p.cmd.Process.Pid {
				lastPID[m.name] = p.cmd.Process.Pid
				incarnation[m.name]++
			}
			take(fmt.Sprintf("%s#%d", m.name, incarnation[m.name]), p.cmd.Process.Pid, p.admin)
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	tick.Stop()
	load.wait()
	dnsWG.Wait()
	<-chaosDone

	// The bounds, from the warm-up of dnsd and of each mirror's first
	// incarnation.
	baseline := map[string]sample{}
	for key, ss := range samples {
		proc, _, _ := strings.Cut(key, "#")
		if key != proc+"#1" && key != "dnsd" {
			continue
		}
		var b sample
		for _, s := range ss {
			if s.at < warm {
				b.goroutines, b.rss = max(b.goroutines, s.goroutines), max(b.rss, s.rss)
			}
		}
		baseline[proc] = b
	}
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "process\tsamples\twarm goroutines\tmax goroutines\tlimit\twarm RSS MiB\tmax RSS MiB\tlimit MiB\t")
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range samples {
			if !yield(k) {
				return
			}
		}
	}) {
		proc, _, _ := strings.Cut(key, "#")
		b, ok := baseline[proc]
		if !ok || b.rss == 0 {
			t.Errorf("%s: no warm-up samples", proc)
			continue
		}
		gLimit := b.goroutines + soakGoroutineSlack
		rssLimit := int64(float64(b.rss)*soakRSSFactor) + soakRSSSlack
		var most sample
		for _, s := range samples[key] {
			most.goroutines, most.rss = max(most.goroutines, s.goroutines), max(most.rss, s.rss)
			if s.goroutines > gLimit {
				t.Errorf("%s at %v: %.0f goroutines, over the limit %.0f (warm-up %.0f + %d)", key, s.at.Round(time.Second), s.goroutines, gLimit, b.goroutines, soakGoroutineSlack)
			}
			if s.rss > rssLimit {
				t.Errorf("%s at %v: RSS %d MiB, over the limit %d MiB (warm-up %d MiB × %.1f + %d MiB)", key, s.at.Round(time.Second), s.rss>>20, rssLimit>>20, b.rss>>20, soakRSSFactor, soakRSSSlack>>20)
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.0f\t%.0f\t%.1f\t%.1f\t%.1f\t\n", key, len(samples[key]), b.goroutines, most.goroutines, gLimit,
			float64(b.rss)/(1<<20), float64(most.rss)/(1<<20), float64(rssLimit)/(1<<20))
	}
	tw.Flush()
	fetches := load.sum(func(c *retryingClient) *atomic.Int64 { return &c.fetches })
	t.Logf("soak of %v (warm-up %v, flap period %v): %d mirror stops and %d restarts, %d drains; HTTP: %d fetches, %d needed another round, %d redirects followed (%d to a stopped mirror), %d failed; DNS: %d queries, %d retried, %d failed\n%s",
		duration, warm, flapEvery, stops.Load(), restarts.Load(), drains.Load(),
		fetches, load.sum(func(c *retryingClient) *atomic.Int64 { return &c.retried }), load.sum(func(c *retryingClient) *atomic.Int64 { return &c.hops }),
		load.sum(func(c *retryingClient) *atomic.Int64 { return &c.hopFailed }), load.gaveUp.Load(),
		dnsSent.Load(), dnsRetried.Load(), dnsFailed.Load(), sb.String())
	if p := chaosErr.Load(); p != nil {
		t.Errorf("flapping: %s", *p)
	}
	if n := load.gaveUp.Load(); n > 0 {
		t.Errorf("%d of %d HTTP fetches failed; first: %s", n, fetches, load.firstErrors())
	}
	if n := dnsFailed.Load(); n > 0 {
		t.Errorf("%d of %d DNS queries failed after three tries; first: %s", n, dnsSent.Load(), strings.Join(dnsErrs, "; "))
	}
	if stops.Load() == 0 || drains.Load() == 0 {
		t.Errorf("no flapping: %d stops, %d drains", stops.Load(), drains.Load())
	}
}

// rssBytes reads the resident set size of a process from /proc.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS", pid)
}
