// Package benchdns measures dnsd against gdnsd for real: both servers on
// loopback serving the same zone (a static name and a group www with
// members in three regions, located through the same generated GeoIP
// database), dnsperf as the client. It is a benchmark, not a test:
// `make bench-dns` runs it
// (go test -run '^$' -bench BenchmarkDNS -benchtime 1x ./e2e/benchdns/ -args -dns),
// and without -dns it skips, so that `make bench` and `go test ./...`
// stay fast.
//
// Both servers run pinned to one core (taskset -c 0), dnsperf to the
// other (taskset -c 1). Before measuring, the real dig checks that both
// give each region the same answers (ECS from each region's IPv4 and
// IPv6 network, no ECS, the static name), and a few thousand queries
// check that the two eu members share answers 3:1 on both. Then, for
// three rounds, each mix runs on each server in turn (the order swapped
// every round), each run after the machine was quiet: a 1 s warm-up,
// then 10 s measured. The server's CPU time is utime+stime from
// /proc/PID/stat around the measured part, divided by the queries
// answered.
//
// The mixes: (a) the static name without EDNS; (b) the group without
// EDNS; (c) the group, half the queries with ECS from each region (IPv4
// and IPv6), half without EDNS, from a wire-format datafile (dnsperf -B,
// since -E puts one option on every query); (d) the same as (c) at a
// fixed 200 q/s with dnsperf -v, whose per-query latencies give the
// 99th percentile (too costly for dnsperf in a closed loop, so (a)-(c)
// have none); (e) and (f), (a) and (c) with the DO bit on every query,
// answered signed: dnsd signs online, against Knot with mod-onlinesign
// (gdnsd does not sign), and the line under the table gives dnsd's cost
// per signed answer against its own unsigned one and the signature
// cache's hit ratio; (g) is (c) on big, a group of 512 members spread
// over the globe, run on dnsd alone: the line under the table gives its
// cost per answer against (c)'s on the 4-member www.
package benchdns

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Flags of the comparison (go test ... -args -dns -rounds 5).
var (
	flagDNS          = flag.Bool("dns", false, "run BenchmarkDNS (make bench-dns)")
	flagDNSD         = flag.String("dnsd", filepath.Join("..", "..", "bin", "dnsd"), "dnsd binary (make build)")
	flagGdnsd        = flag.String("gdnsd", "gdnsd", "gdnsd binary (Debian package gdnsd; also looked for in /usr/sbin)")
	flagKnot         = flag.String("knotd", "knotd", "knotd binary (Debian package knot; also looked for in /usr/sbin), the peer of the signed mixes")
	flagDnsperf      = flag.String("dnsperf", "dnsperf", "dnsperf binary (Debian package dnsperf)")
	flagDuration     = flag.Duration("duration", 10*time.Second, "measured part of each run")
	flagWarmup       = flag.Duration("warmup", time.Second, "warm-up before each run")
	flagRounds       = flag.Int("rounds", 3, "rounds; each runs every mix on each server")
	flagRate         = flag.Int("rate", 200, "queries per second of the fixed-rate mix (d)")
	flagServerCPU    = flag.String("server-cpu", "0", "taskset -c list of the servers")
	flagClients      = flag.Int("clients", 1, "dnsperf client sockets (-c); SO_REUSEPORT spreads clients over dnsd's sockets by their address and port")
	flagDNSDProcs    = flag.Int("dnsd-procs", 0, "GOMAXPROCS and udp_sockets of dnsd; 0: as many as -server-cpu gives it")
	flagClientCPU    = flag.String("client-cpu", "1", "taskset -c list of dnsperf")
	flagQuietIdle    = flag.Float64("quiet-idle", 0.9, "a run starts once the machine was this idle over one window")
	flagQuietWindow  = flag.Duration("quiet-window", time.Second, "window of the quiet check")
	flagQuietTimeout = flag.Duration("quiet-timeout", time.Minute, "after this, a run starts anyway (and is counted as not quiet)")
)

// run is one measured dnsperf run on one server.
type run struct {
	perf
	ticks  int64   // server utime+stime during the measured part
	idle   float64 // idle share of the machine in the last window before it
	quiet  bool
	waited time.Duration
}

// cpuPerQuery is the server's CPU time per answered query, µs.
func (r run) cpuPerQuery() float64 {
	if r.completed == 0 {
		return 0
	}
	return float64(r.ticks) * 1e6 / userHZ / float64(r.completed)
}

