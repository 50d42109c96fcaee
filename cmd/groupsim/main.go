// Command groupsim replays a workload through simulated sites, with the
// site policies the mirrors' front ends run, in virtual time:
//
//	groupsim [-log access.log[.gz]] [-policies wrr,lard] [-backends 1,2,4,8,16] [-memory-ratio 4] ...
//
// The workload is an access log in Common or Combined Log Format (plain
// or gzip; broken lines are counted and reported), or without -log a
// synthetic SURGE-style one from a seed. Each policy runs on each number
// of back ends, each back end with the LARD paper's costs and a memory
// cache of the working set over -memory-ratio, in a closed loop of
// -outstanding requests; the table gives the throughput, the hit ratios
// and the spread of the requests over the back ends. The same flags give
// the same output, byte for byte. groupsim -version prints the module
// version, the commit, its time and the Go version on one line and exits 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transmirror/transmirror/cmd/internal/buildinfo"
	"github.com/transmirror/transmirror/scheduler/sim/backend"
	"github.com/transmirror/transmirror/scheduler/sim/report"
	"github.com/transmirror/transmirror/scheduler/sim/sitesim"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
	"github.com/transmirror/transmirror/scheduler/site"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// options are groupsim's flags.
type options struct {
	log         string
	logFormat   string
	synth       workload.Synthetic
	policies    []string
	backends    []int
	memoryRatio float64
	maxObject   int64
	outstanding int
	warmup      float64
	csv         bool
	report      string // -report: the directory of simulation.md
	level       string // site or global
	mode        string // the front end's
	binWidth    time.Duration
	reportScale float64
	global      globalOptions
}

// run is groupsim with its arguments; it returns the exit status: 0
// done, 1 failed, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	o, code := parse(args, stdout, stderr)
	if code >= 0 {
		return code
	}
	w, err := load(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "groupsim:", err)
		return 1
	}
	switch {
	case o.report != "":
		err = writeReport(o, w, o.report)
	case o.level == "global":
		err = simulateGlobal(o, o.global, w.log, stdout)
	default:
		err = simulate(o, w, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "groupsim:", err)
		return 1
	}
	return 0
}

// parse reads the flags; code is the exit status when groupsim must
// stop (-1: go on). -version prints its line to stdout and stops.
func parse(args []string, stdout, stderr io.Writer) (o options, code int) {
	fs := flag.NewFlagSet("groupsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var raw rawFlags
	var version bool
	siteFlags(fs, &o, &raw)
	globalFlags(fs, &o.global, &raw.globalPolicies, &raw.ttls)
	buildinfo.Flag(fs, &version)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: groupsim [flags]\n\nReplays a workload through simulated sites (the LARD paper's costs), each policy on each number of back ends;\n"+
			"with -level global through a simulated mirror group, each of dnsd's policies.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0
		}
		return o, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "groupsim: no arguments are taken, only flags (see groupsim -h)")
		return o, 2
	}
	if version {
		fmt.Fprintln(stdout, buildinfo.Version("groupsim"))
		return o, 0
	}
	if err := o.check(raw); err != nil {
		fmt.Fprintln(stderr, "groupsim:", err)
		return o, 2
	}
	return o, -1
}

// rawFlags are the flags that check parses into options.
type rawFlags struct {
	policies, backends, format, globalPolicies, ttls string
}

