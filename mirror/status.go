package mirror

import (
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/transmirror/transmirror/scheduler/site"
)

// Roles of a mirror, the values of Status.Role.
const (
	// RoleRoot serves a document root (a back end of a site, or a mirror
	// on its own).
	RoleRoot = "root"
	// RoleSite is a site front end over back ends.
	RoleSite = "site"
	// RoleDispatcher redirects every request and serves nothing.
	RoleDispatcher = "dispatcher"
)

// Group view states, the values of ViewStatus.State.
const (
	// ViewNone: no view has been fetched yet.
	ViewNone = "none"
	// ViewFresh: the view is young enough to redirect on.
	ViewFresh = "fresh"
	// ViewStale: the view is older than StaleViews intervals.
	ViewStale = "stale"
)

// MaxStatusBackends bounds the back ends that a Status lists; the rest
// are counted in SiteStatus.Omitted.
const MaxStatusBackends = 256

// Status is what the mirror's status page shows, and what api.MirrorStatus
// answers as JSON: figures the mirror keeps anyway, taken at Time. It
// holds no secret: neither the dnsd secret nor its URL, and back-end URLs
// without user information, query or fragment.
type Status struct {
	// Time is when the figures were taken.
	Time time.Time `json:"time"`
	// Group, Member and Host name the mirror (Config.Group, .Member,
	// .Host).
	Group  string `json:"group"`
	Member string `json:"member"`
	Host   string `json:"host"`
	// Role is RoleRoot, RoleSite or RoleDispatcher.
	Role string `json:"role"`
	// Started is when the mirror was built; UptimeSeconds the time since.
	Started       time.Time `json:"started"`
	UptimeSeconds float64   `json:"uptime_seconds"`
	// Load is the current load report.
	Load LoadStatus `json:"load"`
	// Redirect is the 302 correction: its rules, rate and counters.
	Redirect RedirectStatus `json:"redirect"`
	// View is the group view from dnsd; nil when dnsd is not configured.
	View *ViewStatus `json:"view,omitempty"`
	// Site is the front end and its back ends; nil unless Role is
	// RoleSite.
	Site *SiteStatus `json:"site,omitempty"`
	// Cache is the memory cache of a document root; nil without one.
	Cache *CacheStatus `json:"cache,omitempty"`
}

// LoadStatus is the mirror's load report (see probe.Report) with its
// utilizations.
type LoadStatus struct {
	// R is requests per second, M the run-queue length and Conns the
	// requests in flight.
	R     float64 `json:"r"`
	M     float64 `json:"m"`
	Conns int64   `json:"conns"`
	// BytesPerSecond is response bytes written per second.
	BytesPerSecond float64 `json:"bytes_per_second"`
	// RedirectsPerSecond is 302 responses per second.
	RedirectsPerSecond float64 `json:"redirects_per_second"`
	// Load is 10·(R + M); Capacity the configured capacity.
	Load     float64 `json:"load"`
	Capacity float64 `json:"capacity"`
	// Utilization is Load/Capacity, as dnsd sees it (0 when the capacity
	// is 0).
	Utilization float64 `json:"utilization"`
	// ServingUtilization leaves the redirects out (see
	// LoadMeter.Utilization): what the redirect decision uses.
	ServingUtilization float64 `json:"serving_utilization"`
}

// RedirectStatus describes the 302 correction.
type RedirectStatus struct {
	// Enabled is redirect.enabled (always true for a dispatcher).
	Enabled bool `json:"enabled"`
	// LowWatermark, HighWatermark and MaxShare are the rules' shape.
	LowWatermark  float64 `json:"low_watermark"`
	HighWatermark float64 `json:"high_watermark"`
	MaxShare      float64 `json:"max_share"`
	// Share is the share of the redirectable requests redirected at the
	// current serving utilization (RedirectShare); 0 when disabled.
	Share float64 `json:"share"`
	// PerSecond is the rate of 302 answers over the report window.
	PerSecond float64 `json:"per_second"`
	// Redirected counts the redirects since the start, by reason
	// (overload, dispatch): transmirror_mirror_redirects_total.
	Redirected map[string]uint64 `json:"redirected"`
	// Skipped counts the requests that were to be redirected but were
	// not, by reason (no_view, stale_view, no_sibling):
	// transmirror_mirror_redirects_skipped_total.
	Skipped map[string]uint64 `json:"skipped"`
}

