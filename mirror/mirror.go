package mirror

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

// Errors of the mirror's global role.
var (
	// ErrNeedsRestart is wrapped by the errors of a reload that changes a
	// key the running mirror can not change (see RestartChanges).
	ErrNeedsRestart = errors.New("needs a restart")
)

// Parts are the components of a running mirror that its status page and
// its reload read, built by the daemon's wiring (cmd/mirror) for its
// role and handed to New.
type Parts struct {
	// Reporter counts the public requests and makes the load reports
	// (required).
	Reporter *probe.Reporter
	// Meter is the utilization the redirects follow (required).
	Meter *group.LoadMeter
	// Redirector is the redirect decision in front of the content
	// (required).
	Redirector *group.Redirector
	// View watches the group view from dnsd; nil without dnsd.
	View *group.ViewWatcher
	// Joiner is the mirror's own membership; nil without join.
	Joiner *group.Joiner
	// Files is the document root; nil without root.
	Files *serve.FileServer
	// Site is the site front end; nil unless there is one.
	Site SiteStatusSource
	// Serving says whether the mirror can serve (see SiteServing); nil:
	// always.
	Serving func() bool
	// Started is when the mirror was built (Status).
	Started time.Time
	// Certificates are those of the public HTTPS listeners now, in the
	// config's order; nil without tls.listen.
	Certificates func() []CertificateStatus
}

// Mirror is a running mirror as its status page and its reload see it:
// the config in force and the Parts that the status reads and that a
// reload changes (PrepareReload, Reload.Commit). It serves nothing
// itself: the wiring serves its Redirector's chain and runs its loops.
type Mirror struct {
	cfg atomic.Pointer[Config] // swapped by a reload (Reload.Commit)
	p   Parts
}

// New returns the Mirror of cfg, the config it was built from, and p.
func New(cfg *Config, p Parts) *Mirror {
	m := &Mirror{p: p}
	m.cfg.Store(cfg)
	return m
}

// Status returns the mirror's status at now. It is cheap and asks no
// other server: the load snapshot, the counters, the view and the
// policy's own report.
func (m *Mirror) Status(now time.Time) Status {
	cfg := m.cfg.Load()
	s := Status{
		Time: now, Group: cfg.Group, Member: cfg.Member, Host: cfg.Host,
		Role: RoleRoot, Started: m.p.Started, UptimeSeconds: max(now.Sub(m.p.Started).Seconds(), 0),
	}
	switch {
	case cfg.Dispatcher:
		s.Role = RoleDispatcher
	case len(cfg.Backends) > 0:
		s.Role = RoleSite
	}

	rep := m.p.Reporter.Snapshot(now)
	s.Load = LoadStatus{
		R: rep.R, M: rep.M, Conns: rep.Conns, BytesPerSecond: rep.BytesPerSecond,
		RedirectsPerSecond: rep.RedirectsPerSecond, Load: rep.Load, Capacity: rep.Capacity, Bandwidth: rep.Bandwidth,
		Utilization: group.ReportUtilization(rep), ServingUtilization: m.p.Meter.Utilization(now),
		Generation: rep.Generation,
	}

	s.Redirect = redirectStatus(m.p.Redirector, rep.RedirectsPerSecond, now)

	if m.p.View != nil {
		s.View = viewStatus(m.p.View.Snapshot(), m.p.View.Health(), now)
	}
	if m.p.Certificates != nil {
		s.TLS = m.p.Certificates()
	}
	if m.p.Joiner != nil {
		js := m.p.Joiner.Status()
		s.Join = &js
	}
	if m.p.Site != nil {
		ss := m.p.Site.Status()
		s.Site = &ss
	}
	if m.p.Files != nil {
		s.Cache = m.p.Files.CacheStatus()
	}
	return s
}

// BackendReport is a document root's report to its site front end at
// now: its load and the size of its memory cache.
func (m *Mirror) BackendReport(now time.Time) frontend.BackendReport {
	r := m.p.Reporter.Snapshot(now)
	c := m.cfg.Load().Site.Cache
	rep := frontend.BackendReport{Time: now, InFlight: r.Conns, RequestsPerSecond: r.R, BytesPerSecond: r.BytesPerSecond}
	if c.Memory > 0 {
		rep.CacheMemory, rep.CacheMaxObject = int64(c.Memory), int64(c.MaxObject)
	}
	return rep
}

// SiteStatusSource is what the status needs of a site front end; the
// handler of frontend.New is one.
type SiteStatusSource interface {
	Status() frontend.Status
}

// SiteServing is what the mirror needs of a site front end to know
// whether it can serve: a back end up (or not yet checked). The handler of
// frontend.New is one. A mirror that is not serving answers api.Healthy
// (on both listeners) and api.LoadReport 503 and pushes no load reports,
// so that dnsd takes it out of the answers however it watches it.
type SiteServing interface {
	Serving() bool
}

// Serving reports whether the mirror can serve: always, except for a site
// front end whose back ends are all down (see SiteServing).
func (m *Mirror) Serving() bool { return m.p.Serving == nil || m.p.Serving() }

// HealthPath is answered 200 on the public listener too, so a site front
// end (or any load balancer) can check a mirror where it sends requests;
// 503 while it is not serving (SiteServing). It is not counted as load
// and never redirected.
const HealthPath = api.HealthyPath

// WithHealth answers HealthPath in front of next; serving, when set, says
// whether to answer 200 or 503.
func WithHealth(serving func() bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == HealthPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			w.Header().Set("Cache-Control", "no-store")
			writeHealth(w, serving, "ok\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// writeHealth writes the answer of a health endpoint: 200 with ok, or 503
// with the reason while not serving.
func writeHealth(w http.ResponseWriter, serving func() bool, ok string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if serving != nil && !serving() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, group.ErrNotServing.Error()+"\n")
		return
	}
	_, _ = io.WriteString(w, ok)
}