// core is the share of its core the server used, CPU time / run time.
func (r run) core() float64 {
	if r.runTime == 0 {
		return 0
	}
	return float64(r.ticks) / userHZ / r.runTime
}

// row is one server's runs of one mix, summarised for the table.
type row struct {
	mix    string
	server string
	runs   []run
}

// summary is what the table shows of a row: QPS the best round (most),
// CPU the best round (least per query) and the core share of that round,
// latencies the median of the rounds, lost the sum.
type summary struct {
	qps, cpu, core     float64
	avg, p99, max      float64 // seconds; p99 < 0 when not measured
	lost, sent, rounds int64
}

func (r row) summary() summary {
	var s summary
	if len(r.runs) == 0 {
		return s
	}
	best := r.runs[0]
	var avg, p99, mx []float64
	for _, x := range r.runs {
		s.qps = max(s.qps, x.qps)
		if x.cpuPerQuery() < best.cpuPerQuery() {
			best = x
		}
		avg, p99, mx = append(avg, x.avg), append(p99, x.p99()), append(mx, x.max)
		s.lost += x.lost
		s.sent += x.sent
	}
	s.cpu, s.core = best.cpuPerQuery(), best.core()
	s.avg, s.p99, s.max = median(avg), median(p99), median(mx)
	s.rounds = int64(len(r.runs))
	return s
}

// median of xs (the lower middle for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

