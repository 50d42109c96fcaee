// Package benchsite measures the site policies for real: one front end
// and four back-end processes on loopback, a Zipf request stream over
// generated files, and each back end's memory-cache hit ratio read from
// its /metrics. It is a benchmark, not a test: `make bench-site` runs it
// (go test -run '^$' -bench BenchmarkSite -benchtime 1x ./e2e/benchsite/ -args -site),
// and without -site it skips, so that `make bench` and `go test ./...`
// stay fast.
//
// Every back end is a mirror with a document root (the same generated
// tree for all four) and a memory cache of a quarter of the working set
// (site.cache.memory), with the mirror's -bench-miss-delay-per-mib standing in for
// the disk that the test machine's page cache hides. The front end is a
// mirror with the four back ends (their admin_url too, so that it reads
// their real caches) and the policy under test, in each site mode of
// -mode: proxy, then handoff (each back end takes handed-off connections
// on a Unix socket). Each run of a policy gets fresh processes (cold
// caches), the same warm-up and the same measured requests from one
// generated trace, at the mode's concurrency: 32 in proxy mode, as
// before, and 256 in handoff mode, above LARD's admission limit S = 219
// for four back ends, so that the front end's queue has work. In handoff
// mode the clients send one request per connection, since after a
// handoff the connection is the back end's and the policy would pick
// only its first request (-handoff-keepalive to reuse them). All seven
// policies in both modes, three runs each, take about 15 minutes on two
// cores; -policies and -handoff-policies choose fewer.
//
// Each mode's table reports, per policy, the median of -runs runs (3)
// and their range of requests per second over the measured part and of
// the hit ratio (cache hits / file responses over all back ends in that
// part), the median imbalance, the failed requests, and, read from the
// front end's /metrics around the measured part, the requests that
// queued for admission, those refused, their mean wait and LARD's
// reassignments. The benchmark fails when, in a mode, a locality-aware
// policy (lard, ward, tb-ccrd, chbl) does not at least halve wrr's
// median miss ratio with its own median.
//
// With -tls, BenchmarkSiteTLS runs instead (tls_test.go): TLS through
// one front end, plain HTTP against HTTPS on kept and on new connections,
// in interleaved rounds, with the front end's CPU per request from its
// /proc/PID/stat.
//
// -bin=cmd (the default) builds cmd/mirror and runs it; -bin=self runs
// this test binary as the mirror instead (a minimal mirror from the same
// package pieces: FileServer with Cache, or frontend.New), for when
// cmd/mirror is not there or does not wire the cache; it has no /v1/site
// for the front end to read.
package benchsite

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Flags of the comparison (go test ... -args -site -requests 50000).
var (
	flagSite        = flag.Bool("site", false, "run BenchmarkSite (make bench-site)")
	flagBin         = flag.String("bin", "cmd", "mirror to run: cmd (go build ./cmd/mirror) or self (this test binary)")
	flagFiles       = flag.Int("files", 20000, "generated files")
	flagMinSize     = flag.Int("min-size", 256, "smallest file, bytes (sizes are log-uniform)")
	flagMaxSize     = flag.Int("max-size", 16384, "largest file, bytes")
	flagAlpha       = flag.Float64("alpha", 0.8, "Zipf exponent of file popularity")
	flagWarmup      = flag.Int("warmup", 60000, "requests per run before measuring")
	flagRequests    = flag.Int("requests", 40000, "measured requests per run")
	flagMode        = flag.String("mode", "proxy,handoff", "site modes compared, in order: proxy, handoff")
	flagRuns        = flag.Int("runs", 3, "runs per mode and policy, each with fresh processes; the table shows their median and spread")
	flagConcurrency = flag.Int("concurrency", 0, "requests in flight; 0: 32 in proxy mode, 256 in handoff mode (above LARD's admission limit S = 219)")
	flagKeepAlive   = flag.Bool("handoff-keepalive", false, "in handoff mode, clients reuse connections (the policy then decides once per connection)")
	flagMissDelay   = flag.Duration("miss-delay", 500*time.Millisecond, "back ends' -bench-miss-delay-per-mib")
	flagPolicies    = flag.String("policies", allPolicies, "policies compared in proxy mode, in order")
	flagHandoffPols = flag.String("handoff-policies", allPolicies, "policies compared in handoff mode, in order")
	flagSeed        = flag.Uint64("seed", 42, "seed of the files and the trace")
)

