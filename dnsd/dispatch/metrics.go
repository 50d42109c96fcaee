package dispatch

import (
	"github.com/prometheus/client_golang/prometheus"
)

// scopeCollector exports what the groups' scope rates know, read at each
// scrape from the groups in service (a group that goes away takes its
// series with it).
type scopeCollector struct {
	d                        *Dispatcher
	estimates, errRatio, rps *prometheus.Desc
}

func newScopeCollector(d *Dispatcher) *scopeCollector {
	return &scopeCollector{
		d: d,
		estimates: prometheus.NewDesc("transmirror_dnsd_scope_rate_estimates",
			"Client scopes (resolvers, ECS subnets) whose request rate the group remembers.", []string{"group"}, nil),
		errRatio: prometheus.NewDesc("transmirror_dnsd_scope_calibration_error_ratio",
			"Recent relative error |G - predicted| / max(G, predicted) between the members' reported group requests and the scopes' estimates, averaged over about ten reports.", []string{"group"}, nil),
		rps: prometheus.NewDesc("transmirror_dnsd_group_estimated_requests_per_second",
			"The group's request rate as the adaptive TTL sees it: the members' reported group requests, or their requests from older mirrors.", []string{"group"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *scopeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.estimates
	ch <- c.errRatio
	ch <- c.rps
}

// Collect implements prometheus.Collector.
func (c *scopeCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.d.now()
	for name, g := range c.d.groups() {
		ch <- prometheus.MustNewConstMetric(c.estimates, prometheus.GaugeValue, float64(g.rates.Len()), name)
		ch <- prometheus.MustNewConstMetric(c.rps, prometheus.GaugeValue, g.rates.Total(now), name)
		if r, ok := g.rates.CalibrationError(); ok {
			ch <- prometheus.MustNewConstMetric(c.errRatio, prometheus.GaugeValue, r, name)
		}
	}
}

var _ prometheus.Collector = (*scopeCollector)(nil)
