package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/scheduler/sim/globalsim"
	"github.com/transmirror/transmirror/scheduler/sim/report"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
	"github.com/transmirror/transmirror/zones"
)

// globalPolicies are dnsd's global policies, in the order the report
// lists them.
var globalPolicies = []string{"geo-load", "least-load", "weighted", "nearest", "hash"}

// globalOptions are the flags of -level global.
type globalOptions struct {
	policies   []string
	mirrors    int
	capacity   float64
	heavy      float64
	ttl        zones.TTLBounds
	minTTL     time.Duration
	ecs        bool
	nodes      int
	correct    bool
	duration   time.Duration
	warm       time.Duration
	bin        time.Duration
	regions    int
	publicDNS  int
	rate       float64
	resolverCt int
	bandwidth  float64
	missing    float64
	index      bool
	push, view time.Duration
}

// globalFlags declares the flags of -level global on fs.
func globalFlags(fs *flag.FlagSet, g *globalOptions, policies, ttls *string) {
	fs.StringVar(policies, "global-policies", strings.Join(globalPolicies, ","), "global: dnsd's policies to compare, comma-separated")
	fs.IntVar(&g.mirrors, "mirrors", 4, "global: mirrors in the group, of equal capacity, spread over the regions in turn")
	fs.Float64Var(&g.capacity, "capacity", 1000, "global: each mirror's capacity in load units (10 a request per second)")
	fs.Float64Var(&g.rate, "rate", 280, "global: requests per second offered to the group (280 is 70% of four mirrors of 1000)")
	fs.IntVar(&g.resolverCt, "resolvers", 20, "global: resolvers the clients are behind")
	fs.Float64Var(&g.heavy, "heavy", 0.5, "global: share of the clients behind resolver 0, the others shared evenly by the rest (0: resolvers of Zipf-skewed size)")
	fs.StringVar(ttls, "ttl", "20,60", "global: the group's TTL bounds in seconds, min,max (equal: a fixed TTL)")
	fs.DurationVar(&g.minTTL, "min-ttl", 0, "global: the resolvers' minimum TTL: an answer is kept at least this long")
	fs.BoolVar(&g.ecs, "ecs", false, "global: the resolvers send each client's /24 as EDNS Client Subnet and cache by the answer's scope")
	fs.IntVar(&g.nodes, "nodes", 1, "global: dnsd nodes of the NS set (resolvers split over them)")
	fs.BoolVar(&g.correct, "correct", true, "global: the mirrors' 302 correction")
	fs.DurationVar(&g.duration, "duration", 3*time.Minute, "global: simulated time of the synthetic workload (its requests: -rate times this)")
	fs.DurationVar(&g.warm, "warmup-time", 30*time.Second, "global: leading time not counted (the caches and estimates settle)")
	fs.DurationVar(&g.bin, "bin", 10*time.Second, "global: width of the time bins of the busiest mirror's figures")
	fs.IntVar(&g.regions, "regions", 1, "global: regions around the globe that clients, resolvers and mirrors are in")
	fs.IntVar(&g.publicDNS, "public-resolvers", 0, "global: the largest resolvers that are public, with clients in every region")
	fs.DurationVar(&g.push, "push-interval", group.DefaultPushInterval, "global: how often the mirrors report their load to dnsd")
	fs.DurationVar(&g.view, "view-interval", group.DefaultViewInterval, "global: how often the mirrors fetch the group view")
	fs.Float64Var(&g.bandwidth, "bandwidth", 0, "global: each mirror's bandwidth in bytes per second, which dnsd and the correction weigh with the load (0: none)")
	fs.Float64Var(&g.missing, "missing", 0, "global: the share of the files the first mirror lacks (a partial tree)")
	fs.BoolVar(&g.index, "content-index", false, "global: the mirrors keep content indexes and rescue a request for a file they lack to a sibling that holds it (else a 404)")
}

// parseGlobal checks the flags of -level global.
func parseGlobal(g *globalOptions, policies, ttls string) error {
	g.policies = strings.Split(policies, ",")
	for _, p := range g.policies {
		if !slices.Contains(globalPolicies, p) {
			return fmt.Errorf("-global-policies: unknown policy %q (known: %s)", p, strings.Join(globalPolicies, ", "))
		}
	}
	lo, hi, ok := strings.Cut(ttls, ",")
	a, err1 := strconv.ParseUint(lo, 10, 32)
	b, err2 := strconv.ParseUint(hi, 10, 32)
	if !ok || err1 != nil || err2 != nil || a < 1 || b < a {
		return fmt.Errorf("-ttl %q: want min,max in seconds, 1 ≤ min ≤ max", ttls)
	}
	g.ttl = zones.TTLBounds{Min: uint32(a), Max: uint32(b)}
	switch {
	case g.mirrors < 1 || g.mirrors > 250, !(g.capacity > 0), !(g.rate > 0), g.resolverCt < 1, !(g.heavy >= 0 && g.heavy < 1),
		g.nodes < 1 || g.nodes > 16, g.duration <= g.warm, g.bin <= 0, g.regions < 1 || g.regions > 64,
		g.bandwidth < 0, !(g.missing >= 0 && g.missing < 1), g.push < 100*time.Millisecond, g.view < 100*time.Millisecond:
		return fmt.Errorf("a -level global flag is out of its range (see groupsim -h)")
	}
	return nil
}