// allPolicies is the default of -policies and -handoff-policies.
const allPolicies = "wrr,least-conn,lard,lard-r,ward,tb-ccrd,chbl"

// backends is the number of back-end processes.
const backends = 4

// selfEnv, when set to a config path, makes the test binary a mirror.
const selfEnv = "TRANSMIRROR_BENCHSITE_MIRROR_CONFIG"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(selfEnv); cfg != "" {
		os.Exit(runSelf(cfg, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// mode is one way of running the comparison: the front end's site.mode
// and how the clients use it.
type mode struct {
	name        string // site.mode
	concurrency int    // requests in flight
	keepAlive   bool   // clients reuse their connections
	policies    []string
	// why gives the reason for a default concurrency beyond where it
	// stands against the admission limit; "" for none.
	why string
}

// modes returns the modes of -mode with their concurrency and policies.
func modes() ([]mode, error) {
	var out []mode
	for _, name := range strings.Split(*flagMode, ",") {
		m := mode{name: name, concurrency: *flagConcurrency, keepAlive: true}
		switch name {
		case "proxy":
			m.policies = strings.Split(*flagPolicies, ",")
			if m.concurrency == 0 {
				m.concurrency, m.why = 32, "as in earlier runs, so that they compare"
			}
		case "handoff":
			m.policies = strings.Split(*flagHandoffPols, ",")
			m.keepAlive = *flagKeepAlive
			if m.concurrency == 0 {
				m.concurrency = 256
			}
		default:
			return nil, fmt.Errorf("-mode %q: want proxy or handoff", name)
		}
		out = append(out, m)
	}
	return out, nil
}

// result is one run of one policy.
type result struct {
	policy    string
	rps       float64
	hit       float64 // cache hits / file responses, all back ends
	imbalance float64 // most requests on one back end / mean
	errors    int64
	front     queueFigures // the front end's queue over the measured part
}

// queueFigures is what the front end's /metrics say of its admission limit
// and of LARD's reassignments.
type queueFigures struct {
	limit    float64 // site_admission_limit; 0: none
	queued   float64 // requests that waited for a slot
	waited   float64 // seconds they waited, in all
	rejected float64 // requests refused (any reason)
	// reassignments counts the policy's reassignments; hasReassign says
	// whether the policy exports any.
	reassignments float64
	hasReassign   bool
}

// sub returns the counters of a over those of before (the limit is a's).
func (a queueFigures) sub(before queueFigures) queueFigures {
	a.queued -= before.queued
	a.waited -= before.waited
	a.rejected -= before.rejected
	a.reassignments -= before.reassignments
	return a
}

func BenchmarkSite(b *testing.B) {
	if !*flagSite {
		b.Skip("the site comparison runs with -site (make bench-site)")
	}
	if *flagTLS {
		b.Skip("-tls runs BenchmarkSiteTLS instead")
	}
	ms, err := modes()
	if err != nil {
		b.Fatal(err)
	}
	if *flagRuns < 1 {
		b.Fatalf("-runs %d: want at least 1", *flagRuns)
	}
	bin := mirrorBinary(b)
	dir := b.TempDir()
	socks := socketDir(b)
	w := newWorkload(b, filepath.Join(dir, "root"))
	// Printed, not logged: a parent benchmark's log only shows on failure.
	fmt.Printf("%d files, working set %.1f MiB, %d back ends × %.1f MiB cache, miss delay %v/MiB, Zipf α=%.2f, %d+%d requests per run, %d runs per mode and policy (fresh processes each), mirror %s\n",
		len(w.paths), float64(w.bytes)/(1<<20), backends, float64(w.bytes/backends)/(1<<20), *flagMissDelay,
		*flagAlpha, *flagWarmup, *flagRequests, *flagRuns, *flagBin)
	begin := time.Now()
	var tables []string
	for _, m := range ms {
		var rows []summary
		b.Run(m.name, func(b *testing.B) {
			for _, pol := range m.policies {
				var runs []result
				b.Run(pol, func(b *testing.B) {
					for i := range *flagRuns {
						b.Run(strconv.Itoa(i+1), func(b *testing.B) {
							r := runPolicy(b, bin, dir, socks, w, m, pol, i+1)
							b.ReportMetric(r.rps, "req/s")
							b.ReportMetric(100*r.hit, "hit%")
							runs = append(runs, r)
						})
					}
				})
				if len(runs) > 0 {
					rows = append(rows, summarize(pol, runs))
				}
			}
			checkLocality(b, m.name, rows)
		})
		tables = append(tables, modeLine(m, *flagRuns, rows)+"\n"+table(rows))
	}
	fmt.Printf("\n%s\n%s", strings.Join(tables, "\n"), fmt.Sprintf("all runs took %v\n", time.Since(begin).Round(time.Second)))
}

// checkLocality fails b when a locality-aware policy's median hit ratio
// does not at least halve wrr's median miss ratio.
func checkLocality(b *testing.B, mode string, rows []summary) {
	var wrr *summary
	for i := range rows {
		if rows[i].policy == "wrr" {
			wrr = &rows[i]
		}
	}
	if wrr == nil {
		return
	}
	for _, r := range rows {
		switch r.policy {
		case "lard", "ward", "tb-ccrd", "chbl":
			if 1-r.hit.med > (1-wrr.hit.med)/2 {
				b.Errorf("%s mode, %s: median hit ratio %.1f%% against wrr's %.1f%%: want at most half of wrr's misses", mode, r.policy, 100*r.hit.med, 100*wrr.hit.med)
			}
		}
	}
}

// spread is the median and the range of a figure over the runs.
type spread struct{ med, lo, hi float64 }

// spreadOf returns the median, minimum and maximum of xs (the mean of
// the middle two for an even count); zero for none.
func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return spread{med: med, lo: s[0], hi: s[n-1]}
}

// median is spreadOf's median alone.
func median(xs []float64) float64 { return spreadOf(xs).med }

// summary is one policy's row of a mode's table: the medians of its runs
// and, for req/s and the hit ratio, their spread.
type summary struct {
	policy    string
	runs      int
	rps, hit  spread
	imbalance float64 // median
	errors    int64   // over all runs
	// The front end's admission, medians over the runs; limited is false
	// when the front end had no admission limit.
	limited                    bool
	limit                      float64
	queued, rejected, meanWait float64 // meanWait in seconds
	hasReassign                bool
	reassignments              float64
}

// summarize reduces the runs of policy to its row.
func summarize(policy string, runs []result) summary {
	s := summary{policy: policy, runs: len(runs)}
	var rps, hit, imb, queued, rejected, wait, reass []float64
	for _, r := range runs {
		rps = append(rps, r.rps)
		hit = append(hit, r.hit)
		imb = append(imb, r.imbalance)
		s.errors += r.errors
		f := r.front
		if f.limit > 0 {
			s.limited = true
			s.limit = max(s.limit, f.limit)
		}
		queued = append(queued, f.queued)
		rejected = append(rejected, f.rejected)
		mean := 0.0
		if f.queued > 0 {
			mean = f.waited / f.queued
		}
		wait = append(wait, mean)
		if f.hasReassign {
			s.hasReassign = true
			reass = append(reass, f.reassignments)
		}
	}
	s.rps, s.hit = spreadOf(rps), spreadOf(hit)
	s.imbalance = median(imb)
	s.queued, s.rejected, s.meanWait = median(queued), median(rejected), median(wait)
	s.reassignments = median(reass)
	return s
}

// modeLine is the line above a mode's table: how it was run and why at
// that concurrency.
func modeLine(m mode, runs int, rows []summary) string {
	limit := 0.0
	for _, r := range rows {
		limit = max(limit, r.limit)
	}
	var why string
	switch {
	case limit == 0:
		why = "no admission limit in these policies"
	case float64(m.concurrency) > limit:
		why = fmt.Sprintf("above LARD's admission limit S = %.0f: the front end queues the rest", limit)
	default:
		why = fmt.Sprintf("within LARD's admission limit S = %.0f: nothing queues", limit)
	}
	if m.why != "" {
		why = m.why + "; " + why
	}
	conns := "clients reuse connections"
	switch {
	case !m.keepAlive:
		conns = "one request per client connection (the policy picks every request)"
	case m.name == "handoff":
		conns = "clients reuse connections (the policy picks once per connection)"
	}
	return fmt.Sprintf("%s mode, concurrency %d (%s); %s; median of %d runs (min–max), queue figures over the measured part",
		m.name, m.concurrency, why, conns, runs)
}

// table formats the rows of one mode side by side: req/s and hit ratio
// as the median and the range of the runs, the rest as medians; "-"
// where the front end has no admission limit or the policy no
// reassignments.
func table(rows []summary) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%-10s  %-20s  %-22s  %9s  %6s  %7s  %8s  %9s  %10s\n",
		"policy", "req/s (min–max)", "hit (min–max)", "imbalance", "errors", "queued", "rejected", "mean wait", "reassigned")
	for _, r := range rows {
		rps := fmt.Sprintf("%.0f (%.0f–%.0f)", r.rps.med, r.rps.lo, r.rps.hi)
		hit := fmt.Sprintf("%.1f%% (%.1f–%.1f%%)", 100*r.hit.med, 100*r.hit.lo, 100*r.hit.hi)
		queued, rejected, wait, reass := "-", "-", "-", "-"
		if r.limited {
			queued = fmt.Sprintf("%.0f", r.queued)
			rejected = fmt.Sprintf("%.0f", r.rejected)
			wait = fmt.Sprintf("%.1fms", 1000*r.meanWait)
		}
		if r.hasReassign {
			reass = fmt.Sprintf("%.0f", r.reassignments)
		}
		fmt.Fprintf(&s, "%-10s  %-20s  %-22s  %9.2f  %6d  %7s  %8s  %9s  %10s\n",
			r.policy, rps, hit, r.imbalance, r.errors, queued, rejected, wait, reass)
	}
	return s.String()
}

