package mirror

import (
	"time"

	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
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
	// ViewStale: the view is older than StaleViews intervals: nothing is
	// redirected on it but by a dispatcher.
	ViewStale = "stale"
	// ViewExpired: the view is older than ExpiredViews intervals: a
	// dispatcher answers 503 rather than redirect on it.
	ViewExpired = "expired"
)

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
	// Join is the mirror's own membership; nil without join.
	Join *group.JoinStatus `json:"join,omitempty"`
	// Site is the front end and its back ends; nil unless Role is
	// RoleSite.
	Site *frontend.Status `json:"site,omitempty"`
	// Cache is the memory cache of a document root; nil without one.
	Cache *serve.CacheStatus `json:"cache,omitempty"`
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
	// Bandwidth is the configured bandwidth in bytes per second (0: no
	// limit).
	Bandwidth float64 `json:"bandwidth"`
	// Utilization is ReportUtilization of the load report, as dnsd sees
	// it: the larger of Load/Capacity and bytes per second over the
	// bandwidth (0 when the capacity is 0).
	Utilization float64 `json:"utilization"`
	// ServingUtilization leaves the redirects out (see
	// LoadMeter.Utilization): what the redirect decision uses.
	ServingUtilization float64 `json:"serving_utilization"`
}

// RedirectStatus describes the 302 correction.
type RedirectStatus struct {
	// Enabled is redirect.enabled (always true for a dispatcher).
	Enabled bool `json:"enabled"`
	// LowWatermark and HighWatermark are the group's, from the view
	// (the scheduler's defaults without one); MaxShare is redirect.max_share.
	LowWatermark  float64 `json:"low_watermark"`
	HighWatermark float64 `json:"high_watermark"`
	MaxShare      float64 `json:"max_share"`
	// Law is redirect.law.
	Law string `json:"law,omitempty"`
	// Share is the share of the redirectable requests redirected now
	// (FairShareRedirect or RedirectShare, by the law); 0 when disabled.
	Share float64 `json:"share"`
	// Target is the utilization the fair-share law steers to now: the
	// group's fair utilization, at least the low watermark.
	Target float64 `json:"target,omitempty"`
	// Arrivals and Redirectable are the request rates the law reads
	// (requests per second, over redirect.time_constant).
	Arrivals     float64 `json:"arrivals_per_second"`
	Redirectable float64 `json:"redirectable_per_second"`
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
	// State is ViewNone, ViewFresh, ViewStale or ViewExpired.
	State string `json:"state"`
	// Unreadable, when set, says that the last refresh of the view
	// failed: why and since when. The page shows it as a warning.
	Unreadable *ViewErrorStatus `json:"unreadable,omitempty"`
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

// ViewErrorStatus describes a group view that can not be read (see
// ViewHealth). It names no URL: the reason is one of a bounded set.
type ViewErrorStatus struct {
	// Reason is why the last refresh failed: too_large, malformed,
	// invalid, refused or unreachable.
	Reason string `json:"reason"`
	// Since is when the first refresh of this spell failed.
	Since time.Time `json:"since"`
	// ForSeconds is the time since Since.
	ForSeconds float64 `json:"for_seconds"`
	// Failures is the number of refreshes failed in a row.
	Failures int `json:"failures"`
}

// SiteStatusSource is what the status needs of a site front end; the
// handler of frontend.New is one. NewMember finds it in Options.Content.
type SiteStatusSource interface {
	Status() frontend.Status
}

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
		RedirectsPerSecond: rep.RedirectsPerSecond, Load: rep.Load, Capacity: rep.Capacity, Bandwidth: rep.Bandwidth,
		Utilization: group.ReportUtilization(rep), ServingUtilization: m.meter.Utilization(now),
	}

	rules := m.redirect.Rules()
	s.Redirect = RedirectStatus{
		Enabled: rules.Enabled || rules.Dispatcher, MaxShare: rules.MaxShare, PerSecond: rep.RedirectsPerSecond,
	}
	s.Redirect.LowWatermark, s.Redirect.HighWatermark = m.redirect.Watermarks()
	s.Redirect.Redirected, s.Redirect.Skipped = m.redirect.Counts()
	s.Redirect.Law = rules.Law
	if rules.Dispatcher {
		s.Redirect.Law = ""
	}
	s.Redirect.Share = m.redirect.Share(now)
	if rules.Law != group.LawWatermark && !rules.Dispatcher {
		s.Redirect.Target = m.redirect.Target()
	}
	f := m.redirect.Flows().Flows(now)
	s.Redirect.Arrivals, s.Redirect.Redirectable = f.Arrivals, f.Redirectable

	if m.view != nil {
		s.View = viewStatus(m.view.Snapshot(), m.view.Health(), now)
	}
	if m.joiner != nil {
		js := m.joiner.Status()
		s.Join = &js
	}
	if m.site != nil {
		ss := m.site.Status()
		s.Site = &ss
	}
	if m.files != nil {
		s.Cache = m.files.CacheStatus()
	}
	return s
}

// viewStatus describes snap (nil: none yet) at now, with the view's
// health h.
func viewStatus(snap *group.GroupSnapshot, h group.ViewHealth, now time.Time) *ViewStatus {
	v := &ViewStatus{State: ViewNone}
	if !h.OK && h.Failures > 0 {
		v.Unreadable = &ViewErrorStatus{
			Reason: h.Reason, Since: h.Since, ForSeconds: max(now.Sub(h.Since).Seconds(), 0), Failures: h.Failures,
		}
	}
	if snap == nil {
		return v
	}
	v.State, v.Fetched, v.AgeSeconds = ViewFresh, snap.Fetched, max(now.Sub(snap.Fetched).Seconds(), 0)
	v.StaleAfterSeconds, v.Policy = snap.StaleAfter.Seconds(), snap.View.Policy
	v.Members, v.Candidates = len(snap.View.Members), snap.Candidates()
	switch {
	case snap.Expired(now):
		v.State = ViewExpired
	case snap.Stale(now):
		v.State = ViewStale
	}
	return v
}
