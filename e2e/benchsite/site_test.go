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
// (site.cache.memory), with site.cache.miss_delay_per_mib standing in for
// the disk that the test machine's page cache hides. The front end is a
// mirror with the four back ends and the policy under test in proxy
// mode. Each policy gets fresh processes (cold caches), the same warm-up
// and the same measured requests from one generated trace, at a fixed
// concurrency; the table reports requests per second over the measured
// part and the hit ratio (cache hits / file responses over all back
// ends in that part), and the benchmark fails when a locality-aware
// policy (lard, ward, tb-ccrd, chbl) does not at least halve wrr's miss
// ratio.
//
// -bin=cmd (the default) builds cmd/mirror and runs it; -bin=self runs
// this test binary as the mirror instead (a minimal mirror from the same
// package pieces: FileServer with Cache, or frontend.New), for when
// cmd/mirror is not there or does not wire the cache.
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
)

// Flags of the comparison (go test ... -args -site -requests 50000).
var (
	flagSite        = flag.Bool("site", false, "run BenchmarkSite (make bench-site)")
	flagBin         = flag.String("bin", "cmd", "mirror to run: cmd (go build ./cmd/mirror) or self (this test binary)")
	flagFiles       = flag.Int("files", 20000, "generated files")
	flagMinSize     = flag.Int("min-size", 256, "smallest file, bytes (sizes are log-uniform)")
	flagMaxSize     = flag.Int("max-size", 16384, "largest file, bytes")
	flagAlpha       = flag.Float64("alpha", 0.8, "Zipf exponent of file popularity")
	flagWarmup      = flag.Int("warmup", 60000, "requests per policy before measuring")
	flagRequests    = flag.Int("requests", 40000, "measured requests per policy")
	flagConcurrency = flag.Int("concurrency", 32, "requests in flight")
	flagMissDelay   = flag.Duration("miss-delay", 500*time.Millisecond, "back ends' site.cache.miss_delay_per_mib")
	flagPolicies    = flag.String("policies", "wrr,least-conn,lard,lard-r,ward,tb-ccrd,chbl", "policies compared, in order")
	flagSeed        = flag.Uint64("seed", 42, "seed of the files and the trace")
)

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

// result is one policy's row of the table.
type result struct {
	policy    string
	rps       float64
	hit       float64 // cache hits / file responses, all back ends
	imbalance float64 // most requests on one back end / mean
	errors    int64
}

func BenchmarkSite(b *testing.B) {
	if !*flagSite {
		b.Skip("the site comparison runs with -site (make bench-site)")
	}
	bin := mirrorBinary(b)
	dir := b.TempDir()
	w := newWorkload(b, filepath.Join(dir, "root"))
	// Printed, not logged: a parent benchmark's log only shows on failure.
	fmt.Printf("%d files, working set %.1f MiB, %d back ends × %.1f MiB cache, miss delay %v/MiB, Zipf α=%.2f, %d+%d requests per policy, concurrency %d, mirror %s",
		len(w.paths), float64(w.bytes)/(1<<20), backends, float64(w.bytes/backends)/(1<<20), *flagMissDelay,
		*flagAlpha, *flagWarmup, *flagRequests, *flagConcurrency, *flagBin)
	fmt.Println()
	var rows []result
	for _, pol := range strings.Split(*flagPolicies, ",") {
		b.Run(pol, func(b *testing.B) {
			r := runPolicy(b, bin, dir, w, pol)
			b.ReportMetric(r.rps, "req/s")
			b.ReportMetric(100*r.hit, "hit%")
			rows = append(rows, r)
		})
	}
	fmt.Printf("\n%s\n", table(rows))
	var wrr *result
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
			if 1-r.hit > (1-wrr.hit)/2 {
				b.Errorf("%s: hit ratio %.1f%% against wrr's %.1f%%: want at most half of wrr's misses", r.policy, 100*r.hit, 100*wrr.hit)
			}
		}
	}
}

// table formats the rows side by side.
func table(rows []result) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%-12s %10s %8s %10s %7s\n", "policy", "req/s", "hit", "imbalance", "errors")
	for _, r := range rows {
		fmt.Fprintf(&s, "%-12s %10.0f %7.1f%% %10.2f %7d\n", r.policy, r.rps, 100*r.hit, r.imbalance, r.errors)
	}
	return s.String()
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

