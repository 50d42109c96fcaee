package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/scheduler/sim/report"
	"github.com/transmirror/transmirror/zones"
)

// The global experiments of -report: e2e TestSkew's group (four mirrors
// of 1000 load units, 280 requests per second, 20 resolvers), swept.
var (
	reportTTLs  = []float64{1, 10, 30, 60, 120, 300}
	reportHeavy = []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5}
)

// globalBase is the report's group: -level global's defaults, its
// times scaled by -report-scale.
func globalBase(o options) globalOptions {
	return globalOptions{policies: globalPolicies, mirrors: 4, capacity: 1000, rate: 280, resolverCt: 20, heavy: 0.5,
		ttl: zones.TTLBounds{Min: 20, Max: 60}, nodes: 1, correct: true, duration: o.scaled(3 * time.Minute), warm: o.scaled(30 * time.Second),
		bin: o.scaled(10 * time.Second), regions: 1, push: group.DefaultPushInterval, view: group.DefaultViewInterval}
}

// scaled is d times -report-scale, in whole seconds.
func (o options) scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * o.reportScale).Round(time.Second)
}

// variant is one setting of an experiment: its name and what it changes.
type variant struct {
	name string
	set  func(*globalOptions)
}

var onOff = []variant{
	{"correction off", func(g *globalOptions) { g.correct = false }},
	{"correction on", func(g *globalOptions) { g.correct = true }},
}

// globalReport is the global section of simulation.md, its charts and
// the rows of the claims table it checks.
func globalReport(o options) (md string, charts map[string][]byte, claims string, err error) {
	var b strings.Builder
	b.WriteString("\n## The global level\n\nIn virtual time: resolvers cache dnsd's answers for their TTL and send all their clients to the mirror they got; " +
		"dnsd is its own dispatcher (`dnsd/dispatch`: policy, pending load, scope calibration, adaptive TTL) and view (`dnsd/members`), " +
		"the mirrors their own correction chain (`probe.Reporter` → `group.Redirector`), with load reports and views every 2 s. " +
		"The group is e2e TestSkew's: four mirrors of 1000 load units (100 requests per second each), 280 requests per second (70%), " +
		"20 resolvers, one of them with half of the clients, one member per answer, a TTL of 20 to 60 s. " +
		"*busiest* is the most loaded mirror's requests over its fair share over the counted time (the first 30 s are not counted), " +
		"*worst bin* the same in the worst 10 s bin.\n\n")
	policies, err := policyTable(o)
	if err != nil {
		return "", nil, "", err
	}
	b.WriteString(policies)
	charts = map[string][]byte{}
	for _, sw := range []sweep{ttlSweep(o), skewSweep()} {
		text, svg, err := sw.run(o)
		if err != nil {
			return "", nil, "", err
		}
		b.WriteString(text)
		charts[sw.file] = svg
	}
	more, err := nodesAndECS(o)
	if err != nil {
		return "", nil, "", err
	}
	b.WriteString(more)
	if more, err = partialTree(o); err != nil {
		return "", nil, "", err
	}
	b.WriteString(more)
	if claims, err = globalClaims(o); err != nil {
		return "", nil, "", err
	}
	return b.String(), charts, claims, nil
}

