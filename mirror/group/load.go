package group

import (
	"sync"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler"
)

// minMeterRefresh bounds how often a LoadMeter takes a new snapshot.
const minMeterRefresh = 10 * time.Millisecond

// LoadMeter is this mirror's own utilization as the redirect decision
// needs it, taken from a probe.Reporter's live snapshot. Taking a snapshot
// reads the run queue, so the figure is cached for a short refresh period
// (a tenth of the report window: one bucket of the Reporter) instead of
// being taken for every request. A LoadMeter is safe for concurrent use.
type LoadMeter struct {
	rep     *probe.Reporter
	refresh time.Duration

	mu        sync.Mutex
	capacity  float64
	bandwidth float64   // bytes per second, 0: no limit
	at        time.Time // when cur was taken; zero: never
	cur       LoadReading
}

// LoadReading is what a LoadMeter reads at one moment.
type LoadReading struct {
	// Utilization is the serving utilization (see LoadMeter.Utilization).
	Utilization float64
	// RunQueue is the report's m.
	RunQueue float64
	// Capacity is the mirror's capacity, in load units.
	Capacity float64
	// Bandwidth is the bandwidth utilization: bytes per second over the
	// bandwidth, 0 without one.
	Bandwidth float64
}

// NewLoadMeter returns a LoadMeter over rep for a mirror of this capacity
// (load units, > 0) and bandwidth (bytes per second, 0: no limit) that
// caches a figure for refresh (at least 10ms).
func NewLoadMeter(rep *probe.Reporter, capacity, bandwidth float64, refresh time.Duration) *LoadMeter {
	return &LoadMeter{rep: rep, capacity: capacity, bandwidth: bandwidth, refresh: max(refresh, minMeterRefresh)}
}

// SetLimits makes capacity (load units, > 0) and bandwidth (bytes per
// second, 0: no limit) the mirror's from now on (a reload); the cached
// figure is dropped.
func (m *LoadMeter) SetLimits(capacity, bandwidth float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity, m.bandwidth, m.at = capacity, bandwidth, time.Time{}
}

// Utilization returns the mirror's serving utilization at now, the
// utilization dnsd's policy computes (scheduler.Figures.Utilization) of
// what the mirror serves: the larger of 10·(r − redirects + m) / capacity,
// where r is the request rate, redirects the rate of 302 answers and m
// the run queue, and bytes per second / bandwidth, all from the Reporter.
// The redirects are left out of the load because a 302 costs next to
// nothing next to serving a file: counting them would keep a mirror that
// sheds load at the utilization of all the requests it receives, and the
// share it redirects could never settle at the point where what it serves
// fits its capacity (their few bytes are in the bytes per second). The
// load report pushed to dnsd still counts every request.
func (m *LoadMeter) Utilization(now time.Time) float64 { return m.Read(now).Utilization }

// Read returns the reading at now, cached for the refresh period.
func (m *LoadMeter) Read(now time.Time) LoadReading {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.at.IsZero() && now.Sub(m.at) < m.refresh && !now.Before(m.at) {
		return m.cur
	}
	r := m.rep.Snapshot(now)
	m.at = now
	m.cur = LoadReading{
		Utilization: scheduler.Figures{
			Load: probe.LoadOf(max(r.R-r.RedirectsPerSecond, 0), r.M), Capacity: m.capacity,
			BytesPerSecond: r.BytesPerSecond, Bandwidth: m.bandwidth,
		}.Utilization(),
		RunQueue: r.M, Capacity: m.capacity,
	}
	if m.bandwidth > 0 {
		m.cur.Bandwidth = r.BytesPerSecond / m.bandwidth
	}
	return m.cur
}

// ReportUtilization is the utilization of a load report as dnsd sees it
// (scheduler.Figures.Utilization of its load, capacity, bytes per second
// and bandwidth), 0 for a report without a capacity: the figure of the
// status page and of transmirror_mirror_load_utilization_ratio.
func ReportUtilization(r probe.Report) float64 {
	if !(r.Capacity > 0) {
		return 0
	}
	return scheduler.Figures{Load: r.Load, Capacity: r.Capacity, BytesPerSecond: r.BytesPerSecond, Bandwidth: r.Bandwidth}.Utilization()
}
