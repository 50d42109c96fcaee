package mirror

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler/geo"
)

// Errors of building a Mirror.
var (
	// ErrNoContent is returned by NewMember for a config with backends
	// but no content handler (the site front end) in Options.
	ErrNoContent = errors.New("mirror: backends need a content handler")
	// ErrRole is returned by NewMember for a dispatcher's config and by
	// NewDispatcher for a member's.
	ErrRole = errors.New("mirror: the config is for the other role")
)

// NewMember builds the Mirror of a member of the group, for cfg, a config
// from ParseConfig without dispatcher: a document root (cfg.Root, with a
// memory cache in front of the disk) or a site front end (o.Content)
// behind the redirect decision; it reports its load to dnsd and, with
// join, joins the group. It opens the document root and the GeoIP
// database and registers the metrics; nothing runs until Run and Serve.
func NewMember(cfg *Config, o Options) (m *Mirror, err error) {
	if cfg.Dispatcher {
		return nil, fmt.Errorf("%w: a dispatcher (NewDispatcher)", ErrRole)
	}
	m, o = begin(cfg, o)
	defer m.closeIfFailed(&err)
	content, err := m.content(cfg, o)
	if err != nil {
		return nil, err
	}
	flows, booking, err := m.meters(cfg, o)
	if err != nil {
		return nil, err
	}
	if m.view, err = newView(cfg, o, cfg.Member, booking); err != nil {
		return nil, err
	}
	if m.pusher, err = memberPusher(cfg, o, m.reporter.Snapshot, m.serving); err != nil {
		return nil, err
	}
	if m.joiner, err = m.newJoiner(cfg, o); err != nil {
		return nil, err
	}
	if err := m.finish(cfg, o, content, flows); err != nil {
		return nil, err
	}
	return m, nil
}

// NewDispatcher builds the Mirror of a pure dispatcher, for cfg, a config
// from ParseConfig with dispatcher: it serves nothing, redirects every
// request on the group name to a member, and reports the redirects it
// sends to every dnsd (with dnsd.secret). It registers the metrics;
// nothing runs until Run and Serve.
func NewDispatcher(cfg *Config, o Options) (m *Mirror, err error) {
	if !cfg.Dispatcher {
		return nil, fmt.Errorf("%w: a member (NewMember)", ErrRole)
	}
	if o.Content != nil {
		return nil, errors.New("mirror: a dispatcher serves no content")
	}
	m, o = begin(cfg, o)
	defer m.closeIfFailed(&err)
	flows, booking, err := m.meters(cfg, o)
	if err != nil {
		return nil, err
	}
	// Not a member: every member is a candidate.
	if m.view, err = newView(cfg, o, "", booking); err != nil {
		return nil, err
	}
	if m.pusher, err = dispatcherPusher(cfg, o, booking); err != nil {
		return nil, err
	}
	if err := m.finish(cfg, o, nil, flows); err != nil {
		return nil, err
	}
	return m, nil
}

// begin fills o's defaults and returns the Mirror that they start.
func begin(cfg *Config, o Options) (*Mirror, Options) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.ReportWindow <= 0 {
		o.ReportWindow = probe.DefaultReportWindow
	}
	m := &Mirror{log: o.Logger, reg: o.Registry, started: o.Clock()}
	m.cfg.Store(cfg)
	return m, o
}

// closeIfFailed closes m when *err is set: what it opened so far.
func (m *Mirror) closeIfFailed(err *error) {
	if *err != nil {
		m.Close()
	}
}

// content returns a member's content: the document root (the back-end
// role: a memory cache in front of the disk, so that a locality-aware
// front end makes the site's caches add up, with what it serves reported
// to its front end), or the site front end of o.Content.
func (m *Mirror) content(cfg *Config, o Options) (http.Handler, error) {
	if cfg.Root == "" {
		if o.Content == nil {
			return nil, ErrNoContent
		}
		m.site, _ = o.Content.(SiteStatusSource)
		if s, ok := o.Content.(SiteServing); ok {
			m.serving = s.Serving
		}
		return o.Content, nil
	}
	cache, err := serve.NewCache(cfg.Site.Cache, serve.CacheOptions{Registerer: o.Registry})
	if err != nil {
		return nil, err
	}
	fo := serve.FileServerOptions{Listing: cfg.Listing, Logger: o.Logger, Cache: cache, MaxRanges: maxRanges(cfg.MaxRanges)}
	if m.files, err = serve.NewFileServer(cfg.Root, fo); err != nil {
		return nil, err
	}
	m.completions = frontend.NewCompletions()
	return m.completions.Wrap(m.files), nil
}