// ViewStatus describes the group view the mirror redirects on.
type ViewStatus struct {
	// State is ViewNone, ViewFresh or ViewStale.
	State string `json:"state"`
	// Fetched is when the view was received; zero with ViewNone.
	Fetched time.Time `json:"fetched,omitzero"`
	// AgeSeconds is the time since Fetched; StaleAfterSeconds the age
	// at which the view goes stale.
	AgeSeconds        float64 `json:"age_seconds"`
	StaleAfterSeconds float64 `json:"stale_after_seconds"`
	// Policy is the group's answer policy.
	Policy string `json:"policy,omitempty"`
	// Members is the number of members in the view; Candidates those a
	// redirect may go to (up or unknown, not this mirror).
	Members    int `json:"members"`
	Candidates int `json:"candidates"`
}

// SiteStatus describes a site front end.
type SiteStatus struct {
	// Mode is proxy, redirect or handoff.
	Mode string `json:"mode"`
	// Policy is the site policy's name.
	Policy string `json:"policy"`
	// PolicyState is the policy's state, when it reports one (site.Stater).
	PolicyState *site.Stats `json:"policy_state,omitempty"`
	// Backends are the back ends in configuration order, at most
	// MaxStatusBackends; Omitted counts the rest.
	Backends []BackendStatus `json:"backends"`
	Omitted  int             `json:"omitted,omitempty"`
	// Retries counts requests retried on another back end; AllDownPicks
	// picks made while every back end was down (since the start).
	Retries      uint64 `json:"retries"`
	AllDownPicks uint64 `json:"all_down_picks"`
}

// BackendStatus describes one back end of a site front end.
type BackendStatus struct {
	// Name is the configured name.
	Name string `json:"name"`
	// URL is where requests go, without user information, query or
	// fragment.
	URL string `json:"url"`
	// PublicURL is where redirect mode sends clients, likewise; "" in
	// other modes.
	PublicURL string `json:"public_url,omitempty"`
	// Health is up, down or unknown (a new back end, which takes
	// requests).
	Health string `json:"health"`
	// LastError is the kind of the last failed check or request ("" for
	// none).
	LastError string `json:"last_error,omitempty"`
	// Weight and MemoryBytes are the configured figures.
	Weight      float64 `json:"weight"`
	MemoryBytes int64   `json:"memory_bytes"`
	// InFlight is the requests in flight on it (the policies' load).
	InFlight int64 `json:"in_flight"`
	// Picks counts the policy's picks of it, Errors its failed requests,
	// handoffs and health checks (since the start).
	Picks  uint64 `json:"picks"`
	Errors uint64 `json:"errors"`
}

// CacheStatus describes a document root's memory cache.
type CacheStatus struct {
	// Objects is the number of cached files, Bytes their size with
	// their names, Capacity the bound (site.cache.memory) and MaxObject
	// the largest file cached (site.cache.max_object).
	Objects   int   `json:"objects"`
	Bytes     int64 `json:"bytes"`
	Capacity  int64 `json:"capacity"`
	MaxObject int64 `json:"max_object"`
	// Hits and Misses count the file responses served from memory and
	// not (since the start); HitRatio is Hits/(Hits+Misses), 0 before
	// the first.
	Hits     uint64  `json:"hits"`
	Misses   uint64  `json:"misses"`
	HitRatio float64 `json:"hit_ratio"`
}

// SiteStatusSource is what the status needs of a site front end; the
// handler of NewSiteHandler is one. New finds it in Options.Content.
type SiteStatusSource interface {
	SiteStatus() SiteStatus
}

var _ SiteStatusSource = (*siteHandler)(nil)

// Status returns the mirror's status at now. It is cheap and asks no
// other server: the load snapshot, the counters, the view and the
// policy's own report.
func (m *Mirror) Status(now time.Time) Status {
	cfg := m.cfg.Load()
	s := Status{
		Time: now, Group: cfg.Group, Member: cfg.Member, Host: cfg.Host,
		Role: RoleRoot, Started: m.started, UptimeSeconds: max(now.Sub(m.started).Seconds(), 0),
	}
	switch {
	case cfg.Dispatcher:
		s.Role = RoleDispatcher
	case len(cfg.Backends) > 0:
		s.Role = RoleSite
	}

	rep := m.reporter.Snapshot(now)
	s.Load = LoadStatus{
		R: rep.R, M: rep.M, Conns: rep.Conns, BytesPerSecond: rep.BytesPerSecond,
		RedirectsPerSecond: rep.RedirectsPerSecond, Load: rep.Load, Capacity: rep.Capacity,
		ServingUtilization: m.meter.Utilization(now),
	}
	if rep.Capacity > 0 {
		s.Load.Utilization = rep.Load / rep.Capacity
	}

	rules := m.redirect.Rules()
	s.Redirect = RedirectStatus{
		Enabled: rules.Enabled || rules.Dispatcher, LowWatermark: rules.LowWatermark,
		HighWatermark: rules.HighWatermark, MaxShare: rules.MaxShare,
		PerSecond:  rep.RedirectsPerSecond,
		Redirected: countsByLabel(m.redirect.redirects, "reason"),
		Skipped:    countsByLabel(m.redirect.skipped, "reason"),
	}
	if s.Redirect.Enabled {
		s.Redirect.Share = RedirectShare(rules, s.Load.ServingUtilization)
	}

	if m.view != nil {
		s.View = viewStatus(m.view.Snapshot(), now)
	}
	if m.site != nil {
		ss := m.site.SiteStatus()
		s.Site = &ss
	}
	if m.files != nil && m.files.cache != nil {
		cs := m.files.cache.status()
		s.Cache = &cs
	}
	return s
}

