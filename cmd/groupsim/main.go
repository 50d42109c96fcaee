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
// the same output, byte for byte.
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
	synth       workload.Synthetic
	policies    []string
	backends    []int
	memoryRatio float64
	maxObject   int64
	outstanding int
	warmup      float64
	csv         bool
	report      string // -report: the directory of simulation.md
}

// run is groupsim with its arguments; it returns the exit status: 0
// done, 1 failed, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	o, code := parse(args, stderr)
	if code >= 0 {
		return code
	}
	w, err := load(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "groupsim:", err)
		return 1
	}
	if o.report != "" {
		err = writeReport(o, w, o.report)
	} else {
		err = simulate(o, w, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "groupsim:", err)
		return 1
	}
	return 0
}

// parse reads the flags; code is the exit status when groupsim must
// stop (-1: go on).
func parse(args []string, stderr io.Writer) (o options, code int) {
	fs := flag.NewFlagSet("groupsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.log, "log", "", "replay this access log (Common or Combined Log Format, plain or gzip); without it a synthetic workload")
	fs.Uint64Var(&o.synth.Seed, "seed", 1, "synthetic: the seed of the workload (the same seed, the same requests)")
	fs.IntVar(&o.synth.Requests, "requests", 200_000, "synthetic: number of requests")
	fs.IntVar(&o.synth.Objects, "objects", 20_000, "synthetic: number of distinct objects")
	fs.Float64Var(&o.synth.Alpha, "alpha", 0.8, "synthetic: Zipf exponent of the objects' popularity")
	fs.Float64Var(&o.synth.MaxSize, "max-size", 1<<20, "synthetic: largest object, in bytes (the Pareto tail is cut there)")
	fs.IntVar(&o.synth.Clients, "clients", 10_000, "synthetic: number of clients")
	policies := fs.String("policies", strings.Join(site.Names(), ","), "site policies to compare, comma-separated")
	backends := fs.String("backends", "1,2,4,8,16", "numbers of back ends to simulate, comma-separated")
	fs.Float64Var(&o.memoryRatio, "memory-ratio", 4, "the working set over one back end's memory cache")
	fs.Int64Var(&o.maxObject, "max-object", 1<<20, "largest object a back end's cache keeps, in bytes")
	fs.IntVar(&o.outstanding, "outstanding", 64, "requests the clients keep in flight (a closed loop: throughput is an outcome)")
	fs.Float64Var(&o.warmup, "warmup", 0.2, "share of the leading requests not counted (the caches fill)")
	format := fs.String("format", "table", "output: table or csv")
	fs.StringVar(&o.report, "report", "", "instead of the table, run the standard site experiments (every policy on 1–16 back ends, working set 2–16× one back end's memory) and write simulation.md and its SVG charts into this directory (make sim: docs)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: groupsim [flags]\n\nReplays a workload through simulated sites (the LARD paper's costs), each policy on each number of back ends.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, 0
		}
		return o, 2
	}
	var err error
	o.policies = strings.Split(*policies, ",")
	if o.backends, err = ints(*backends); err != nil || fs.NArg() > 0 || (*format != "table" && *format != "csv") ||
		!(o.memoryRatio > 0) || o.outstanding < 1 || !(o.warmup >= 0 && o.warmup < 1) {
		fmt.Fprintln(stderr, "groupsim: bad flags (see groupsim -h)")
		return o, 2
	}
	for _, p := range o.policies {
		if !slices.Contains(site.Names(), p) {
			fmt.Fprintf(stderr, "groupsim: -policies: unknown policy %q (known: %s)\n", p, strings.Join(site.Names(), ", "))
			return o, 2
		}
	}
	o.csv = *format == "csv"
	return o, -1
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
	f, err := os.Open(o.log)
	if err != nil {
		return replay{}, err
	}
	defer f.Close()
	w, st, err := workload.ReadLog(f)
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
	r := replay{requests: len(w.Requests)}
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
	t := report.Table{Header: []string{"backends", "policy", "req/s", "hit", "byte_hit", "max/mean", "cv", "cpu", "disk"}}
	for _, n := range o.backends {
		for _, p := range o.policies {
			r, err := runOne(o, w, p, n, o.memoryRatio)
			if err != nil {
				return err
			}
			t.Rows = append(t.Rows, []string{strconv.Itoa(n), p, fmt.Sprintf("%.1f", r.Throughput), fmt.Sprintf("%.4f", r.HitRatio),
				fmt.Sprintf("%.4f", r.ByteHitRatio), fmt.Sprintf("%.3f", r.MaxOverMean), fmt.Sprintf("%.4f", r.CV),
				fmt.Sprintf("%.3f", sitesim.Mean(r.CPU)), fmt.Sprintf("%.3f", sitesim.Mean(r.Disk))})
		}
	}
	text := t.Text()
	if o.csv {
		text = t.CSV()
	}
	_, err := io.WriteString(out, text)
	return err
}

// runOne runs policy on n back ends, each caching the working set over
// memoryRatio.
func runOne(o options, w replay, policy string, n int, memoryRatio float64) (sitesim.Result, error) {
	c := sitesim.Config{Policy: policy, Seed: o.synth.Seed, Backends: n, Outstanding: o.outstanding,
		Warmup:  int(o.warmup * float64(w.requests)),
		Backend: backend.Config{Memory: int64(float64(w.ws) / memoryRatio), MaxObject: o.maxObject}}
	r, err := sitesim.Run(c, w.stream())
	if err != nil {
		return r, fmt.Errorf("%s on %d back ends: %w", policy, n, err)
	}
	return r, nil
}