func BenchmarkDNS(b *testing.B) {
	if !*flagDNS {
		b.Skip("the comparison with gdnsd runs with -dns (make bench-dns)")
	}
	if runtime.NumCPU() < 2 {
		b.Fatalf("%d CPU: the servers and dnsperf need a core each", runtime.NumCPU())
	}
	gdnsd := lookPath(b, *flagGdnsd, "/usr/sbin/gdnsd")
	knotd := lookPath(b, *flagKnot, "/usr/sbin/knotd")
	dnsperf := lookPath(b, *flagDnsperf, "")
	lookPath(b, "dig", "")
	lookPath(b, "taskset", "")
	dnsd, err := filepath.Abs(*flagDNSD)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := os.Stat(dnsd); err != nil {
		b.Fatalf("dnsd: %v (make build)", err)
	}
	ctx := b.Context()

	dir := b.TempDir()
	mmdb := filepath.Join(dir, "regions.mmdb")
	if err := writeMMDB(filepath.Join("..", "..", "scheduler", "geo", "testdata", "regions.csv"), mmdb); err != nil {
		b.Fatal(err)
	}
	ddir, gdir, kdir := filepath.Join(dir, "dnsd"), filepath.Join(dir, "gdnsd"), filepath.Join(dir, "knot")
	for _, d := range []string{ddir, gdir, kdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := writeDNSDConfig(ddir, mmdb, *flagDNSDProcs)
	if err != nil {
		b.Fatal(err)
	}
	servers := []*server{startDNSD(b, dnsd, cfg, *flagDNSDProcs), startGdnsd(b, gdnsd, gdir, mmdb)}
	knot := startKnot(b, knotd, kdir)
	for _, s := range []*server{servers[0], knot} {
		checkSigned(b, s)
	}
	peers := map[string]*server{"gdnsd": servers[1], "knot": knot}

	for _, c := range answerCases() {
		for _, s := range servers {
			if err := checkAnswers(ctx, s, c); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := checkBig(ctx, servers[0]); err != nil {
		b.Fatal(err)
	}
	want, label := weightOf("fra1")
	var shares []string
	for _, s := range servers {
		share, err := weightShare(s, regions[0].ecs4, "127.0.1.1", 4000)
		if err != nil {
			b.Fatal(err)
		}
		if share < want-0.05 || share > want+0.05 {
			b.Fatalf("%s: fra1 got %.1f%% of %s, want %.0f%% (weights %s)", s.name, 100*share, regions[0].name, 100*want, label)
		}
		shares = append(shares, fmt.Sprintf("%s %.1f%%", s.name, 100*share))
	}

	mixes := []mix{
		{key: "a", title: "static A, no EDNS", file: filepath.Join(dir, "a.txt"), peer: "gdnsd"},
		{key: "b", title: "www A, no EDNS", file: filepath.Join(dir, "b.txt"), peer: "gdnsd"},
		{key: "c", title: "www A, ½ ECS (3 regions × v4/v6), ½ no EDNS", file: filepath.Join(dir, "c.bin"), binary: true, peer: "gdnsd"},
		{key: "d", title: fmt.Sprintf("as c, at %d q/s", *flagRate), file: filepath.Join(dir, "c.bin"), binary: true, rate: *flagRate, peer: "gdnsd"},
		{key: "e", title: "static A, DO: signed", file: filepath.Join(dir, "a.txt"), do: true, peer: "knot"},
		{key: "f", title: "as c, every query DO: signed", file: filepath.Join(dir, "f.bin"), binary: true, peer: "knot"},
		{key: "g", title: fmt.Sprintf("as c, the %d-member group big", bigMembers), file: filepath.Join(dir, "g.bin"), binary: true, self: "c"},
	}
	if err := writeTextData(mixes[0].file, strings.TrimSuffix(staticName, ".")+" A"); err != nil {
		b.Fatal(err)
	}
	if err := writeTextData(mixes[1].file, strings.TrimSuffix(groupName, ".")+" A"); err != nil {
		b.Fatal(err)
	}
	for _, d := range []struct {
		m     mix
		group string
		do    bool
	}{{mixes[2], groupName, false}, {mixes[5], groupName, true}, {mixes[6], bigName, false}} {
		if err := writeECSData(d.m.file, d.group, d.do); err != nil {
			b.Fatal(err)
		}
	}

	header := fmt.Sprintf("bench-dns %s · nproc %d · %s · %s · %s · %s · %s\n"+
		"servers on CPU %s, dnsperf on CPU %s (%d client sockets), UDP over 127.0.0.1; each run %v warm-up + %v, %d rounds, servers alternating\n"+
		"dig: both servers give each region the same answers; fra1's share of eu (weights %s): %s\n"+
		"CPU is counted in ticks of 10 ms: at %d q/s one tick is %.0f µs/q\n",
		time.Now().Format("2006-01-02"), runtime.NumCPU(), cpuModel(),
		dnsdLabel(*flagDNSDProcs), version(gdnsd, "-h"), version(knotd, "-V"), version(dnsperf, "-H"),
		*flagServerCPU, *flagClientCPU, *flagClients, *flagWarmup, *flagDuration, *flagRounds,
		label, strings.Join(shares, ", "),
		*flagRate, 1e6/userHZ/(float64(*flagRate)*flagDuration.Seconds()))
	fmt.Print(header)

	rows := map[string]*row{}
	var order []*row
	for _, m := range mixes {
		for _, s := range m.servers(servers[0], peers) {
			r := &row{mix: m.key + " " + m.title, server: s.name}
			rows[m.key+s.name] = r
			order = append(order, r)
		}
	}
	signed0, hits0 := cacheHits(b, servers[0].admin)
	for round := range *flagRounds {
		for _, m := range mixes {
			turn := m.servers(servers[0], peers)
			if round%2 == 1 {
				slices.Reverse(turn)
			}
			for _, s := range turn {
				x, err := measure(ctx, dnsperf, s, m)
				if err != nil {
					b.Fatal(err)
				}
				if x.noerror != x.completed {
					b.Errorf("round %d %s %s: %d of %d answers NOERROR", round+1, m.key, s.name, x.noerror, x.completed)
				}
				busy := ""
				if !x.quiet {
					busy = ", NOT QUIET"
				}
				fmt.Printf("round %d %s %-5s %8.0f q/s %7.2f µs/q %4.0f%% core, avg %.0f µs, lost %d (idle %.0f%% after %.0fs%s)\n",
					round+1, m.key, s.name, x.qps, x.cpuPerQuery(), 100*x.core(), x.avg*1e6, x.lost,
					100*x.idle, x.waited.Seconds(), busy)
				rows[m.key+s.name].runs = append(rows[m.key+s.name].runs, x)
			}
		}
	}
	signed1, hits1 := cacheHits(b, servers[0].admin)
	fmt.Printf("\n%s%s%s%s", header, table(order), signedLine(rows, signed1-signed0, hits1-hits0), selfLine(rows, mixes))
	for _, m := range mixes {
		ref := m.key + m.peer
		if m.self != "" {
			ref = m.self + "dnsd"
		}
		if d, g := rows[m.key+"dnsd"].summary(), rows[ref].summary(); g.cpu > 0 {
			b.ReportMetric(d.cpu/g.cpu, "cpu-ratio-"+m.key)
		}
	}
}

// selfLine gives dnsd's CPU per answer on the mixes compared with
// another mix of its own (g: the 512-member group against www).
func selfLine(rows map[string]*row, mixes []mix) string {
	var parts []string
	for _, m := range mixes {
		if m.self == "" {
			continue
		}
		if d, ref := rows[m.key+"dnsd"].summary(), rows[m.self+"dnsd"].summary(); ref.cpu > 0 {
			parts = append(parts, fmt.Sprintf("%s/%s %.2f×", m.key, m.self, d.cpu/ref.cpu))
		}
	}
	return fmt.Sprintf("dnsd's CPU per answer of the %d-member group against the %d-member one: %s\n",
		bigMembers, len(members), strings.Join(parts, ", "))
}

// measure waits for a quiet machine, warms s up with m, then runs m for
// -duration and reads s's CPU time around it.
func measure(ctx context.Context, dnsperf string, s *server, m mix) (run, error) {
	var x run
	var err error
	x.idle, x.waited, x.quiet, err = waitQuiet(ctx, *flagQuietIdle, *flagQuietWindow, *flagQuietTimeout)
	if err != nil {
		return x, err
	}
	host, port, err := net.SplitHostPort(s.addr)
	if err != nil {
		return x, err
	}
	if _, out, err := runDnsperf(ctx, dnsperf, host, port, m, *flagWarmup, false); err != nil {
		return x, fmt.Errorf("%s warm-up: %w\n%s", s.name, err, out)
	}
	before, err := procTicks(s.pid)
	if err != nil {
		return x, err
	}
	p, out, err := runDnsperf(ctx, dnsperf, host, port, m, *flagDuration, m.rate > 0)
	if err != nil {
		return x, fmt.Errorf("%s: %w\n%s", s.name, err, out)
	}
	after, err := procTicks(s.pid)
	if err != nil {
		return x, err
	}
	x.perf, x.ticks = p, after-before
	return x, nil
}

// table formats the rows, two per mix, with the CPU ratio on dnsd's.
func table(rows []*row) string {
	var s strings.Builder
	s.WriteString("QPS and CPU: best of the rounds (most q/s; least server CPU per answered query, utime+stime,\n" +
		"and the share of its core in that round); latencies: median of the rounds; lost: sum of the rounds.\n" +
		"p99 only at a fixed rate (dnsperf -v); closed loop (-c 1 -q 100) has none, - below.\n\n")
	fmt.Fprintf(&s, "%-46s %-6s %8s %9s %5s %8s %8s %8s %6s %10s\n",
		"mix", "server", "q/s", "CPU µs/q", "core", "avg µs", "p99 µs", "max µs", "lost", "CPU d/peer")
	gd := map[string]summary{} // the peer's row of each mix
	for _, r := range rows {
		if r.server != "dnsd" {
			gd[r.mix] = r.summary()
		}
	}
	for _, r := range rows {
		x := r.summary()
		p99 := "-"
		if x.p99 >= 0 {
			p99 = fmt.Sprintf("%.0f", x.p99*1e6)
		}
		ratio := ""
		if g, ok := gd[r.mix]; ok && r.server == "dnsd" && g.cpu > 0 {
			ratio = fmt.Sprintf("%.2f×", x.cpu/g.cpu)
		}
		line := fmt.Sprintf("%-46s %-6s %8.0f %9.2f %4.0f%% %8.0f %8s %8.0f %6d %10s",
			r.mix, r.server, x.qps, x.cpu, 100*x.core, x.avg*1e6, p99, x.max*1e6, x.lost, ratio)
		s.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return s.String()
}

// lookPath finds name in PATH, else at fallback, else fails.
// dnsdLabel names dnsd in the header, with its GOMAXPROCS when set.
func dnsdLabel(procs int) string {
	if procs > 0 {
		return fmt.Sprintf("dnsd (this tree, GOMAXPROCS=%d, %d UDP sockets)", procs, procs)
	}
	return "dnsd (this tree)"
}

func lookPath(b *testing.B, name, fallback string) string {
	b.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if fallback != "" {
		if _, err := os.Stat(fallback); err == nil {
			return fallback
		}
	}
	b.Fatalf("%s not found (make bench-dns installs it)", name)
	return ""
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
