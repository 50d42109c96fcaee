package dispatch

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/scheduler"
)

// lagFlip is a member whose lagging changed, and its new verdict.
type lagFlip struct {
	member int
	f      scheduler.Freshness
}

// judge applies the group's freshness rule at now to its members' states
// (their generations, drains and health), before the families are built
// from them: a member the rule finds lagging is not answered. It returns
// the members whose lagging changed from what their states held.
func (g *dgroup) judge(now time.Time) []lagFlip {
	content := make([]scheduler.Content, len(g.states))
	for i, st := range g.states {
		content[i] = scheduler.Content{Generation: st.Generation, Answerable: st.answerable()}
	}
	verdicts, failOpen := g.fresh.Judge(now, content, nil)
	var flips []lagFlip
	for i := range g.states {
		if verdicts[i].Lagging != g.states[i].Freshness.Lagging {
			flips = append(flips, lagFlip{member: i, f: verdicts[i]})
		}
		g.states[i].Freshness = verdicts[i]
	}
	g.lagOpen = failOpen
	return flips
}

// noteLagging logs, counts and reports (Options.OnLagging) each member of
// g whose lagging changed.
func (d *Dispatcher) noteLagging(g *dgroup, flips []lagFlip) {
	for _, fl := range flips {
		name := g.cfg.Members[fl.member].Name
		to := "caught_up"
		if fl.f.Lagging {
			to = StateLagging
			d.log.Warn("member lagging: out of the answers", "group", g.cfg.Name, "member", name, "lag", fl.f.Lag, "max_lag", g.fresh.MaxLag)
		} else {
			d.log.Info("member caught up: back in the answers", "group", g.cfg.Name, "member", name, "lag", fl.f.Lag, "max_lag", g.fresh.MaxLag)
		}
		d.lagChanges.WithLabelValues(g.cfg.Name, to).Inc()
		if d.onLagging != nil {
			d.onLagging(g.cfg.Name, name, fl.f.Lagging, fl.f.Lag)
		}
	}
}

// noteLagFailOpen counts the answers given while every answerable member
// of g lags (from the freshest of them) and logs each episode once.
func (d *Dispatcher) noteLagFailOpen(g *dgroup) {
	if g.lagOpen {
		d.lagFailOpen.WithLabelValues(g.cfg.Name).Inc()
	}
	if g.lagEpisode.CompareAndSwap(!g.lagOpen, g.lagOpen) {
		if g.lagOpen {
			d.log.Warn("every member lags more than max_lag: answering with the freshest", "group", g.cfg.Name, "max_lag", g.fresh.MaxLag)
		} else {
			d.log.Info("members within max_lag again: lag fail-open over", "group", g.cfg.Name)
		}
	}
}

// LaggingFailOpen reports whether group answers with lagging members
// because every member that could be answered lags.
func (d *Dispatcher) LaggingFailOpen(group string) bool {
	g := d.groups()[dns.CanonicalName(group)]
	return g != nil && g.lagOpen
}

// freshnessCollector exports every member's lag and whether it lags, read
// at each scrape from the groups in service (members are capped per group,
// and a member or group that goes away takes its series with it).
type freshnessCollector struct {
	d            *Dispatcher
	lag, lagging *prometheus.Desc
}

func newFreshnessCollector(d *Dispatcher) *freshnessCollector {
	return &freshnessCollector{
		d: d,
		lag: prometheus.NewDesc("transmirror_dnsd_member_lag_seconds",
			"How far the member's generation (its last complete sync) is behind the group's newest; only members that report one.", []string{"group", "member"}, nil),
		lagging: prometheus.NewDesc("transmirror_dnsd_member_lagging",
			"1 when the member lags the group's newest generation by more than max_lag and is out of the answers, else 0.", []string{"group", "member"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *freshnessCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.lagging
}

// Collect implements prometheus.Collector.
func (c *freshnessCollector) Collect(ch chan<- prometheus.Metric) {
	for name, g := range c.d.groups() {
		for i, m := range g.cfg.Members {
			f := g.states[i].Freshness
			if f.Known {
				ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, f.Lag.Seconds(), name, m.Name)
			}
			v := 0.0
			if f.Lagging {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.lagging, prometheus.GaugeValue, v, name, m.Name)
		}
	}
}

var _ prometheus.Collector = (*freshnessCollector)(nil)

// SetMaster makes gen the generation of group's master, the newest under
// its freshness rule (zero: the freshest member's), and judges the
// members again. An unknown group is an error and changes nothing.
func (d *Dispatcher) SetMaster(group string, gen time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.snap.Load()
	g := cur.groups[dns.CanonicalName(group)]
	if g == nil {
		return fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
	}
	if g.fresh.Master.Equal(gen) {
		return nil
	}
	ng := *g
	ng.states = slices.Clone(g.states)
	ng.fresh.Master = gen
	d.noteLagging(&ng, ng.build(g, d.now()))
	next := maps.Clone(cur.groups)
	next[g.cfg.Name] = &ng
	d.snap.Store(&dsnap{loc: cur.loc, groups: next})
	return nil
}
