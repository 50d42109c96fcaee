package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/transmirror/transmirror/mirror"
	contentindex "github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler/geo"
)

// loadMeters builds the load Reporter (registered in d.reg), which counts
// the requests that flows says were served and reports generation (nil:
// none, see generationOf), and the LoadMeter over it.
func loadMeters(cfg *mirror.Config, d deps, flows *group.FlowMeter, generation func() time.Time) (*probe.Reporter, *group.LoadMeter, error) {
	rc := probe.ReporterConfig{
		Group: cfg.Group, Member: cfg.Member, Capacity: cfg.Capacity, Bandwidth: cfg.Bandwidth.BytesPerSecond(),
		Window: d.reportWindow, RunQueue: d.runQueue, Serving: flows.Served, Clock: d.clock, Logger: d.logger,
		Generation: generation, Schemes: schemesOf(cfg), CertNotAfter: certNotAfter(d.tls),
	}
	cfg.RunQueue.Apply(&rc)
	reporter, err := probe.NewReporter(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: reporter: %w", err)
	}
	if err := d.reg.Register(reporter.Collector("mirror", group.ReportUtilization)); err != nil {
		return nil, nil, fmt.Errorf("mirror: register load metrics: %w", err)
	}
	meter := group.NewLoadMeter(reporter, cfg.Capacity, cfg.Bandwidth.BytesPerSecond(), d.reportWindow/10)
	return reporter, meter, nil
}

// schemesOf are the schemes the mirror serves the group name on, for its
// load reports (the siblings redirect https requests only to members that
// say https): redirect.scheme when it is fixed (behind a terminator that
// speaks https), else http on the plain listeners and https on the TLS
// ones, and https too where trusted proxies may forward it
// (X-Forwarded-Proto).
func schemesOf(cfg *mirror.Config) []string {
	switch cfg.Redirect.Scheme {
	case group.SchemeHTTPS:
		return []string{probe.SchemeHTTPS}
	case group.SchemeHTTP:
		return []string{probe.SchemeHTTP}
	}
	var out []string
	if len(cfg.Listen) > 0 {
		out = append(out, probe.SchemeHTTP)
	}
	if len(cfg.TLS.Listen) > 0 || len(cfg.TrustedProxies) > 0 {
		out = append(out, probe.SchemeHTTPS)
	}
	return out
}

// generationOf is where the load reports take the mirror's generation
// from: content.trace's file, or with content.generation newest the
// newest mtime of index (the root's content index); nil for none.
func generationOf(cfg *mirror.Config, d deps, index *contentindex.Scanner) (func() time.Time, error) {
	if cfg.Content.Generation == mirror.GenerationNewest && index != nil {
		return func() time.Time { return index.Current().Newest() }, nil
	}
	path := cfg.TracePath()
	if path == "" {
		return nil, nil
	}
	trace, err := probe.NewTrace(probe.TraceConfig{Path: path, Subsystem: "mirror", Registerer: d.reg, Clock: d.clock, Logger: d.logger})
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	return trace.Generation, nil
}

// newView returns the watcher of the group view from dnsd, nil without
// dnsd; self is the member left out of the candidates ("" for none), and
// booking the mirror's redirects as the siblings' reports will show them.
func newView(cfg *mirror.Config, d deps, self string, booking group.RedirectBooking) (*group.ViewWatcher, error) {
	c := cfg.DNSD
	if len(c.URLs) == 0 {
		return nil, nil
	}
	return group.NewViewWatcher(group.ViewWatcherOptions{
		URLs: c.URLs, Group: cfg.Group, Self: self, Interval: c.ViewInterval.D(), Booking: booking,
		Client: d.client, Clock: d.clock, Logger: d.logger, Registerer: d.reg,
	})
}

// memberPusher returns the Pusher of a member's load reports
// (LOAD-INFORM), nil without dnsd.
func memberPusher(cfg *mirror.Config, d deps, snapshot func(time.Time) probe.Report, serving func() bool) (*group.Pusher, error) {
	c := cfg.DNSD
	if len(c.URLs) == 0 {
		return nil, nil
	}
	return group.NewPusher(group.PusherOptions{
		URLs: c.URLs, One: c.Push == mirror.PushOne, Group: cfg.Group, Member: cfg.Member, Secret: []byte(c.Secret),
		Interval: c.PushInterval.D(), Snapshot: snapshot, Serving: serving,
		Client: d.client, Clock: d.clock, Logger: d.logger, Registerer: d.reg,
	})
}

