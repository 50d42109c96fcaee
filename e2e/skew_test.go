package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/miekg/dns"
)

// The TTL-skew scenario of the issue, end to end: one real dnsd answers
// the group name with one mirror per answer and a 60 s TTL, four real
// mirror processes of equal capacity each listen on their own loopback
// address and the same port, and a population of 20 resolvers in the test
// process, one of which carries 60% of the requests, each caches its
// answer for the TTL and sends its clients' requests to the mirror it got.
//
// Four mirrors, not three: the heavy resolver alone puts 60% of the
// requests on one mirror, which is 2.4× a fair share of 1/4 whatever the
// other resolvers got, but only 1.8× a fair share of 1/3, so with three
// mirrors "over 2×" would depend on how many light resolvers dnsd happened
// to send to the same mirror.
const (
	skewGroup     = "www.example.test"
	skewSecret    = "e2e-skew-secret"
	skewMirrors   = 4
	skewResolvers = 20
	skewHeavy     = 0.6 // share of the requests from resolver 0
	skewTTL       = 60  // seconds, the group's TTL (min = max)
	// skewCapacity is each mirror's capacity in load units. The mirrors
	// report m = 0 (run_queue: none): the host's load average is not
	// theirs, and the load is 10·r, the requests the test sent, so 100
	// requests/s at utilization 1.
	skewCapacity = 1000.0
	// skewTarget is the offered utilization of the group: the mirrors,
	// serving their capacity shares, sit at it (see skewRate), between
	// the redirect watermarks skewLow and skewHigh.
	skewTarget   = 0.8
	skewLow      = 0.7 // redirect.low_watermark
	skewHigh     = 0.9 // redirect.high_watermark
	skewMaxShare = 0.8 // redirect.max_share
	skewWarmup   = 15 * time.Second
	skewWindow   = 30 * time.Second
	skewTick     = 5 * time.Second // timeline and skewScrape period
	// skewWorkers and skewQueue are the generator's pool and its queue:
	// two seconds of requests, so that a stalled test process makes
	// requests late (they still go to their resolver's mirror and count)
	// rather than dropped.
	skewWorkers  = 64
	skewQueue    = 640
	skewFileSize = 1024
	skewPath     = "/pool/file.bin"
	// skewMaxLag is how late a request may start after its scheduled time
	// before it counts as late, a figure of how well the test process
	// kept up.
	skewMaxLag = 500 * time.Millisecond
)

// TestSkew is the "done when": a resolver population where one
// resolver carries 60% of the requests with a 60 s TTL; without correction
// the mirror it is sent to serves over 2× its fair share; with 302
// correction every mirror serves within 15% of its capacity share.
//
// Shares are of what the mirrors served in the window, so they do not
// depend on how fast the test process could send. Only the operating
// point does: correction sheds what is over the redirect band, so it
// evens the shares only when the fair share itself sits in the band, as
// it does at the offered rate. Should the generator fall short, the fair
// share drops below the band and the heavy mirror keeps the band's rate
// (up to its high watermark), which the check then allows (see
// skewResult.bounds).
func TestSkew(t *testing.T) {
	if skewWarmup+skewWindow+10*time.Second >= skewTTL*time.Second {
		t.Fatalf("the phase must be shorter than the TTL, so that every resolver stays on its first answer")
	}
	fair := 1.0 / skewMirrors // equal capacities
	t.Run("without correction", func(t *testing.T) {
		res := runSkewPhase(t, false)
		if res.redirects != 0 {
			t.Errorf("%d requests were redirected with redirect.enabled false", res.redirects)
		}
		ratio := res.share(res.heavyMirror) / fair
		t.Logf("the heavy resolver's mirror %s served %.2f× its fair share", res.names[res.heavyMirror], ratio)
		if !(ratio > 2) {
			t.Errorf("the heavy resolver's mirror %s served %.2f× its fair share (%.1f%% of %d), want > 2×",
				res.names[res.heavyMirror], ratio, 100*res.share(res.heavyMirror), res.total())
		}
	})
	t.Run("with correction", func(t *testing.T) {
		res := runSkewPhase(t, true)
		if res.redirects == 0 {
			t.Errorf("no request was redirected")
		}
		lo, hi := res.bounds()
		for i, name := range res.names {
			rate := float64(res.served[i]) / res.window.Seconds()
			if rate < lo[i] || rate > hi[i] {
				t.Errorf("mirror %s served %.1f requests/s (%.1f%% of the requests, %+.1f%% off its capacity share %.1f%%), want %.1f..%.1f/s (%s)",
					name, rate, 100*res.share(i), 100*(res.share(i)/fair-1), 100*fair, lo[i], hi[i], res.boundsText())
			}
		}
	})
}