// runPolicy starts fresh back ends and a front end with policy, plays
// the warm-up and then the measured part of the trace, and reads the
// back ends' cache counters around the measured part.
func runPolicy(b *testing.B, bin, dir string, w *workload, policy string) result {
	b.Helper()
	cache := w.bytes / backends
	var bes []*mirrorProc
	var list strings.Builder
	for i := range backends {
		name := fmt.Sprintf("be%d", i+1)
		cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: www.example.org
member: %s
host: %s.site.example.org
capacity: 1000
root: %s
redirect: {enabled: false}
site:
  cache: {memory: %d, max_object: 1MiB, miss_delay_per_mib: %s}
`, name, name, strconv.Quote(w.root), cache, *flagMissDelay)
		be := startMirror(b, bin, filepath.Join(dir, policy+"-"+name+".yaml"), cfg)
		bes = append(bes, be)
		fmt.Fprintf(&list, "  - {name: %s, url: 'http://%s', memory: %d}\n", name, be.http, cache)
	}
	fe := startMirror(b, bin, filepath.Join(dir, policy+"-fe.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: www.example.org
member: fe
host: fe.site.example.org
capacity: 1000
redirect: {enabled: false}
backends:
%ssite:
  policy: {name: %s, ward_interval: 5s, replica_hold: 5s}
  health: {interval: 1s}
`, list.String(), policy))

	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: *flagConcurrency,
		MaxConnsPerHost:     *flagConcurrency,
		DisableCompression:  true,
	}, Timeout: time.Minute}
	defer client.CloseIdleConnections()
	base := "http://" + fe.http
	var errs atomic.Int64
	play(client, base, w, w.trace[:*flagWarmup], &errs)
	before := scrape(b, bes)
	start := time.Now()
	play(client, base, w, w.trace[*flagWarmup:], &errs)
	elapsed := time.Since(start)
	after := scrape(b, bes)

	r := result{policy: policy, rps: float64(*flagRequests) / elapsed.Seconds(), errors: errs.Load()}
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
		b.Errorf("%s: %d requests failed", policy, r.errors)
	}
	return r
}

// play sends the requests of trace with -concurrency workers.
func play(c *http.Client, base string, w *workload, trace []int32, errs *atomic.Int64) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range *flagConcurrency {
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
		resp, err := http.Get("http://" + be.admin + "/metrics")
		if err != nil {
			b.Fatal(err)
		}
		text, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		var ok bool
		if out[i].hits, ok = metric(string(text), "transmirror_mirror_cache_hits_total"); !ok {
			b.Fatalf("back end %s has no transmirror_mirror_cache_hits_total: its mirror does not wire site.cache into its FileServer (-bin=self does)", be.http)
		}
		out[i].misses, _ = metric(string(text), "transmirror_mirror_cache_misses_total")
	}
	return out
}

// metric returns the value of the unlabelled sample name in a Prometheus
// text exposition.
func metric(text, name string) (float64, bool) {
	for line := range strings.SplitSeq(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// mirrorProc is a running mirror and the addresses it logged.
type mirrorProc struct {
	http, admin string
}

var (
	httpAddrRE  = regexp.MustCompile(`msg="http listening" addr=(\S+)`)
	adminAddrRE = regexp.MustCompile(`msg="admin listening" addr=(\S+)`)
)

// startMirror writes cfg to path, starts the mirror on it with its
// addresses on 127.0.0.1:0, waits for "mirror started" and stops it (by
// its PID) when the benchmark ends.
func startMirror(b *testing.B, bin, path, cfg string) *mirrorProc {
	b.Helper()
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", path, "-admin", "127.0.0.1:0")
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
	p := &mirrorProc{}
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
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := serveSelf(path, *admin, log); err != nil {
		log.Error("mirror stopped", "err", err)
		return 1
	}
	return 0
}

func serveSelf(path, adminAddr string, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cfg, err := mirror.LoadConfig(path)
	if err != nil {
		return err
	}
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
		cache, err := mirror.NewCache(cfg.Site.Cache, mirror.CacheOptions{Registerer: reg})
		if err != nil {
			return err
		}
		files, err := mirror.NewFileServer(cfg.Root, mirror.FileServerOptions{Cache: cache, Logger: log})
		if err != nil {
			return err
		}
		defer files.Close()
		h = files
	}
	o := mirror.ServerOptionsFromConfig(cfg, h)
	o.Logger, o.Registerer = log, reg
	pub, err := mirror.NewServer(o)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	adm, err := mirror.NewServer(mirror.ServerOptions{Handler: mux, Logger: log})
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
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return pub.Serve(gctx, ln) })
	g.Go(func() error { return adm.Serve(gctx, aln) })
	log.Info("mirror started", "member", cfg.Member)
	return g.Wait()
}