// dispatcherPusher returns the Pusher of a dispatcher's redirect reports,
// nil without dnsd or without its secret (it then reports nothing). It
// has no load of its own to report: the redirects it sends, so that dnsd
// (and whoever reads its views) sees them before the members' reports do.
// They go to every dnsd, whatever dnsd.push says: the nodes of an NS set
// share no reports (each books the redirects it is told of).
func dispatcherPusher(cfg *mirror.Config, d deps, booking group.RedirectBooking) (*group.Pusher, error) {
	c := cfg.DNSD
	if len(c.URLs) == 0 || c.Secret == "" {
		return nil, nil
	}
	return group.NewPusher(group.PusherOptions{
		URLs: c.URLs, Group: cfg.Group, Secret: []byte(c.Secret), Interval: c.PushInterval.D(),
		Redirects: func(now time.Time) api.RedirectReport {
			return api.RedirectReport{Dispatcher: cfg.Host, Time: now, Members: booking.Sent.Rates(now)}
		},
		Client: d.client, Clock: d.clock, Logger: d.logger, Registerer: d.reg,
	})
}

// newJoiner returns the member's own membership (GROUP-ADD and
// GROUP-EXIT), which reads view, nil without join.
func newJoiner(cfg *mirror.Config, d deps, view *group.ViewWatcher) (*group.Joiner, error) {
	j := cfg.Join
	if !j.Enabled {
		return nil, nil
	}
	l := cfg.Location
	return group.NewJoiner(group.JoinerOptions{
		URLs: cfg.DNSD.URLs, Group: cfg.Group, Secret: []byte(cfg.DNSD.Secret), LeaveWait: j.LeaveWait.D(),
		CheckInterval: j.CheckInterval.D(),
		Member: api.MemberInfo{
			Name: cfg.Member, Host: cfg.Host, Addresses: j.Addresses, Probe: j.Probe,
			Capacity: cfg.Capacity, Bandwidth: cfg.Bandwidth.BytesPerSecond(),
			Location: api.LocationView{Lat: l.Lat, Lon: l.Lon, Country: l.Country, Continent: l.Continent},
		},
		View: groupView(view), Client: d.client, Clock: d.clock, Logger: d.logger, Registerer: d.reg, Rand: joinRand(d.rand),
	})
}

// groupView returns the latest group view of view, nil when there is
// none (or no view).
func groupView(view *group.ViewWatcher) func() *api.GroupView {
	return func() *api.GroupView {
		if view == nil {
			return nil
		}
		s := view.Snapshot()
		if s == nil {
			return nil
		}
		return &s.View
	}
}

// joinRand is the Joiner's own randomness, drawn from r (the redirects',
// which the Joiner must not share: a rand.Rand is for one goroutine) when
// one is given.
func joinRand(r *rand.Rand) *rand.Rand {
	if r == nil {
		return nil
	}
	return rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
}

// newRedirector builds the redirect decision in front of next (nil for a
// dispatcher, which redirects every request): the config's rules, the
// GeoIP database, the load and flow meters, the group view (nil without
// dnsd), the document root (nil without one) and the siblings' content
// map (nil without a view).
func newRedirector(cfg *mirror.Config, d deps, next http.Handler, meter *group.LoadMeter, flows *group.FlowMeter,
	view *group.ViewWatcher, files *serve.FileServer, siblings *contentmap.Map) (*group.Redirector, error) {
	loc, err := geo.FromConfig(cfg.Geo)
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	ro := group.RedirectorOptions{
		Rules: mirror.RedirectRulesFromConfig(cfg), Next: next, Load: meter, Flows: flows, Locator: loc,
		Clock: d.clock, Rand: d.rand, Logger: d.logger, Registerer: d.reg,
	}
	if view != nil { // not a nil *group.ViewWatcher in the interface
		ro.View = view
	}
	if files != nil {
		ro.Files = files
	}
	if siblings != nil {
		ro.Contents = siblings
	}
	return group.NewRedirector(ro)
}

// siteReport serves a document root's report to its site front end
// (with completions, what it served for it); nil for the other roles.
func siteReport(m *mirror.Mirror, completions *frontend.Completions, clock func() time.Time) http.Handler {
	if completions == nil {
		return nil
	}
	return frontend.ReportHandler(func() frontend.BackendReport { return m.BackendReport(clock()) }, completions)
}