// meters builds the load Reporter (registered in o.Registry), the
// LoadMeter over it and the FlowMeter of the redirect decision, and
// returns the FlowMeter and the booking of this mirror's redirects: on
// the siblings, as their load reports, taken over the same window as this
// mirror's, will show them.
func (m *Mirror) meters(cfg *Config, o Options) (*group.FlowMeter, group.RedirectBooking, error) {
	flows := group.NewFlowMeter(cfg.Redirect.TimeConstant.D())
	rc := probe.ReporterConfig{
		Group: cfg.Group, Member: cfg.Member, Capacity: cfg.Capacity, Bandwidth: cfg.Bandwidth.BytesPerSecond(),
		Window: o.ReportWindow, RunQueue: o.RunQueue, Serving: flows.Served, Clock: o.Clock, Logger: o.Logger,
	}
	cfg.RunQueue.apply(&rc)
	var err error
	if m.reporter, err = probe.NewReporter(rc); err != nil {
		return nil, group.RedirectBooking{}, fmt.Errorf("mirror: reporter: %w", err)
	}
	if err := o.Registry.Register(m.reporter.Collector("mirror", group.ReportUtilization)); err != nil {
		return nil, group.RedirectBooking{}, fmt.Errorf("mirror: register load metrics: %w", err)
	}
	m.meter = group.NewLoadMeter(m.reporter, cfg.Capacity, cfg.Bandwidth.BytesPerSecond(), o.ReportWindow/10)
	return flows, group.MirrorBooking(o.ReportWindow, flows.TimeConstant()), nil
}

// newView returns the watcher of the group view from dnsd, nil without
// dnsd; self is the member left out of the candidates ("" for none).
func newView(cfg *Config, o Options, self string, booking group.RedirectBooking) (*group.ViewWatcher, error) {
	d := cfg.DNSD
	if len(d.URLs) == 0 {
		return nil, nil
	}
	return group.NewViewWatcher(group.ViewWatcherOptions{
		URLs: d.URLs, Group: cfg.Group, Self: self, Interval: d.ViewInterval.D(), Booking: booking,
		Client: o.Client, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registry,
	})
}

// memberPusher returns the Pusher of a member's load reports
// (LOAD-INFORM), nil without dnsd.
func memberPusher(cfg *Config, o Options, snapshot func(time.Time) probe.Report, serving func() bool) (*group.Pusher, error) {
	d := cfg.DNSD
	if len(d.URLs) == 0 {
		return nil, nil
	}
	return group.NewPusher(group.PusherOptions{
		URLs: d.URLs, One: d.Push == PushOne, Group: cfg.Group, Member: cfg.Member, Secret: []byte(d.Secret),
		Interval: d.PushInterval.D(), Snapshot: snapshot, Serving: serving,
		Client: o.Client, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registry,
	})
}

// dispatcherPusher returns the Pusher of a dispatcher's redirect reports,
// nil without dnsd or without its secret (it then reports nothing). It
// has no load of its own to report: the redirects it sends, so that dnsd
// (and whoever reads its views) sees them before the members' reports do.
// They go to every dnsd, whatever dnsd.push says: the nodes of an NS set
// share no reports (each books the redirects it is told of).
func dispatcherPusher(cfg *Config, o Options, booking group.RedirectBooking) (*group.Pusher, error) {
	d := cfg.DNSD
	if len(d.URLs) == 0 || d.Secret == "" {
		return nil, nil
	}
	return group.NewPusher(group.PusherOptions{
		URLs: d.URLs, Group: cfg.Group, Secret: []byte(d.Secret), Interval: d.PushInterval.D(),
		Redirects: func(now time.Time) api.RedirectReport {
			return api.RedirectReport{Dispatcher: cfg.Host, Time: now, Members: booking.Sent.Rates(now)}
		},
		Client: o.Client, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registry,
	})
}

// newJoiner returns the member's own membership (GROUP-ADD and
// GROUP-EXIT), nil without join.
func (m *Mirror) newJoiner(cfg *Config, o Options) (*group.Joiner, error) {
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
		View: m.groupView, Client: o.Client, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registry, Rand: joinRand(o.Rand),
	})
}

// finish builds what both roles share around content (nil for a
// dispatcher): the Redirector, the public handler chain and Server, the
// status page and the admin handler.
func (m *Mirror) finish(cfg *Config, o Options, content http.Handler, flows *group.FlowMeter) error {
	loc, err := geo.FromConfig(cfg.Geo)
	if err != nil {
		return fmt.Errorf("mirror: %w", err)
	}
	ro := group.RedirectorOptions{
		Rules: RedirectRulesFromConfig(cfg), Next: content, Load: m.meter, Flows: flows, Locator: loc,
		Clock: o.Clock, Rand: o.Rand, Logger: o.Logger, Registerer: o.Registry,
	}
	if m.view != nil { // not a nil *group.ViewWatcher in the interface
		ro.View = m.view
	}
	if m.files != nil {
		ro.Files = m.files
	}
	if m.redirect, err = group.NewRedirector(ro); err != nil {
		return err
	}
	m.handler = withHealth(m.serving, m.reporter.Wrap(m.redirect))
	so := ServerOptionsFromConfig(cfg, m.handler)
	so.Logger, so.Registerer = o.Logger, o.Registry
	if m.public, err = serve.NewServer(so); err != nil {
		return err
	}
	status, err := NewStatusHandler(m, o.Clock)
	if err != nil {
		return err
	}
	m.admin = http.MaxBytesHandler(NewAdminHandler(AdminOptions{Reporter: m.reporter, Gatherer: o.Registry, Logger: o.Logger, Status: status,
		SiteReport: m.siteReport(o.Clock), Serving: m.serving}), serve.DefaultMaxBodyBytes)
	return nil
}