// bounds are the served rates over the window that correction allows
// each mirror: within ±15% of its capacity share of what the group
// served, the figure. That holds where the fair rate is in the
// redirect band, as it is at the planned rate. Should the generator fall
// so far short that the fair rate +15% is below the rate at the high
// watermark, the upper bound is that rate instead: a mirror keeps what is
// below its band whatever the others do, and the heavy mirror is offered
// more than the band (under rHigh / (1 − max_share) = 450/s, so it can
// shed down to it); the lower bound is then 85% of the fair rate or of an
// even split of what the busiest mirror did not serve, the smaller.
func (r skewResult) bounds() (lo, hi []float64) {
	n := float64(len(r.served))
	fair := float64(r.total()) / n / r.window.Seconds()
	low, high := 0.85*fair, 1.15*fair
	if rHigh := skewHigh * skewCapacity / 10; high < rHigh {
		var most int64
		for _, s := range r.served {
			most = max(most, s)
		}
		rest := float64(r.total()-most) / (n - 1) / r.window.Seconds()
		low, high = 0.85*min(fair, rest), rHigh
	}
	for range r.served {
		lo, hi = append(lo, low), append(hi, high)
	}
	return lo, hi
}

func (r skewResult) boundsText() string {
	fair := float64(r.total()) / float64(len(r.served)) / r.window.Seconds()
	rHigh := skewHigh * skewCapacity / 10
	if 1.15*fair < rHigh {
		return fmt.Sprintf("the group served %.1f/s, %.1f/s each at capacity shares, whose +15%% is below the high watermark's %.0f/s: at most that, at least 85%% of it or of an even split of what the busiest did not serve",
			float64(r.total())/r.window.Seconds(), fair, rHigh)
	}
	return fmt.Sprintf("the group served %.1f/s, %.1f/s each at capacity shares, ±15%%", float64(r.total())/r.window.Seconds(), fair)
}

// skewResult is what one phase measured over its window.
type skewResult struct {
	names       []string
	served      []int64 // 2xx GET per mirror, from the mirrors' /metrics
	heavyMirror int     // index of the mirror the heavy resolver was sent to
	redirects   int64   // 302s the clients got
	window      time.Duration
}

func (r skewResult) total() int64 {
	var n int64
	for _, s := range r.served {
		n += s
	}
	return n
}

func (r skewResult) share(i int) float64 {
	if r.total() == 0 {
		return 0
	}
	return float64(r.served[i]) / float64(r.total())
}