// siteFlags declares the flags of the workload, the site level and the
// output on fs.
func siteFlags(fs *flag.FlagSet, o *options, raw *rawFlags) {
	fs.StringVar(&o.log, "log", "", "replay this access log (plain or gzip, in -log-format); without it a synthetic workload")
	fs.StringVar(&o.logFormat, "log-format", "clf", "-log's format: clf (Common or Combined Log Format) or worldcup (the WorldCup98 data set's binary records; a day's files may be concatenated)")
	fs.Uint64Var(&o.synth.Seed, "seed", 1, "synthetic: the seed of the workload (the same seed, the same requests)")
	fs.IntVar(&o.synth.Requests, "requests", 200_000, "synthetic: number of requests")
	fs.IntVar(&o.synth.Objects, "objects", 20_000, "synthetic: number of distinct objects")
	fs.Float64Var(&o.synth.Alpha, "alpha", 0.8, "synthetic: Zipf exponent of the objects' popularity")
	fs.Float64Var(&o.synth.MaxSize, "max-size", 1<<20, "synthetic: largest object, in bytes (the Pareto tail is cut there)")
	fs.IntVar(&o.synth.Clients, "clients", 10_000, "synthetic: number of clients")
	fs.StringVar(&raw.policies, "policies", strings.Join(site.Names(), ","), "site policies to compare, comma-separated")
	fs.StringVar(&raw.backends, "backends", "1,2,4,8,16", "numbers of back ends to simulate, comma-separated")
	fs.Float64Var(&o.memoryRatio, "memory-ratio", 4, "the working set over one back end's memory cache")
	fs.Int64Var(&o.maxObject, "max-object", 1<<20, "largest object a back end's cache keeps, in bytes")
	fs.StringVar(&o.mode, "mode", sitesim.ModeHandoff, "site: the front end's mode: handoff (the back ends answer the clients; the papers' setting) or proxy (every response byte through the front end, whose CPU then counts)")
	fs.DurationVar(&o.binWidth, "site-bin", 0, "site: also print each run's figures per this much virtual time (0: none)")
	fs.IntVar(&o.outstanding, "outstanding", 64, "requests the clients keep in flight (a closed loop: throughput is an outcome)")
	fs.Float64Var(&o.warmup, "warmup", 0.2, "share of the leading requests not counted (the caches fill)")
	fs.StringVar(&raw.format, "format", "table", "output: table or csv")
	fs.StringVar(&o.level, "level", "site", "site: the site policies over simulated back ends; global: dnsd's policies over mirrors, resolvers caching their answers, the mirrors' 302 correction (with -log, its requests at their times and its clients behind -resolvers resolvers)")
	fs.StringVar(&o.report, "report", "", "instead of the table, run the standard experiments of both levels (see make sim) and write simulation.md and its SVG charts into this directory (make sim: docs)")
	fs.Float64Var(&o.reportScale, "report-scale", 1, "-report: the global experiments' simulated times (runs, warm-ups, bins) over the standard's (tests use less)")
}

// check parses raw into o and checks o's flags, the first wrong one
// named.
func (o *options) check(raw rawFlags) error {
	var err error
	o.policies = strings.Split(raw.policies, ",")
	for _, p := range o.policies {
		if !slices.Contains(site.Names(), p) {
			return fmt.Errorf("-policies: unknown policy %q (known: %s)", p, strings.Join(site.Names(), ", "))
		}
	}
	o.csv = raw.format == "csv"
	switch {
	case raw.format != "table" && raw.format != "csv":
		return fmt.Errorf("-format %q: table or csv", raw.format)
	case !(o.memoryRatio > 0), !(o.reportScale > 0 && o.reportScale <= 10), o.outstanding < 1, !(o.warmup >= 0 && o.warmup < 1):
		return errors.New("-memory-ratio, -report-scale (up to 10), -outstanding: more than 0; -warmup: 0 to below 1")
	case o.mode != sitesim.ModeHandoff && o.mode != sitesim.ModeProxy, o.binWidth < 0:
		return errors.New("-mode: handoff or proxy; -site-bin: not negative")
	case o.logFormat != "clf" && o.logFormat != "worldcup":
		return fmt.Errorf("-log-format %q: clf or worldcup", o.logFormat)
	case o.level != "site" && o.level != "global":
		return errors.New("-level: site or global")
	}
	if o.backends, err = ints(raw.backends); err != nil {
		return fmt.Errorf("-backends: %w", err)
	}
	return parseGlobal(&o.global, raw.globalPolicies, raw.ttls)
}

// ints parses a comma-separated list of positive integers.
func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// replay is a workload groupsim runs many times: the stream (made anew
// for each run), how many requests it has and its working set, the sum
// of its objects' largest sizes.
type replay struct {
	stream   func() sitesim.Workload
	requests int
	ws       int64
	log      *workload.Workload // the log read, nil for a synthetic workload
}

// load reads or makes the workload.
func load(o options, stderr io.Writer) (replay, error) {
	if o.log == "" {
		st, err := o.synth.New()
		if err != nil {
			return replay{}, err
		}
		keys := make([]string, len(st.Sizes))
		r := replay{requests: o.synth.Requests}
		for i, sz := range st.Sizes {
			keys[i] = "/o/" + strconv.Itoa(i)
			r.ws += int64(sz)
		}
		r.stream = func() sitesim.Workload { return sitesim.Workload{Requests: st.Requests(), Objects: keys} }
		return r, nil
	}
	return loadLog(o, stderr)
}