// globalClaims checks the literature's claims on the global level: rows
// of the claims table.
func globalClaims(o options) (string, error) {
	var got []string
	worst := 0.0
	for _, n := range []int{2, 3, 4} {
		g := globalBase(o)
		g.mirrors, g.heavy, g.rate = n, 1/float64(g.resolverCt), 70*float64(n)
		r, err := runGlobal(o, g, "geo-load", nil)
		if err != nil {
			return "", err
		}
		got = append(got, fmt.Sprintf("%.1f%% on %d", 100*(r.Busiest-1), n))
		worst = max(worst, r.Busiest-1)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| the server-group dispatcher within 7–9%% of optimal for 2–4 servers without caching skew (CMU's server groups) | "+
		"the busiest mirror %s above an even spread (geo-load with the correction, 20 even resolvers, 70%% load); "+
		"the paper measured the maximum utilization, this its share of the requests | %s |\n",
		strings.Join(got, ", "), yesNo(worst <= 0.09, "yes: within it", "no: further from even than the paper's dispatcher"))
	var rr []string
	most := 0.0
	for _, v := range []variant{
		{"1,000 Zipf resolvers", func(g *globalOptions) { g.heavy, g.resolverCt = 0, 1000 }},
		{"one resolver with half of the clients", func(g *globalOptions) {}},
	} {
		g := globalBase(o)
		g.correct, g.ttl = false, zones.TTLBounds{Min: 60, Max: 60}
		v.set(&g)
		r, err := runGlobal(o, g, "weighted", nil)
		if err != nil {
			return "", err
		}
		rr = append(rr, fmt.Sprintf("%.0f%% of the requests with %s", 100*r.WorstBin/float64(g.mirrors), v.name))
		most = max(most, r.WorstBin/float64(g.mirrors))
	}
	fmt.Fprintf(&b, "| round-robin DNS leaving one of four NCSA servers with 50%% of the load (NCSA's scalable web server) | "+
		"weighted (blind to load), a fixed TTL of 60 s, no correction: in its worst 10 s bin the busiest of four served %s | %s |\n",
		strings.Join(rr, ", "), yesNo(most >= 0.45, "yes: caching skew alone does it", "no: the skew is smaller here"))
	return b.String(), nil
}

// policyTable runs every global policy with the correction off and on,
// with the adaptive and with a fixed TTL.
func policyTable(o options) (string, error) {
	t := report.Table{Header: []string{"policy", "TTL", "busiest, off", "worst bin, off", "busiest, on", "worst bin, on", "redirected, on"}}
	for _, p := range globalPolicies {
		for _, ttl := range []zones.TTLBounds{{Min: 20, Max: 60}, {Min: 60, Max: 60}} {
			row := []string{p, fmt.Sprintf("%d–%d s", ttl.Min, ttl.Max)}
			if ttl.Min == ttl.Max {
				row[1] = fmt.Sprintf("%d s", ttl.Min)
			}
			for _, v := range onOff {
				g := globalBase(o)
				g.ttl = ttl
				v.set(&g)
				r, err := runGlobal(o, g, p, nil)
				if err != nil {
					return "", err
				}
				row = append(row, fmt.Sprintf("%.2f", r.Busiest), fmt.Sprintf("%.2f", r.WorstBin))
				if g.correct {
					row = append(row, fmt.Sprintf("%.0f%%", 100*share(r.Redirected, r.Requests)))
				}
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return "### Every global policy, with and without the TTL controls and the 302 correction\n\n" + t.Markdown(), nil
}

// sweep is one chart: the worst bin of geo-load and weighted, correction
// off and on, over xs.
type sweep struct {
	title, xlabel, file, heading string
	xs                           []float64
	set                          func(*globalOptions, float64)
}

func ttlSweep(o options) sweep {
	return sweep{title: "Busiest mirror against a fixed TTL (half of the clients behind one resolver)", xlabel: "TTL, seconds",
		file: "sim-global-ttl.svg", heading: "Busiest mirror against the TTL", xs: reportTTLs,
		set: func(g *globalOptions, x float64) {
			g.ttl = zones.TTLBounds{Min: uint32(x), Max: uint32(x)}
			g.duration, g.warm, g.bin = o.scaled(20*time.Minute), o.scaled(5*time.Minute), o.scaled(time.Minute)
		}}
}

func skewSweep() sweep {
	return sweep{title: "Busiest mirror against the heavy resolver's share of the clients", xlabel: "share of the clients behind one resolver",
		file: "sim-global-skew.svg", heading: "Busiest mirror against resolver skew", xs: reportHeavy,
		set: func(g *globalOptions, x float64) { g.heavy = x }}
}

// run makes the sweep's chart and table.
func (sw sweep) run(o options) (string, []byte, error) {
	c := report.LineChart{Title: sw.title, XLabel: sw.xlabel, YLabel: "busiest mirror / fair share, worst bin", X: sw.xs}
	t := report.Table{Header: []string{"policy", "correction"}}
	for _, x := range sw.xs {
		t.Header = append(t.Header, strconv.FormatFloat(x, 'g', -1, 64))
	}
	for _, p := range []string{"geo-load", "weighted"} {
		for _, v := range onOff {
			s, row := report.Series{Name: p + ", " + strings.TrimPrefix(v.name, "correction ")}, []string{p, strings.TrimPrefix(v.name, "correction ")}
			for _, x := range sw.xs {
				g := globalBase(o)
				v.set(&g)
				sw.set(&g, x)
				r, err := runGlobal(o, g, p, nil)
				if err != nil {
					return "", nil, err
				}
				s.Y = append(s.Y, r.WorstBin)
				row = append(row, fmt.Sprintf("%.2f", r.WorstBin))
			}
			c.Series = append(c.Series, s)
			t.Rows = append(t.Rows, row)
		}
	}
	return fmt.Sprintf("\n### %s\n\n![](%s)\n\n%s", sw.heading, sw.file, t.Markdown()), c.SVG(), nil
}

// nodesAndECS compares one and three dnsd nodes, and ECS off and on on a
// world of four regions.
func nodesAndECS(o options) (string, error) {
	t := report.Table{Header: []string{"setting", "busiest, off", "worst bin, off", "busiest, on", "worst bin, on", "km, on", "DNS queries"}}
	settings := []variant{
		{"1 dnsd node", func(g *globalOptions) {}},
		{"3 dnsd nodes (an NS set)", func(g *globalOptions) { g.nodes = 3 }},
		{"4 regions, 8 mirrors, 1000 Zipf resolvers, 3 public; no ECS", func(g *globalOptions) { world(g, false) }},
		{"the same with ECS", func(g *globalOptions) { world(g, true) }},
	}
	for _, st := range settings {
		row := []string{st.name}
		var queries int
		for _, v := range onOff {
			g := globalBase(o)
			st.set(&g)
			v.set(&g)
			r, err := runGlobal(o, g, "geo-load", nil)
			if err != nil {
				return "", err
			}
			row = append(row, fmt.Sprintf("%.2f", r.Busiest), fmt.Sprintf("%.2f", r.WorstBin))
			if g.correct {
				row, queries = append(row, fmt.Sprintf("%.0f", r.MeanKm)), r.Queries
			}
		}
		t.Rows = append(t.Rows, append(row, strconv.Itoa(queries)))
	}
	return "\n### An NS set, and ECS\n\ngeo-load; km is the mean distance from a client to the mirror that served it.\n\n" + t.Markdown(), nil
}

// partialTree is the group with one mirror lacking 30% of the files,
// with and without content indexes and the correction.
func partialTree(o options) (string, error) {
	t := report.Table{Header: []string{"content indexes", "correction", "404s", "redirected", "busiest", "worst bin"}}
	for _, index := range []bool{false, true} {
		for _, v := range onOff {
			g := globalBase(o)
			g.heavy, g.missing, g.index = 1/float64(g.resolverCt), 0.3, index
			v.set(&g)
			r, err := runGlobal(o, g, "geo-load", nil)
			if err != nil {
				return "", err
			}
			t.Rows = append(t.Rows, []string{yesNo(index, "on", "off"), strings.TrimPrefix(v.name, "correction "),
				fmt.Sprintf("%.1f%%", 100*share(r.NotFound, r.Requests)), fmt.Sprintf("%.0f%%", 100*share(r.Redirected, r.Requests)),
				fmt.Sprintf("%.2f", r.Busiest), fmt.Sprintf("%.2f", r.WorstBin)})
		}
	}
	return "\n### A mirror with a partial tree\n\nm1 lacks 30% of the files; 20 even resolvers, geo-load. dnsd answers names, not paths: " +
		"without content indexes a client it sends to m1 for a missing file gets a 404; with them (`content.index`) and the correction, m1 rescues it " +
		"to a sibling that holds the file. With the correction off nothing is redirected, a rescue neither. " +
		"With both, the correction redirects far more than the rescues alone: the siblings serve m1's rescued requests on their own names, " +
		"which the fair-share law can offset only by sending their own requests on the group name elsewhere, many of them to m1.\n\n" + t.Markdown(), nil
}

// world makes g four regions with two mirrors each and a Zipf resolver
// population, its three largest resolvers public.
func world(g *globalOptions, ecs bool) {
	g.regions, g.mirrors, g.resolverCt, g.heavy, g.publicDNS, g.ecs = 4, 8, 1000, 0, 3, ecs
	g.rate = 560
}