// socketDir returns a short directory for the back ends' handoff
// sockets (a Unix socket path has room for about 100 bytes, more than
// a test's temporary directory may leave), removed at the end.
func socketDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp("", "tmb")
	if err == nil && len(dir) > 60 {
		os.Remove(dir)
		dir, err = os.MkdirTemp("/tmp", "tmb")
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// mirrorBinary returns the mirror to run: cmd/mirror built into a
// temporary directory, or this test binary.
func mirrorBinary(b *testing.B) string {
	b.Helper()
	switch *flagBin {
	case "self":
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		return exe
	case "cmd":
	default:
		b.Fatalf("-bin %q: want cmd or self", *flagBin)
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "cmd", "mirror")); err != nil {
		b.Fatalf("cmd/mirror is not there (%v): run with -bin=self", err)
	}
	out := filepath.Join(b.TempDir(), "mirror")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/mirror")
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build ./cmd/mirror: %v\n%s", err, msg)
	}
	return out
}

// workload is the generated document tree and request trace.
type workload struct {
	root  string
	paths []string // URL path of each file
	bytes int64    // working set: the sum of the file sizes
	trace []int32  // file of each request: warm-up, then measured
}

// newWorkload writes the files below root, sizes log-uniform between
// -min-size and -max-size, and draws the trace: Zipf(-alpha) popularity
// over a random permutation of the files, so that popularity does not
// follow size or name.
func newWorkload(b *testing.B, root string) *workload {
	b.Helper()
	rng := rand.New(rand.NewPCG(*flagSeed, 7))
	w := &workload{root: root}
	buf := make([]byte, *flagMaxSize)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	lo, hi := math.Log(float64(*flagMinSize)), math.Log(float64(*flagMaxSize))
	for i := range *flagFiles {
		rel := fmt.Sprintf("d%03d/f%05d.bin", i/200, i)
		p := filepath.Join(root, filepath.FromSlash(rel))
		if i%200 == 0 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				b.Fatal(err)
			}
		}
		size := int(math.Exp(lo + rng.Float64()*(hi-lo)))
		if err := os.WriteFile(p, buf[:size], 0o644); err != nil {
			b.Fatal(err)
		}
		w.paths = append(w.paths, "/"+rel)
		w.bytes += int64(size)
	}
	// The default health check path, so that checks succeed on any mirror.
	if err := os.MkdirAll(filepath.Join(root, "-"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "-", "healthy"), []byte("ok\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	n := len(w.paths)
	cdf := make([]float64, n)
	sum := 0.0
	for k := range n {
		sum += 1 / math.Pow(float64(k+1), *flagAlpha)
		cdf[k] = sum
	}
	perm := rng.Perm(n)
	w.trace = make([]int32, *flagWarmup+*flagRequests)
	for i := range w.trace {
		k, _ := slices.BinarySearch(cdf, rng.Float64()*sum)
		w.trace[i] = int32(perm[min(k, n-1)])
	}
	return w
}

// runPolicy starts fresh back ends and a front end with policy in mode
// m (run numbers the processes' files), plays the warm-up and then the
// measured part of the trace, and reads the back ends' cache counters
// and the front end's admission figures around the measured part.
func runPolicy(b *testing.B, bin, dir, socks string, w *workload, m mode, policy string, run int) result {
	b.Helper()
	cache := w.bytes / backends
	prefix := fmt.Sprintf("%s-%s-%d-", m.name, policy, run)
	var bes []*mirrorProc
	var list strings.Builder
	for i := range backends {
		name := fmt.Sprintf("be%d", i+1)
		var sock string
		if m.name == "handoff" {
			sock = filepath.Join(socks, prefix+name)
		}
		cfg := backendYAML(name, w.root, cache)
		if sock != "" {
			cfg += fmt.Sprintf("  handoff_socket: %s\n", strconv.Quote(sock))
		}
		be := startMirror(b, bin, filepath.Join(dir, prefix+name+".yaml"), cfg, "-bench-miss-delay-per-mib", flagMissDelay.String())
		bes = append(bes, be)
		fmt.Fprintf(&list, "  - {name: %s, url: 'http://%s', memory: %d", name, be.http, cache)
		if sock != "" {
			fmt.Fprintf(&list, ", handoff_socket: %s", strconv.Quote(sock))
		}
		if *flagBin == "cmd" {
			// The back end's own report (GET /v1/site): its real cache.
			fmt.Fprintf(&list, ", admin_url: 'http://%s'", be.admin)
		}
		list.WriteString("}\n")
	}
	fe := startMirror(b, bin, filepath.Join(dir, prefix+"fe.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: www.example.org
member: fe
host: fe.site.example.org
capacity: 1000
redirect: {enabled: false}
backends:
%ssite:
  mode: %s
  policy: {name: %s, ward_interval: 5s, replica_hold: 5s}
  health: {interval: 1s}
`, list.String(), m.name, policy))

	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: m.concurrency,
		MaxConnsPerHost:     m.concurrency,
		DisableCompression:  true,
		DisableKeepAlives:   !m.keepAlive,
	}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	base := "http://" + fe.http
	var errs atomic.Int64
	play(client, base, w, w.trace[:*flagWarmup], m.concurrency, &errs)
	before, frontBefore := scrape(b, bes), scrapeFront(b, fe, policy)
	start := time.Now()
	play(client, base, w, w.trace[*flagWarmup:], m.concurrency, &errs)
	elapsed := time.Since(start)
	after, frontAfter := scrape(b, bes), scrapeFront(b, fe, policy)

	r := result{policy: policy, rps: float64(*flagRequests) / elapsed.Seconds(), errors: errs.Load(), front: frontAfter.sub(frontBefore)}
	var hits, total, most float64
	for i := range bes {
		h := after[i].hits - before[i].hits
		n := h + after[i].misses - before[i].misses
		hits += h
		total += n
		most = max(most, n)
	}
	if total > 0 {
		r.hit = hits / total
		r.imbalance = most * backends / total
	}
	if r.errors > 0 {
		b.Errorf("%s mode, %s, run %d: %d requests failed", m.name, policy, run, r.errors)
	}
	return r
}

// backendYAML is the config of the back end name: the document root
// root and a memory cache of cache bytes, its site block last (for a
// handoff_socket line after it).
func backendYAML(name, root string, cache int64) string {
	return fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: www.example.org
member: %s
host: %s.site.example.org
capacity: 1000
root: %s
redirect: {enabled: false}
site:
  cache: {memory: %d, max_object: 1MiB}
`, name, name, strconv.Quote(root), cache)
}

// play sends the requests of trace with concurrency workers.
func play(c *http.Client, base string, w *workload, trace []int32, concurrency int, errs *atomic.Int64) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(trace)) {
					return
				}
				resp, err := c.Get(base + w.paths[trace[i]])
				if err != nil {
					errs.Add(1)
					continue
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
}

// counters are one back end's cache counters.
type counters struct{ hits, misses float64 }

// scrape reads every back end's cache counters from its /metrics.
func scrape(b *testing.B, bes []*mirrorProc) []counters {
	b.Helper()
	out := make([]counters, len(bes))
	for i, be := range bes {
		text := metricsText(b, be)
		var ok bool
		if out[i].hits, ok = metric(text, "transmirror_mirror_cache_hits_total"); !ok {
			b.Fatalf("back end %s has no transmirror_mirror_cache_hits_total: its mirror does not wire site.cache into its FileServer (-bin=self does)", be.http)
		}
		out[i].misses, _ = metric(text, "transmirror_mirror_cache_misses_total")
	}
	return out
}

// scrapeFront reads the front end's admission figures and policy's
// reassignments from its /metrics.
func scrapeFront(b *testing.B, fe *mirrorProc, policy string) queueFigures {
	b.Helper()
	return frontFigures(metricsText(b, fe), policy)
}

// frontFigures picks the admission figures and policy's reassignments
// out of a front end's /metrics text.
func frontFigures(text, policy string) queueFigures {
	var a queueFigures
	a.limit, _ = metric(text, "transmirror_mirror_site_admission_limit")
	a.queued, _ = metric(text, "transmirror_mirror_site_queue_wait_seconds_count")
	a.waited, _ = metric(text, "transmirror_mirror_site_queue_wait_seconds_sum")
	a.rejected, _ = metricSum(text, "transmirror_mirror_site_queue_rejected_total")
	a.reassignments, a.hasReassign = metric(text, `transmirror_mirror_site_reassignments_total{policy="`+policy+`"}`)
	return a
}

// metricsText returns p's /metrics.
func metricsText(b *testing.B, p *mirrorProc) string {
	b.Helper()
	resp, err := http.Get("http://" + p.admin + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	text, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	return string(text)
}

// metric returns the value of the sample series in a Prometheus text
// exposition: a name alone, or a name with its labels as the exposition
// writes them (name{policy="lard"}).
func metric(text, series string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// metricSum returns the sum of the samples of name over all its label
// values, and whether there was any.
func metricSum(text, name string) (float64, bool) {
	sum, found := 0.0, false
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, " "):
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndex(rest, "} ")
			if end < 0 {
				continue
			}
			rest = rest[end+1:]
		default:
			continue // another name with name as its prefix
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// mirrorProc is a running mirror: its process and the addresses it
// logged (https "" without tls.listen).
type mirrorProc struct {
	pid                int
	http, https, admin string
}

var (
	httpAddrRE  = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	httpsAddrRE = regexp.MustCompile(`msg="https listening" addr=(\S+)`)
	adminAddrRE = regexp.MustCompile(`msg="admin listening" addr=(\S+)`)
)

// startMirror writes cfg to path, starts the mirror on it with its
// addresses on 127.0.0.1:0, waits for "mirror started" and stops it (by
// its PID) when the benchmark ends.
func startMirror(b *testing.B, bin, path, cfg string, args ...string) *mirrorProc {
	b.Helper()
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-config", path, "-admin", "127.0.0.1:0"}, args...)...)
	if *flagBin == "self" {
		cmd.Env = append(os.Environ(), selfEnv+"="+path)
	}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		pw.Close()
		close(done)
	}()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	p := &mirrorProc{pid: cmd.Process.Pid}
	ready := make(chan error, 1)
	var mu sync.Mutex
	var logs strings.Builder
	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logs.String()
	}
	go func() {
		sc := bufio.NewScanner(pr)
		started := false
		for sc.Scan() {
			line := sc.Text()
			if started {
				continue // drain, so the process never blocks on its output
			}
			mu.Lock()
			logs.WriteString(line + "\n")
			mu.Unlock()
			if m := httpAddrRE.FindStringSubmatch(line); m != nil && p.http == "" {
				p.http = m[1]
			}
			if m := httpsAddrRE.FindStringSubmatch(line); m != nil && p.https == "" {
				p.https = m[1]
			}
			if m := adminAddrRE.FindStringSubmatch(line); m != nil {
				p.admin = m[1]
			}
			if strings.Contains(line, `msg="mirror started"`) {
				started = true
				ready <- nil
			}
		}
		if !started {
			ready <- errors.New("exited before it started")
		}
	}()
	select {
	case err := <-ready:
		if err != nil || p.http == "" || p.admin == "" {
			b.Fatalf("mirror %s: %v, addresses %q %q\n%s", path, err, p.http, p.admin, output())
		}
	case <-time.After(30 * time.Second):
		b.Fatalf("mirror %s not started within 30s\n%s", path, output())
	}
	return p
}

// runSelf is this test binary as a minimal mirror (-bin=self): a front
// end (frontend.New) or a back end (FileServer with Cache) on the
// config's first listen address, /metrics on -admin, and the same log
// lines as cmd/mirror.
func runSelf(path string, args []string) int {
	fs := flag.NewFlagSet("mirror", flag.ContinueOnError)
	fs.String("config", "", "")
	admin := fs.String("admin", "127.0.0.1:0", "")
	missDelay := fs.Duration("bench-miss-delay-per-mib", 0, "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := serveSelf(path, *admin, *missDelay, log); err != nil {
		log.Error("mirror stopped", "err", err)
		return 1
	}
	return 0
}

func serveSelf(path, adminAddr string, missDelay time.Duration, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := mirror.LoadConfig(path)
	if err != nil {
		return err
	}
	cfg.Site.Cache.MissDelayPerMiB = yamlconf.Duration(missDelay)
	reg := prometheus.NewRegistry()
	var h http.Handler
	if len(cfg.Backends) > 0 {
		sh, closer, err := frontend.New(cfg.Site, cfg.Backends, frontend.Options{Logger: log, Registerer: reg})
		if err != nil {
			return err
		}
		defer closer.Close()
		h = sh
	} else {
		cache, err := serve.NewCache(cfg.Site.Cache, serve.CacheOptions{Registerer: reg})
		if err != nil {
			return err
		}
		files, err := serve.NewFileServer(cfg.Root, serve.FileServerOptions{Cache: cache, Logger: log})
		if err != nil {
			return err
		}
		defer files.Close()
		h = files
	}
	o := mirror.ServerOptionsFromConfig(cfg, h)
	o.Logger, o.Registerer = log, reg
	pub, err := serve.NewServer(o)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	adm, err := serve.NewServer(serve.ServerOptions{Handler: mux, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen[0])
	if err != nil {
		return err
	}
	log.Info("http listening", "addr", ln.Addr().String())
	aln, err := net.Listen("tcp", adminAddr)
	if err != nil {
		ln.Close()
		return err
	}
	log.Info("admin listening", "addr", aln.Addr().String())
	var hln net.Listener
	if cfg.Site.HandoffSocket != "" {
		// The back end of a front end in handoff mode.
		if hln, err = frontend.ListenHandoff(cfg.Site.HandoffSocket); err != nil {
			ln.Close()
			aln.Close()
			return err
		}
		log.Info("handoff listening", "socket", cfg.Site.HandoffSocket)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return pub.Serve(gctx, ln) })
	if hln != nil {
		g.Go(func() error { return pub.Serve(gctx, hln) })
	}
	g.Go(func() error { return adm.Serve(gctx, aln) })
	log.Info("mirror started", "member", cfg.Member)
	return g.Wait()
}
