// Package benchhttp measures the site front end against HAProxy and
// nginx for real: the same two nginx back ends behind each front end in
// turn, wrk as the client, everything on loopback. It is a benchmark,
// not a test: `make bench-http` runs it
// (go test -run '^$' -bench BenchmarkHTTP -benchtime 1x ./e2e/benchhttp/ -args -http),
// and without -http it skips, so that `make bench` and `go test ./...`
// stay fast.
//
// The content, generated into a temporary directory, is one 4 KiB file,
// a mix of 1,000 files of 4 KiB (wrk's Lua script sends their paths in
// turn) and one 1 MiB file. The back ends are two nginx serving it
// (sendfile, open file cache); for the mirror in handoff mode, which
// needs mirror back ends, two mirrors serving it from their memory
// caches. The front ends: HAProxy balance roundrobin and balance uri,
// nginx round robin and hash $request_uri consistent, the mirror's site
// front end in proxy mode with wrr and with lard, and the mirror in
// handoff mode (wrr). Every one keeps its connections to the back ends
// alive (HAProxy http-reuse always; nginx keepalive, HTTP/1.1, no
// Connection header) and sets X-Forwarded-For, as the mirror does. The
// clients keep their connections too, but for handoff: after a handoff
// the connection is the back end's and the front end would see only its
// first request, so its clients send Connection: close, and so do those
// of a second HAProxy roundrobin, the reference of the handoff row.
//
// Correctness first: curl fetches every path of each kind through every
// front end (status, size, the same bytes as the file), and the back
// ends' X-Backend header shows that both serve and that a front end
// that picks by path sends a path to the same back end twice. Then, for
// -rounds rounds (the front ends' order reversed every other round),
// each kind runs through each front end: a -warmup wrk run, then
// -duration measured, wrk pinned to -client-cpu (one thread,
// -connections connections, --latency) while the front end and the back
// ends share -server-cpu. CPU time is utime+stime from /proc/PID/stat of
// the front end and of the back ends (each with its children: nginx's
// workers) around the measured run, divided by the requests wrk
// completed; req/s and p99 are wrk's; what the rest of the machine took
// meanwhile (/proc/stat's busy time but the servers' and wrk's own) is
// printed with each run and summed up under the table, so that a run on
// a shared machine says so. Ratios are taken within each
// round against the HAProxy front end of the same kind of pick
// (roundrobin for round robin and wrr, balance uri for hash and lard),
// so that drift on a shared machine cancels.
package benchhttp

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Flags of the comparison (go test ... -args -http -rounds 1 -duration 2s).
var (
	flagHTTP        = flag.Bool("http", false, "run BenchmarkHTTP (make bench-http)")
	flagMirror      = flag.String("mirror", filepath.Join("..", "..", "bin", "mirror"), "mirror binary (make build)")
	flagHAProxy     = flag.String("haproxy", "/usr/sbin/haproxy", "haproxy binary (Debian package haproxy)")
	flagNginx       = flag.String("nginx", "/usr/sbin/nginx", "nginx binary (Debian package nginx)")
	flagWrk         = flag.String("wrk", "wrk", "wrk binary (Debian package wrk)")
	flagDuration    = flag.Duration("duration", 6*time.Second, "measured part of each run (whole seconds)")
	flagWarmup      = flag.Duration("warmup", time.Second, "warm-up before each run (whole seconds; 0: none)")
	flagRounds      = flag.Int("rounds", 2, "rounds; each runs every kind through every front end")
	flagConnections = flag.Int("connections", 32, "wrk's connections")
	flagServerCPU   = flag.String("server-cpu", "0", "taskset -c list of the front ends and the back ends")
	flagClientCPU   = flag.String("client-cpu", "1", "taskset -c list of wrk")
	flagFrontEnds   = flag.String("frontends", allFrontEnds(), "front ends compared, in the table's order")
)

// allFrontEnds is the default of -frontends: every front end's key.
func allFrontEnds() string {
	var keys []string
	for _, fe := range frontEnds {
		keys = append(keys, fe.key)
	}
	return strings.Join(keys, ",")
}