// runSkewPhase starts a fresh dnsd and four fresh mirrors (redirects on
// or off), drives the resolver population through a warm-up and a
// measurement window, logs the tables and checks what holds in both
// phases: every request ended in a 2xx, none was redirected twice, and
// the clients and the mirrors agree on what each mirror served. How fast
// the test process could send is measured and logged, not required.
func runSkewPhase(t *testing.T, correct bool) skewResult {
	began := time.Now()
	cl := startSkewCluster(t, correct)

	if m0 := cl.runQueue(t); m0 != 0 {
		t.Fatalf("the mirrors report m = %g, want 0 (run_queue: none)", m0)
	}
	rate := skewRate()

	c := newSkewClient(cl)
	// Every resolver asks once, the heavy one first, before any load:
	// with a 60 s TTL each stays on its answer for the whole phase.
	for _, r := range c.resolvers {
		if _, err := r.lookup(c.dnsAddr); err != nil {
			t.Fatalf("resolver %d: %v", r.id, err)
		}
	}
	heavy := c.ipIndex[c.resolvers[0].current()]
	var perMirror = make([]int, skewMirrors)
	for _, r := range c.resolvers {
		perMirror[c.ipIndex[r.current()]]++
	}
	t.Logf("offering %.0f requests/s (capacity %g load units = %.0f requests/s per mirror, m = 0); the heavy resolver (%.0f%%) got %s; resolvers per mirror: %v",
		rate, skewCapacity, skewCapacity/10, 100*skewHeavy, cl.mirrors[heavy].name, perMirror)

	// The generator stops before the resolvers' answers expire, however
	// slow the phase runs: a new answer would mix two assignments.
	ctx, cancel := context.WithDeadline(context.Background(), c.resolvers[0].expiresAt().Add(-2*time.Second))
	defer cancel()
	gen := c.drive(ctx, rate)

	type sample struct {
		at        time.Duration
		served    []int64 // from /metrics
		overload  []int64 // redirects_total{reason="overload"} from /metrics
		client    []int64 // 2xx per mirror, client side
		issued    int64
		dropped   int64
		late      int64
		completed int64
	}
	take := func(at time.Duration) sample {
		s := sample{at: at, served: make([]int64, skewMirrors), overload: make([]int64, skewMirrors), client: make([]int64, skewMirrors)}
		for i, m := range cl.mirrors {
			text := skewScrape(t, "http://"+m.admin+"/metrics")
			s.served[i] = int64(metricSum(text, "transmirror_mirror_requests_total", `code_class="2xx"`, `method="GET"`))
			s.overload[i] = int64(metricSum(text, "transmirror_mirror_redirects_total", `reason="overload"`))
			s.client[i] = c.served[i].Load()
		}
		s.issued, s.dropped, s.late, s.completed = gen.issued.Load(), gen.dropped.Load(), c.late.Load(), c.completed.Load()
		return s
	}
	start := time.Now()
	samples := []sample{take(0)}
	tick := time.NewTicker(skewTick)
	for time.Since(start) < skewWarmup+skewWindow-skewTick/2 {
		select {
		case <-tick.C:
		case <-gen.done:
			t.Fatalf("the load generator stopped early")
		}
		samples = append(samples, take(time.Since(start)))
	}
	tick.Stop()
	cancel()
	gen.wait()

	// The timeline, every skewTick: served and overload redirects per
	// second per mirror.
	var tl strings.Builder
	tw := tabwriter.NewWriter(&tl, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "t\t")
	for _, m := range cl.mirrors {
		fmt.Fprintf(tw, "%s served/s\t%s 302/s\t", m.name, m.name)
	}
	fmt.Fprintln(tw)
	for k := 1; k < len(samples); k++ {
		a, b := samples[k-1], samples[k]
		dt := (b.at - a.at).Seconds()
		fmt.Fprintf(tw, "%.0fs\t", b.at.Seconds())
		for i := range cl.mirrors {
			fmt.Fprintf(tw, "%.1f\t%.1f\t", float64(b.served[i]-a.served[i])/dt, float64(b.overload[i]-a.overload[i])/dt)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	t.Logf("timeline (warm-up %v, then the measurement window %v):\n%s", skewWarmup, skewWindow, tl.String())

	w0 := int(skewWarmup / skewTick)
	a, b := samples[w0], samples[len(samples)-1]
	res := skewResult{heavyMirror: heavy, served: make([]int64, skewMirrors), redirects: c.redirected.Load(), window: b.at - a.at}
	var tb strings.Builder
	tw = tabwriter.NewWriter(&tb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mirror\tserved\tclient\tshare\tcap share\tratio\t302 sent\tresolvers\t")
	for i, m := range cl.mirrors {
		res.names = append(res.names, m.name)
		res.served[i] = b.served[i] - a.served[i]
	}
	for i, m := range cl.mirrors {
		name := m.name
		if i == heavy {
			name += " (heavy)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f%%\t%.1f%%\t%.2f\t%d\t%d\t\n", name, res.served[i], b.client[i]-a.client[i],
			100*res.share(i), 100.0/skewMirrors, res.share(i)*skewMirrors, b.overload[i]-a.overload[i], perMirror[i])
	}
	tw.Flush()
	window := res.window
	offered := b.issued - a.issued
	t.Logf("served over the window of %v (%s; %.1f requests/s served of %.0f/s planned; of %d issued, %d dropped and %d started over %v late; %d redirects in the whole phase; phase wall time %v):\n%s",
		window.Round(time.Millisecond), map[bool]string{false: "redirect off", true: "redirect on"}[correct],
		float64(res.total())/window.Seconds(), rate, offered, b.dropped-a.dropped, b.late-a.late, skewMaxLag,
		res.redirects, time.Since(began).Round(time.Second), tb.String())

	// With correction, the heavy mirror must have been offered more than
	// its high watermark's rate (the requests it served and those it
	// redirected), else there was nothing to correct and the phase
	// measured nothing: it is offered about 0.68 of the group's rate, so
	// only a generator under two fifths of its plan gets there.
	heavyOffered := float64(b.served[heavy]-a.served[heavy]+b.overload[heavy]-a.overload[heavy]) / window.Seconds()
	if rHigh := skewHigh * skewCapacity / 10; correct && heavyOffered <= rHigh {
		t.Fatalf("the heavy mirror %s was offered %.1f requests/s, not over its high watermark's %.0f/s: the test process sent %.1f/s of the %.0f/s planned, too few to measure correction",
			cl.mirrors[heavy].name, heavyOffered, rHigh, float64(res.total())/window.Seconds(), rate)
	}
	if n := c.failed.Load(); n > 0 {
		t.Errorf("%d requests did not end in a 2xx; first: %s", n, c.firstFailure())
	}
	if n := c.twice.Load(); n > 0 {
		t.Errorf("%d requests were redirected twice; first: %s", n, c.firstFailure())
	}
	for _, r := range c.resolvers {
		if len(r.answers) != 1 {
			t.Errorf("resolver %d asked dnsd %d times (answers %v), want once: the TTL must pin it for the phase", r.id, len(r.answers), r.answers)
		}
	}
	if n := gen.issued.Load() - gen.dropped.Load() - c.completed.Load(); n != 0 {
		t.Errorf("%d requests were issued but did not complete", n)
	}
	// The mirrors and the clients count the same requests (up to those in
	// flight at the two scrapes).
	for i, m := range cl.mirrors {
		srv, cli := res.served[i], b.client[i]-a.client[i]
		if d := math.Abs(float64(srv - cli)); d > 10+0.02*float64(srv) {
			t.Errorf("mirror %s: its /metrics says it served %d in the window, the clients say %d", m.name, srv, cli)
		}
	}
	return res
}

// skewRate is the request rate that puts a group of skewMirrors mirrors
// of skewCapacity at utilization skewTarget when each serves its capacity
// share: 10·R/n = target·C (m is 0), so R = n·target·C/10, 320/s.
func skewRate() float64 {
	return skewMirrors * skewTarget * skewCapacity / 10
}

// skewMirror is one mirror process of the scenario.
type skewMirror struct {
	*proc
	name  string
	host  string // its own host name
	ip    string // its public address (the port is the cluster's)
	admin string // admin host:port
}

// skewCluster is one dnsd and its mirrors, all on one public port.
type skewCluster struct {
	dnsd    *dnsdProc
	port    string
	mirrors []*skewMirror
}

// startSkewCluster writes the zone and dnsd config into a new temporary
// directory, starts dnsd, then the mirrors (pushing to dnsd, which accepts
// pushes for its configured members), and waits until dnsd has every
// member up and every mirror has a fresh group view.
func startSkewCluster(t *testing.T, correct bool) *skewCluster {
	t.Helper()
	dir := t.TempDir()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	var zb, members strings.Builder
	zb.Write(zone)
	zb.WriteString("\n; the skew scenario's mirrors\n")
	ms := make([]*skewMirror, skewMirrors)
	for i := range ms {
		ms[i] = &skewMirror{
			name: fmt.Sprintf("a%d", i+1),
			host: fmt.Sprintf("a%d.mirrors.example.test", i+1),
			ip:   fmt.Sprintf("127.0.%d.1", 11+i),
		}
		fmt.Fprintf(&zb, "a%d.mirrors IN A %s\n", i+1, ms[i].ip)
		fmt.Fprintf(&members, "      - {name: %s, host: %s., addresses: [%s], capacity: %g}\n", ms[i].name, ms[i].host, ms[i].ip, skewCapacity)
	}
	writeFile(t, dir, "example.test.zone", zb.String())
	cfg := fmt.Sprintf(`# e2e skew: four mirrors of equal capacity, one per answer, a 60 s TTL.
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
health: {interval: 500ms, timeout: 400ms, jitter: 50ms, rise: 2, fall: 3}
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: %d, max: %d}
    answers: 1
    policy: {name: geo-load}
    secret: %s
    members:
%s`, skewGroup, skewTTL, skewTTL, skewSecret, members.String())
	writeFile(t, dir, "dnsd.yaml", cfg)
	d := startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))

	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "pool"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "pool"), "file.bin", strings.Repeat("x", skewFileSize))

	cl := &skewCluster{dnsd: d, mirrors: ms}
	// The first mirror picks the port; the others must get the same one on
	// their own addresses. Should one be taken, start again on a new port.
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		var started []*proc
		port := "0"
		lastErr = nil
		for _, m := range ms {
			p, http, admin, err := launchSkewMirror(t, dir, m, port, d.Admin, correct)
			if err != nil {
				lastErr = err
				break
			}
			started = append(started, p)
			m.proc, m.admin = p, admin
			if port == "0" {
				_, port, _ = net.SplitHostPort(http)
			}
		}
		if lastErr == nil {
			cl.port = port
			break
		}
		t.Logf("attempt %d: %v; trying another port", attempt+1, lastErr)
		for _, p := range started {
			p.Stop()
		}
	}
	if lastErr != nil {
		t.Fatalf("could not start %d mirrors on one port: %v", skewMirrors, lastErr)
	}

	upAt := time.Now()
	eventually(t, 15*time.Second, func() string {
		var v struct {
			Members []struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"members"`
		}
		if err := skewGetJSON("http://"+d.Admin+"/v1/groups/"+skewGroup, &v); err != nil {
			return err.Error()
		}
		up := 0
		for _, m := range v.Members {
			if m.State == "up" {
				up++
			}
		}
		if up != skewMirrors {
			return fmt.Sprintf("dnsd has %d of %d members up: %+v", up, skewMirrors, v.Members)
		}
		upAt = time.Now()
		return ""
	})
	// Every mirror must have fetched a view since: one with every sibling up.
	eventually(t, 10*time.Second, func() string {
		for _, m := range ms {
			text, err := skewGet("http://" + m.admin + "/metrics")
			if err != nil {
				return err.Error()
			}
			at := metricSum(text, "transmirror_mirror_view_last_success_timestamp_seconds")
			if at < float64(upAt.UnixNano())/1e9 {
				return fmt.Sprintf("mirror %s has no group view newer than the moment all were up", m.name)
			}
		}
		return ""
	})
	return cl
}

// launchSkewMirror writes m's config and starts the real mirror on m.ip
// and port ("0": any). It returns an error, rather than failing the test,
// when the process exits before it is ready (a port already taken).
func launchSkewMirror(t *testing.T, dir string, m *skewMirror, port, dnsdAdmin string, correct bool) (p *proc, http, admin string, err error) {
	t.Helper()
	cfg := fmt.Sprintf(`listen: ["%s"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s
dnsd: {url: "http://%s", secret: %q, push_interval: 250ms, view_interval: 250ms}
root: root
capacity: %g
run_queue: none
redirect: {enabled: %t, low_watermark: %g, high_watermark: %g, max_share: %g}
`, net.JoinHostPort(m.ip, port), skewGroup, m.name, m.host, dnsdAdmin, skewSecret, skewCapacity, correct, skewLow, skewHigh, skewMaxShare)
	path := writeFile(t, dir, m.name+".yaml", cfg)
	p, err = launch(t, bin("mirror"), []string{"-config", path}, func(line string) bool {
		if mm := httpAddrRE.FindStringSubmatch(line); mm != nil && http == "" {
			http = mm[1]
		}
		if mm := adminAddrRE.FindStringSubmatch(line); mm != nil {
			admin = mm[1]
		}
		return strings.Contains(line, `msg="mirror started"`)
	})
	if err != nil {
		return nil, "", "", fmt.Errorf("mirror %s on %s: %w", m.name, net.JoinHostPort(m.ip, port), err)
	}
	if http == "" || admin == "" {
		t.Fatalf("mirror %s did not report its addresses:\n%s", m.name, p.Logs())
	}
	return p, http, admin, nil
}

// runQueue returns the mean m the mirrors report (0 with run_queue: none).
func (cl *skewCluster) runQueue(t *testing.T) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range cl.mirrors {
		var r struct {
			M *float64 `json:"m"`
		}
		if err := skewGetJSON("http://"+m.admin+"/v1/load", &r); err != nil || r.M == nil {
			t.Fatalf("mirror %s: load report: %v (m %v)", m.name, err, r.M)
		}
		sum += *r.M
	}
	return sum / float64(len(cl.mirrors))
}

// skewResolver is one recursive resolver of the population: it asks dnsd
// with its own EDNS Client Subnet and caches the answer for its TTL.
type skewResolver struct {
	id  int
	ecs netip.Prefix

	mu      sync.Mutex
	ip      string
	expires time.Time
	answers []string // every address it got, in order
}

// lookup returns the cached address, asking dnsd when the TTL has run
// out. Clients of the resolver wait for its query, as they would.
func (r *skewResolver) lookup(dnsAddr string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ip != "" && time.Now().Before(r.expires) {
		return r.ip, nil
	}
	ip, ttl, err := skewQueryA(dnsAddr, skewGroup, r.ecs)
	if err != nil {
		return "", err
	}
	if ttl != skewTTL {
		return "", fmt.Errorf("dnsd answered %s with TTL %d, want %d", ip, ttl, skewTTL)
	}
	r.ip, r.expires = ip, time.Now().Add(time.Duration(ttl)*time.Second)
	r.answers = append(r.answers, ip)
	return ip, nil
}

// expiresAt is when the cached answer expires.
func (r *skewResolver) expiresAt() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expires
}

func (r *skewResolver) current() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ip
}

// skewQueryA asks dnsd at addr for name's A record, with ecs as the EDNS
// Client Subnet when it is valid, and returns the first address and its TTL.
func skewQueryA(addr, name string, ecs netip.Prefix) (string, uint32, error) {
	m := new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA)
	m.RecursionDesired = false
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(1232)
	if ecs.IsValid() {
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{
			Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(ecs.Bits()),
			Address: net.IP(ecs.Addr().AsSlice()),
		})
	}
	m.Extra = append(m.Extra, opt)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return "", 0, fmt.Errorf("query %s A: %w", name, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return "", 0, fmt.Errorf("query %s A: %s", name, dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String(), a.Hdr.Ttl, nil
		}
	}
	return "", 0, fmt.Errorf("query %s A: no address in %v", name, r.Answer)
}

// skewClient is the clients of all the resolvers: it sends each request
// to the address its resolver has with Host: the group name, and follows
// one 302 to a sibling's own host name, which it resolves through dnsd.
type skewClient struct {
	dnsAddr   string
	port      string
	hc        *http.Client
	resolvers []*skewResolver
	ipIndex   map[string]int // mirror address → index
	hostIndex map[string]int // mirror host name → index

	hostMu  sync.Mutex
	hostIPs map[string]string // member host names resolved so far

	served     []atomic.Int64 // final 2xx per mirror
	completed  atomic.Int64   // requests done, whatever the outcome
	redirected atomic.Int64
	twice      atomic.Int64
	failed     atomic.Int64
	late       atomic.Int64

	failMu  sync.Mutex
	failure string
}

func newSkewClient(cl *skewCluster) *skewClient {
	c := &skewClient{
		dnsAddr: cl.dnsd.Addr,
		port:    cl.port,
		hc: &http.Client{
			Transport: &http.Transport{
				Proxy:               nil, // loopback only, whatever the environment says
				MaxIdleConnsPerHost: skewWorkers,
				DisableCompression:  true,
				IdleConnTimeout:     30 * time.Second,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       10 * time.Second,
		},
		ipIndex:   make(map[string]int),
		hostIndex: make(map[string]int),
		hostIPs:   make(map[string]string),
		served:    make([]atomic.Int64, len(cl.mirrors)),
	}
	for i, m := range cl.mirrors {
		c.ipIndex[m.ip] = i
		c.hostIndex[m.host] = i
	}
	for k := range skewResolvers {
		// 100.64.k.0/24: global unicast and not private, so dnsd trusts it
		// as ECS and each resolver is its own scope.
		c.resolvers = append(c.resolvers, &skewResolver{id: k, ecs: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64, byte(k), 0}), 24)})
	}
	return c
}

func (c *skewClient) fail(format string, args ...any) {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	if c.failure == "" {
		c.failure = fmt.Sprintf(format, args...)
	}
}

func (c *skewClient) firstFailure() string {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return c.failure
}

// memberIP resolves a member's own host name through dnsd (no ECS), once.
func (c *skewClient) memberIP(host string) (string, error) {
	c.hostMu.Lock()
	defer c.hostMu.Unlock()
	if ip, ok := c.hostIPs[host]; ok {
		return ip, nil
	}
	ip, _, err := skewQueryA(c.dnsAddr, host, netip.Prefix{})
	if err != nil {
		return "", err
	}
	c.hostIPs[host] = ip
	return ip, nil
}

// get sends GET path to ip:port with the Host header host and returns the
// status code and Location; it reads the body to the end.
func (c *skewClient) get(ctx context.Context, ip, host, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, c.port)+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode/100 == 2 && n != skewFileSize {
		return 0, "", fmt.Errorf("%s from %s: %d bytes, want %d", resp.Status, ip, n, skewFileSize)
	}
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// request is one client request of resolver k's population.
func (c *skewClient) request(k int) {
	defer c.completed.Add(1)
	// Not the generator's context: a request that was started finishes.
	ctx := context.Background()
	ip, err := c.resolvers[k].lookup(c.dnsAddr)
	if err != nil {
		c.failed.Add(1)
		c.fail("resolver %d: %v", k, err)
		return
	}
	from := c.ipIndex[ip]
	code, loc, err := c.get(ctx, ip, net.JoinHostPort(skewGroup, c.port), skewPath)
	switch {
	case err != nil:
		c.failed.Add(1)
		c.fail("GET %s on %s: %v", skewPath, ip, err)
		return
	case code/100 == 2:
		c.served[from].Add(1)
		return
	case code != http.StatusFound:
		c.failed.Add(1)
		c.fail("GET %s on %s: status %d", skewPath, ip, code)
		return
	}
	c.redirected.Add(1)
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "http" || u.RequestURI() != skewPath || u.Port() != c.port {
		c.failed.Add(1)
		c.fail("302 from %s to %q: want http://<member host>:%s%s", ip, loc, c.port, skewPath)
		return
	}
	to, ok := c.hostIndex[u.Hostname()]
	if !ok || to == from {
		c.failed.Add(1)
		c.fail("302 from %s to %q: not a sibling's own host name", ip, loc)
		return
	}
	ip2, err := c.memberIP(u.Hostname())
	if err != nil {
		c.failed.Add(1)
		c.fail("resolving %s: %v", u.Hostname(), err)
		return
	}
	if c.ipIndex[ip2] != to {
		c.failed.Add(1)
		c.fail("dnsd resolved %s to %s", u.Hostname(), ip2)
		return
	}
	code, loc2, err := c.get(ctx, ip2, u.Host, u.RequestURI())
	switch {
	case err != nil:
		c.failed.Add(1)
		c.fail("GET %s: %v", loc, err)
	case code/100 == 3:
		c.twice.Add(1)
		c.fail("GET %s (redirected from %s) was redirected again, %d to %q", loc, ip, code, loc2)
	case code/100 != 2:
		c.failed.Add(1)
		c.fail("GET %s (redirected from %s): status %d", loc, ip, code)
	default:
		c.served[to].Add(1)
	}
}

// skewGen is a running load generator.
type skewGen struct {
	issued, dropped atomic.Int64
	done            chan struct{} // closed when the pacer stops
	workers         sync.WaitGroup
}

// wait returns when the pacer has stopped and every request has finished.
func (g *skewGen) wait() {
	<-g.done
	g.workers.Wait()
}

// drive offers rate requests per second until ctx is done: a pacer
// schedules them on a 10 ms ticker (as many as are due, so a late tick
// catches up), each from resolver 0 with probability skewHeavy and from
// one of the others at random otherwise, and a fixed pool of workers
// sends them. A request that finds every worker busy and the queue full is
// dropped, one that starts more than skewMaxLag after its time is late;
// both are counted, so a test process that can not keep up says so.
func (c *skewClient) drive(ctx context.Context, rate float64) *skewGen {
	g := &skewGen{done: make(chan struct{})}
	type job struct {
		k  int
		at time.Time
	}
	jobs := make(chan job, skewQueue)
	for range skewWorkers {
		g.workers.Add(1)
		go func() {
			defer g.workers.Done()
			for j := range jobs {
				if time.Since(j.at) > skewMaxLag {
					c.late.Add(1)
				}
				c.request(j.k)
			}
		}()
	}
	go func() {
		defer close(g.done)
		defer close(jobs)
		rnd := rand.New(rand.NewPCG(1, 2))
		start := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := int64(time.Since(start).Seconds() * rate)
			for n := g.issued.Load(); n < due; n++ {
				k := 0
				if rnd.Float64() >= skewHeavy {
					k = 1 + rnd.IntN(skewResolvers-1)
				}
				at := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
				select {
				case jobs <- job{k: k, at: at}:
				default:
					g.dropped.Add(1)
				}
				g.issued.Add(1)
			}
		}
	}()
	return g
}

// skewGet fetches url (loopback only) and returns the body.
func skewGet(u string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, body)
	}
	return string(body), nil
}

func skewGetJSON(u string, v any) error {
	body, err := skewGet(u)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// skewScrape is get for the test's own goroutine: a failure fails the test.
func skewScrape(t *testing.T, u string) string {
	t.Helper()
	body, err := skewGet(u)
	if err != nil {
		t.Fatal(err)
	}
	return body
}
