package probe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// reporterCollector exports a Reporter's figures as gauges, taken when
// scraped.
type reporterCollector struct {
	r     *Reporter
	util  func(Report) float64 // nil: no utilization gauge
	descs []*prometheus.Desc   // in the order of reportGauges, then the utilization
}

// reportGauges are the figures of a report that a Collector exports, by
// name under transmirror_<subsystem>_.
var reportGauges = []struct {
	name, help string
	value      func(Report) float64
}{
	{"load_requests_per_second", "Requests per second over the load report's window (r).", func(r Report) float64 { return r.R }},
	{"load_run_queue", "The host's run queue, the 1-minute load average (m).", func(r Report) float64 { return r.M }},
	{"load_connections", "Requests in flight.", func(r Report) float64 { return float64(r.Conns) }},
	{"load_bytes_per_second", "Response bytes per second over the report's window.", func(r Report) float64 { return r.BytesPerSecond }},
	{"load_redirects_per_second", "302 redirects per second over the report's window.", func(r Report) float64 { return r.RedirectsPerSecond }},
	{"load_units", "The load figure of the report, 10·(r + m).", func(r Report) float64 { return r.Load }},
	{"load_capacity_units", "The configured capacity, in load units.", func(r Report) float64 { return r.Capacity }},
	{"load_bandwidth_bytes_per_second", "The configured bandwidth, in bytes per second (0: no limit).", func(r Report) float64 { return r.Bandwidth }},
}

// Collector returns a Prometheus collector of the Reporter's load report,
// taken at scrape time: transmirror_<subsystem>_load_requests_per_second,
// _load_run_queue, _load_connections, _load_bytes_per_second,
// _load_redirects_per_second, _load_units (10·(r + m)),
// _load_capacity_units, _load_bandwidth_bytes_per_second and, when
// utilization is not nil, _load_utilization_ratio, the utilization of
// the report as utilization computes it (the mirror passes the
// scheduler's definition, which this package does not import). Each
// scrape takes a snapshot, so it advances the report's sequence number
// like a pull does.
func (r *Reporter) Collector(subsystem string, utilization func(Report) float64) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("transmirror", subsystem, name), help, nil, nil)
	}
	c := &reporterCollector{r: r, util: utilization}
	for _, g := range reportGauges {
		c.descs = append(c.descs, d(g.name, g.help))
	}
	if utilization != nil {
		c.descs = append(c.descs, d("load_utilization_ratio",
			"Utilization: the larger of load over capacity and bytes per second over bandwidth."))
	}
	return c
}

// Describe sends the descriptors (prometheus.Collector).
func (c *reporterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

// Collect takes a snapshot and sends its figures (prometheus.Collector).
func (c *reporterCollector) Collect(ch chan<- prometheus.Metric) {
	rep := c.r.Snapshot(c.r.cfg.Clock())
	for i, g := range reportGauges {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.GaugeValue, g.value(rep))
	}
	if c.util != nil {
		ch <- prometheus.MustNewConstMetric(c.descs[len(reportGauges)], prometheus.GaugeValue, c.util(rep))
	}
}