// worldCities are the regions, in the order -regions takes them.
var worldCities = []globalsim.Region{
	{Name: "Frankfurt", Lat: 50.11, Lon: 8.68}, {Name: "New York", Lat: 40.71, Lon: -74.01},
	{Name: "Singapore", Lat: 1.35, Lon: 103.82}, {Name: "São Paulo", Lat: -23.55, Lon: -46.63},
	{Name: "San Francisco", Lat: 37.77, Lon: -122.42}, {Name: "Tokyo", Lat: 35.68, Lon: 139.69},
	{Name: "Sydney", Lat: -33.87, Lon: 151.21}, {Name: "Johannesburg", Lat: -26.2, Lon: 28.05},
}

// globalConfig is the group g describes, with dnsd's policy.
func globalConfig(g globalOptions, policy string, seed uint64) globalsim.Config {
	c := globalsim.Config{Policy: policy, TTL: g.ttl, Nodes: g.nodes, ECS: g.ecs, MinTTL: g.minTTL, Correct: g.correct,
		ContentIndex: g.index, PushInterval: g.push, ViewInterval: g.view, Warmup: g.warm, Bin: g.bin, Seed: seed}
	for k := range g.regions {
		r := worldCities[k%len(worldCities)]
		if k >= len(worldCities) {
			r.Name, r.Lat = fmt.Sprintf("%s %d", r.Name, k/len(worldCities)+1), r.Lat+float64(k/len(worldCities))
		}
		c.Regions = append(c.Regions, r)
	}
	for i := range g.mirrors {
		c.Mirrors = append(c.Mirrors, globalsim.Mirror{Name: fmt.Sprintf("m%d", i+1), Region: i % g.regions, Capacity: g.capacity,
			Bandwidth: g.bandwidth})
	}
	c.Mirrors[0].Missing = g.missing
	return c
}

// globalWorkload is the requests of log, or without one the synthetic
// requests of o and g, and their world: the clients behind g's
// resolvers, one of them with the share heavy of them or the resolvers
// of Zipf-skewed size.
func globalWorkload(o options, g globalOptions, log *workload.Workload) (globalsim.Workload, error) {
	s := o.synth
	s.Rate, s.Requests, s.Resolvers, s.Regions = g.rate, int(g.rate*g.duration.Seconds()), g.resolverCt, g.regions
	if log != nil {
		s.Clients, s.Requests, s.Objects = len(log.Clients), 1, 1 // the population only
	}
	st, err := s.New()
	if err != nil {
		return globalsim.Workload{}, err
	}
	w := globalsim.WorldOf(st.Population, g.regions, g.publicDNS)
	if g.heavy > 0 {
		w = globalsim.SkewedWorld(s.Clients, g.resolverCt, g.heavy)
		w.ResolverRegion = st.Population.ResolverRegion
	}
	if log != nil {
		return globalsim.Workload{Requests: slices.Values(log.Requests), World: w}, nil
	}
	return globalsim.Workload{Requests: st.Requests(), World: w}, nil
}

// runGlobal runs policy on the group of g over log (nil: a synthetic
// workload).
func runGlobal(o options, g globalOptions, policy string, log *workload.Workload) (globalsim.Result, error) {
	w, err := globalWorkload(o, g, log)
	if err != nil {
		return globalsim.Result{}, err
	}
	r, err := globalsim.Run(globalConfig(g, policy, o.synth.Seed), w)
	if err != nil {
		return r, fmt.Errorf("%s: %w", policy, err)
	}
	return r, nil
}

// globalHeader and globalRow are the table of -level global.
var globalHeader = []string{"policy", "requests", "busiest", "busiest_dns", "bin_mean", "bin_worst", "redirected", "not_found", "queries", "km"}

func globalRow(p string, r globalsim.Result) []string {
	return []string{p, strconv.Itoa(r.Requests), fmt.Sprintf("%.3f", r.Busiest), fmt.Sprintf("%.3f", r.ArrivedBusiest),
		fmt.Sprintf("%.3f", r.MeanBin), fmt.Sprintf("%.3f", r.WorstBin), fmt.Sprintf("%.4f", share(r.Redirected, r.Requests)),
		fmt.Sprintf("%.4f", share(r.NotFound, r.Requests)), strconv.Itoa(r.Queries), fmt.Sprintf("%.0f", r.MeanKm)}
}

// binRows are r's bins: each mirror's share of the requests in each.
func binRows(p string, r globalsim.Result) [][]string {
	var rows [][]string
	for _, b := range r.Bins {
		total := 0
		for _, n := range b.Served {
			total += n
		}
		row := []string{p, strconv.FormatFloat(b.Start.Seconds(), 'f', -1, 64), fmt.Sprintf("%.3f", b.Busiest)}
		for _, n := range b.Served {
			row = append(row, fmt.Sprintf("%.3f", share(n, total)))
		}
		rows = append(rows, row)
	}
	return rows
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// simulateGlobal runs every policy of g and writes the table, then the
// bins': each mirror's share of the requests served in each.
func simulateGlobal(o options, g globalOptions, log *workload.Workload, out io.Writer) error {
	t, bins := report.Table{Header: globalHeader}, report.Table{Header: []string{"policy", "from_s", "busiest"}}
	for i := range g.mirrors {
		bins.Header = append(bins.Header, fmt.Sprintf("m%d", i+1))
	}
	for _, p := range g.policies {
		r, err := runGlobal(o, g, p, log)
		if err != nil {
			return err
		}
		t.Rows = append(t.Rows, globalRow(p, r))
		bins.Rows = append(bins.Rows, binRows(p, r)...)
	}
	return write(o, out, t, bins)
}