// viewStatus describes snap (nil: none yet) at now.
func viewStatus(snap *GroupSnapshot, now time.Time) *ViewStatus {
	if snap == nil {
		return &ViewStatus{State: ViewNone}
	}
	v := &ViewStatus{
		State: ViewFresh, Fetched: snap.Fetched, AgeSeconds: max(now.Sub(snap.Fetched).Seconds(), 0),
		StaleAfterSeconds: snap.StaleAfter.Seconds(), Policy: snap.View.Policy,
		Members: len(snap.View.Members), Candidates: snap.Candidates(),
	}
	if snap.Stale(now) {
		v.State = ViewStale
	}
	return v
}

// SiteStatus returns the front end's mode, its policy's state and its
// back ends.
func (h *siteHandler) SiteStatus() SiteStatus {
	s := SiteStatus{
		Mode: h.mode, Policy: h.policy.Name(),
		Retries: uint64(metricValue(h.m.retries)), AllDownPicks: uint64(metricValue(h.m.allDown)),
	}
	if st, ok := h.policy.(site.Stater); ok {
		ps := st.State()
		s.PolicyState = &ps
	}
	// The counters are shared with handlers of other configs: read this
	// policy's picks, and the errors of every kind, by back end.
	picks := make(map[string]float64, len(h.backends))
	eachSample(h.m.picks, func(l map[string]string, v float64) {
		if l["policy"] == s.Policy {
			picks[l["backend"]] += v
		}
	})
	errs := make(map[string]float64, len(h.backends))
	eachSample(h.m.errors, func(l map[string]string, v float64) { errs[l["backend"]] += v })

	n := min(len(h.backends), MaxStatusBackends)
	s.Omitted = len(h.backends) - n
	s.Backends = make([]BackendStatus, n)
	for i, b := range h.backends[:n] {
		b.health.mu.Lock()
		state, lastErr := b.health.state, b.health.lastError
		b.health.mu.Unlock()
		bs := BackendStatus{
			Name: b.name, URL: redactURL(b.url), Health: state.String(), LastError: lastErr,
			Weight: b.weight, MemoryBytes: b.memory, InFlight: max(b.active.Load(), 0),
			Picks: uint64(picks[b.name]), Errors: uint64(errs[b.name]),
		}
		if b.public != nil {
			bs.PublicURL = redactURL(b.public)
		}
		s.Backends[i] = bs
	}
	return s
}

// status returns the cache's fill and its hit counts.
func (c *Cache) status() CacheStatus {
	c.mu.Lock()
	s := CacheStatus{Objects: c.lru.Len(), Bytes: c.lru.Bytes(), Capacity: c.lru.Capacity(), MaxObject: c.maxObject}
	c.mu.Unlock()
	s.Hits, s.Misses = uint64(metricValue(c.m.hits)), uint64(metricValue(c.m.misses))
	if total := s.Hits + s.Misses; total > 0 {
		s.HitRatio = float64(s.Hits) / float64(total)
	}
	return s
}

// redactURL returns u as a string without user information, query and
// fragment, which may hold credentials.
func redactURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}

// metricValue returns the value of a counter or gauge (0 for others).
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		return 0
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	return 0
}

// eachSample calls fn with the labels and the value of every counter or
// gauge that c collects.
func eachSample(c prometheus.Collector, fn func(labels map[string]string, v float64)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			continue
		}
		labels := make(map[string]string, len(d.GetLabel()))
		for _, l := range d.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		switch {
		case d.Counter != nil:
			fn(labels, d.Counter.GetValue())
		case d.Gauge != nil:
			fn(labels, d.Gauge.GetValue())
		}
	}
}

// countsByLabel sums the samples of c by the value of label.
func countsByLabel(c prometheus.Collector, label string) map[string]uint64 {
	out := make(map[string]uint64)
	eachSample(c, func(l map[string]string, v float64) { out[l[label]] += uint64(v) })
	return out
}