// loadLog reads -log and reports what it read.
func loadLog(o options, stderr io.Writer) (replay, error) {
	f, err := os.Open(o.log)
	if err != nil {
		return replay{}, err
	}
	defer f.Close()
	read := workload.ReadLog
	if o.logFormat == "worldcup" {
		read = workload.ReadWorldCup
	}
	w, st, err := read(f)
	if err != nil {
		return replay{}, fmt.Errorf("%s: %w", o.log, err)
	}
	fmt.Fprintf(stderr, "groupsim: %s: %d lines, %d requests, %d broken, %d blank, %d out of time order (sorted)\n",
		o.log, st.Lines, len(w.Requests), st.Broken, st.Blank, st.Unsorted)
	for _, b := range st.FirstBroken {
		fmt.Fprintf(stderr, "groupsim: %s: %s\n", o.log, b)
	}
	if len(w.Requests) == 0 {
		return replay{}, fmt.Errorf("%s: no request could be read", o.log)
	}
	largest := make([]int64, len(w.Objects))
	for _, rq := range w.Requests {
		largest[rq.Object] = max(largest[rq.Object], int64(rq.Size))
	}
	r := replay{requests: len(w.Requests), log: w}
	for _, n := range largest {
		r.ws += n
	}
	addrs := make([]netip.Addr, len(w.Clients)) // the log's client hosts that are addresses, for client-hash
	for i, c := range w.Clients {
		addrs[i], _ = netip.ParseAddr(c)
	}
	r.stream = func() sitesim.Workload {
		return sitesim.Workload{Requests: slices.Values(w.Requests), Objects: w.Objects, Clients: addrs}
	}
	return r, nil
}

// simulate runs every policy on every number of back ends and writes
// the table.
func simulate(o options, w replay, out io.Writer) error {
	t := report.Table{Header: []string{"backends", "policy", "req/s", "hit", "byte_hit", "max/mean", "cv", "cpu", "disk", "fe_cpu"}}
	bins := report.Table{Header: []string{"backends", "policy", "from_s", "requests", "req/s", "hit", "max/mean", "cv"}}
	for _, n := range o.backends {
		for _, p := range o.policies {
			r, err := runOne(o, w, p, n, o.memoryRatio)
			if err != nil {
				return err
			}
			t.Rows = append(t.Rows, []string{strconv.Itoa(n), p, fmt.Sprintf("%.1f", r.Throughput), fmt.Sprintf("%.4f", r.HitRatio),
				fmt.Sprintf("%.4f", r.ByteHitRatio), fmt.Sprintf("%.3f", r.MaxOverMean), fmt.Sprintf("%.4f", r.CV),
				fmt.Sprintf("%.3f", sitesim.Mean(r.CPU)), fmt.Sprintf("%.3f", sitesim.Mean(r.Disk)), fmt.Sprintf("%.3f", r.FrontendCPU)})
			for _, b := range r.Bins {
				bins.Rows = append(bins.Rows, []string{strconv.Itoa(n), p, strconv.FormatFloat(b.Start.Seconds(), 'f', -1, 64),
					strconv.Itoa(b.Requests), fmt.Sprintf("%.1f", b.Throughput), fmt.Sprintf("%.4f", b.HitRatio),
					fmt.Sprintf("%.3f", b.MaxOverMean), fmt.Sprintf("%.4f", b.CV)})
			}
		}
	}
	return write(o, out, t, bins)
}

// write writes the tables, as text or CSV, a blank line between them;
// tables without rows are left out, but for the first.
func write(o options, out io.Writer, tables ...report.Table) error {
	var b strings.Builder
	for i, t := range tables {
		if i > 0 && len(t.Rows) == 0 {
			continue
		}
		if i > 0 {
			b.WriteString("\n")
		}
		if o.csv {
			b.WriteString(t.CSV())
		} else {
			b.WriteString(t.Text())
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// runOne runs policy on n back ends, each caching the working set over
// memoryRatio, in o's mode.
func runOne(o options, w replay, policy string, n int, memoryRatio float64) (sitesim.Result, error) {
	c := sitesim.Config{Policy: policy, Seed: o.synth.Seed, Backends: n, Outstanding: o.outstanding, Mode: o.mode, Bin: o.binWidth,
		Warmup:  int(o.warmup * float64(w.requests)),
		Backend: backend.Config{Memory: int64(float64(w.ws) / memoryRatio), MaxObject: o.maxObject}}
	r, err := sitesim.Run(c, w.stream())
	if err != nil {
		return r, fmt.Errorf("%s on %d back ends: %w", policy, n, err)
	}
	return r, nil
}