// selected returns the front ends -frontends names, in frontEnds' order.
func selected(list string) ([]frontEnd, error) {
	names := strings.Split(list, ",")
	var out []frontEnd
	for _, fe := range frontEnds {
		if slices.Contains(names, fe.key) {
			out = append(out, fe)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(out, func(fe frontEnd) bool { return fe.key == n }) {
			return nil, fmt.Errorf("-frontends: %q is not one of %s", n, allFrontEnds())
		}
	}
	return out, nil
}

func BenchmarkHTTP(b *testing.B) {
	if !*flagHTTP {
		b.Skip("the comparison with HAProxy and nginx runs with -http (make bench-http)")
	}
	fes := setup(b)
	ctx := b.Context()
	dir := b.TempDir()
	root := filepath.Join(dir, "root")
	if err := writeContent(root); err != nil {
		b.Fatal(err)
	}
	sites := servers(b, dir, root, fes)
	for _, s := range sites {
		if err := checkSite(ctx, filepath.Join(dir, "curl-"+s.key), root, s); err != nil {
			b.Fatalf("%s: %v", s.label, err)
		}
	}
	fmt.Printf("curl: every path of each kind through each front end: 200, the file's size and bytes\n")
	script := filepath.Join(dir, "mix.lua")
	if err := os.WriteFile(script, []byte(mixScript(kinds()[1].paths)), 0o644); err != nil {
		b.Fatal(err)
	}
	header := headerLine()
	fmt.Print(header)
	m := runRounds(b, sites, script)
	fmt.Printf("\n%s%s%s", header, table(rows(m, kinds(), fes)), othersLine(m))
}

// runRounds runs -rounds rounds, each every kind through every site, the
// sites' order reversed every other round, and returns the samples; a
// run with failed requests fails the benchmark at the end.
func runRounds(b *testing.B, sites []*site, script string) measured {
	b.Helper()
	m := measured{}
	for round := range *flagRounds {
		order := slices.Clone(sites)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for i, k := range kinds() {
			for _, s := range order {
				r := wrkRun{bin: *flagWrk, cpus: *flagClientCPU, url: s.url + k.paths[0], conns: *flagConnections, close: s.close}
				if i == 1 {
					r.script = script
				}
				x, err := measure(b.Context(), s, r)
				if err != nil {
					b.Fatalf("round %d, %s, %s: %v", round+1, k.name, s.label, err)
				}
				logRun(round, k, s, x)
				if x.errors() > 0 {
					b.Errorf("round %d, %s, %s: %d requests failed", round+1, k.name, s.label, x.errors())
				}
				m.add(k.name, s.key, x)
			}
		}
	}
	return m
}

// setup checks the flags and the tools and returns the front ends.
func setup(b *testing.B) []frontEnd {
	b.Helper()
	if runtime.NumCPU() < 2 {
		b.Fatalf("%d CPU: the servers and wrk need a core each", runtime.NumCPU())
	}
	if *flagRounds < 1 || *flagDuration < time.Second || *flagDuration%time.Second != 0 || *flagWarmup%time.Second != 0 {
		b.Fatalf("-rounds %d, -duration %v, -warmup %v: want a round or more and whole seconds (wrk -d)", *flagRounds, *flagDuration, *flagWarmup)
	}
	fes, err := selected(*flagFrontEnds)
	if err != nil {
		b.Fatal(err)
	}
	for _, tool := range []*string{flagHAProxy, flagNginx, flagWrk, flagMirror} {
		p, err := exec.LookPath(*tool)
		if err != nil {
			b.Fatalf("%s: %v (make bench-http installs the tools and builds the mirror)", *tool, err)
		}
		if *tool, err = filepath.Abs(p); err != nil {
			b.Fatal(err)
		}
	}
	for _, tool := range []string{"curl", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Fatalf("%s: %v (make bench-http installs it)", tool, err)
		}
	}
	return fes
}

// measure warms s up with r, then runs r for -duration and reads the
// CPU time of the front end and of the back ends around it.
func measure(ctx context.Context, s *site, r wrkRun) (sample, error) {
	if *flagWarmup > 0 {
		w := r
		w.duration = *flagWarmup
		if _, err := w.run(ctx); err != nil {
			return sample{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	fe0, err := sampleCPU(s.pid)
	if err != nil {
		return sample{}, err
	}
	be0, err := sampleCPU(s.backends...)
	if err != nil {
		return sample{}, err
	}
	busy0, err := machineBusy()
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	r.duration = *flagDuration
	w, err := r.run(ctx)
	if err != nil {
		return sample{}, err
	}
	busy1, err := machineBusy()
	if err != nil {
		return sample{}, err
	}
	x := sample{wrkResult: w, seconds: time.Since(start).Seconds()}
	fe1, err := sampleCPU(s.pid)
	if err != nil {
		return sample{}, err
	}
	be1, err := sampleCPU(s.backends...)
	if err != nil {
		return sample{}, err
	}
	if x.feCPU, err = fe1.since(fe0); err != nil {
		return x, err
	}
	if x.beCPU, err = be1.since(be0); err != nil {
		return x, err
	}
	x.others = max(0, busy1-busy0-x.feCPU-x.beCPU-w.cpu)
	return x, nil
}

// logRun prints one measured run as it ends.
func logRun(round int, k kind, s *site, x sample) {
	fe, be := x.perRequest()
	fmt.Printf("round %d  %-22s  %-30s  %7.0f req/s  p99 %6.2f ms  FE %6.1f µs/req  BE %6.1f µs/req  %d errors  others %3.0f%% of a core\n",
		round+1, k.name, s.label, x.rps, 1e3*x.p99, 1e6*fe, 1e6*be, x.errors(), 100*x.othersShare())
}

// headerLine says what ran where: the date, the machine, the versions,
// the pinning and the runs.
func headerLine() string {
	return fmt.Sprintf("bench-http %s · nproc %d · %s · %s · %s · %s · mirror (this tree)\n"+
		"front end and back ends on CPU %s, wrk on CPU %s (1 thread, %d connections), HTTP/1.1 over 127.0.0.1; "+
		"each run %v warm-up + %v measured, rounds: %d, the front ends' order reversed every other round\n",
		time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), cpuModel(),
		version(*flagHAProxy, "-v"), version(*flagNginx, "-v"), version(*flagWrk, "-v"),
		*flagServerCPU, *flagClientCPU, *flagConnections, *flagWarmup, *flagDuration, *flagRounds)
}

// version is the first line of argv's output without the word
// "version" and what follows " - ", " [" or " Copyright" (HAProxy and wrk
// add a date, a web address, a copyright): "HAProxy 2.6.12 2023/01/01",
// "nginx/1.22.1", "wrk debian/4.1.0".
func version(argv ...string) string {
	out, _ := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	for _, sep := range []string{" - ", " [", " Copyright"} {
		line, _, _ = strings.Cut(line, sep)
	}
	var words []string
	for _, w := range strings.Fields(line) {
		if w != "version" && w != "version:" && !(w == "nginx" && len(words) == 0) {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return filepath.Base(argv[0]) + " (version unknown)"
	}
	return strings.Join(words, " ")
}

// cpuModel is the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
