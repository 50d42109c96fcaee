package probe

import (
	"github.com/prometheus/client_golang/prometheus"
)

// reporterCollector exports a Reporter's figures as gauges, taken when
// scraped.
type reporterCollector struct {
	r     *Reporter
	descs [8]*prometheus.Desc
}

// Collector returns a Prometheus collector of the Reporter's load report,
// taken at scrape time: transmirror_<subsystem>_load_requests_per_second,
// _load_run_queue, _load_connections, _load_bytes_per_second,
// _load_redirects_per_second, _load_units (10·(r + m)), _load_capacity_units
// and _load_utilization_ratio. Each scrape takes a snapshot, so it advances
// the report's sequence number like a pull does.
func (r *Reporter) Collector(subsystem string) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("transmirror", subsystem, name), help, nil, nil)
	}
	return &reporterCollector{r: r, descs: [8]*prometheus.Desc{
		d("load_requests_per_second", "Requests per second over the load report's window (r)."),
		d("load_run_queue", "The host's run queue, the 1-minute load average (m)."),
		d("load_connections", "Requests in flight."),
		d("load_bytes_per_second", "Response bytes per second over the report's window."),
		d("load_redirects_per_second", "302 redirects per second over the report's window."),
		d("load_units", "The load figure of the report, 10·(r + m)."),
		d("load_capacity_units", "The configured capacity, in load units."),
		d("load_utilization_ratio", "Load over capacity."),
	}}
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
	util := 0.0
	if rep.Capacity > 0 {
		util = rep.Load / rep.Capacity
	}
	for i, v := range []float64{rep.R, rep.M, float64(rep.Conns), rep.BytesPerSecond,
		rep.RedirectsPerSecond, rep.Load, rep.Capacity, util} {
		ch <- prometheus.MustNewConstMetric(c.descs[i], prometheus.GaugeValue, v)
	}
}
