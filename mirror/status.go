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
	// TLS are the certificates of the public HTTPS listeners; none
	// without tls.listen.
	TLS []CertificateStatus `json:"tls,omitempty"`
}

// CertificateStatus is one certificate that the public HTTPS listeners
// present.
type CertificateStatus struct {
	// Names are the DNS names it is for (its subject alternative names,
	// else its common name).
	Names []string `json:"names"`
	// NotAfter is when it expires.
	NotAfter time.Time `json:"not_after"`
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
	// Generation is the report's generation, the time of the mirror's
	// last complete sync as content.trace says (absent: none).
	Generation time.Time `json:"generation,omitzero"`
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

// redirectStatus describes r, the redirect decision, at now; perSecond
// is the rate of its 302 answers over the report window. The watermarks
// are the group's, from the view (Redirector.Watermarks).
func redirectStatus(r *group.Redirector, perSecond float64, now time.Time) RedirectStatus {
	rules := r.Rules()
	s := RedirectStatus{
		Enabled: rules.Enabled || rules.Dispatcher, MaxShare: rules.MaxShare,
		PerSecond: perSecond,
	}
	s.LowWatermark, s.HighWatermark = r.Watermarks()
	s.Redirected, s.Skipped = r.Counts()
	s.Law = rules.Law
	if rules.Dispatcher {
		s.Law = ""
	}
	s.Share = r.Share(now)
	if rules.Law != group.LawWatermark && !rules.Dispatcher {
		s.Target = r.Target()
	}
	f := r.Flows().Flows(now)
	s.Arrivals, s.Redirectable = f.Arrivals, f.Redirectable
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
