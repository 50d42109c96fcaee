package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler/geo"
)

// Errors of the mirror's global role.
var (
	// ErrNoContent is returned by New for a config with backends but no
	// content handler (the site front end) in Options.
	ErrNoContent = errors.New("mirror: backends need a content handler")
	// ErrNeedsRestart is wrapped by the errors of a reload that changes a
	// key the running mirror can not change (see RestartChanges).
	ErrNeedsRestart = errors.New("needs a restart")
)

// Options are what New needs besides the Config. The zero value works.
type Options struct {
	// Logger receives the mirror's log lines (default: discard).
	Logger *slog.Logger
	// Registry gets every metric of the mirror and serves /metrics on the
	// admin server (default: a new registry).
	Registry *prometheus.Registry
	// Content serves a site front end's content (required with backends,
	// typically from frontend.New; ignored with root; must be nil for a
	// dispatcher).
	Content http.Handler
	// Clock is the time of reports, signatures, views and decisions
	// (default time.Now).
	Clock func() time.Time
	// Rand is the randomness of the redirect decisions (default: seeded at
	// random).
	Rand *rand.Rand
	// RunQueue is the host's run-queue length (default probe.ReadRunQueue),
	// read when the config's run_queue is loadavg.
	RunQueue func() (float64, error)
	// ReportWindow is the Reporter's sliding window (default
	// probe.DefaultReportWindow).
	ReportWindow time.Duration
	// Client talks to dnsd (default: a client without redirects; each
	// call is bounded by its own timeout).
	Client *http.Client
}

// Mirror is the assembled mirror daemon: the public handler chain
// (metrics → load Reporter → Redirector → content), the admin handler,
// and, when dnsd is configured, the Pusher (LOAD-INFORM) and the
// ViewWatcher (GROUP-QUERY). Build it with New, run Run and one Serve per
// public listener under one context (and serve AdminHandler on the admin
// listener), then Close it.
type Mirror struct {
	cfg         atomic.Pointer[Config] // swapped by a reload (Reload.Commit)
	log         *slog.Logger
	reg         *prometheus.Registry
	reporter    *probe.Reporter
	meter       *group.LoadMeter
	view        *group.ViewWatcher    // nil without dnsd
	pusher      *group.Pusher         // nil without dnsd, and for a dispatcher
	joiner      *group.Joiner         // nil without join
	files       *serve.FileServer     // nil without root
	completions *frontend.Completions // nil without root
	site        SiteStatusSource      // nil unless a site front end
	serving     func() bool           // nil: always serving
	started     time.Time             // when New built the mirror (Status)
	redirect    *group.Redirector
	handler     http.Handler // without the server's metrics
	public      *serve.Server
	admin       http.Handler // the admin handler; cmd/mirror serves it

	closeOnce sync.Once
	closeErr  error
}

// New builds a Mirror for cfg, a config from ParseConfig. It opens the
// document root and the GeoIP database and registers the metrics; nothing
// runs until Run and Serve.
func New(cfg *Config, o Options) (m *Mirror, err error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	m = &Mirror{log: o.Logger, reg: o.Registry, started: o.Clock()}
	m.cfg.Store(cfg)
	built := m // m is nil once an error is returned
	defer func() {
		if err != nil {
			built.Close()
		}
	}()

	var content http.Handler
	switch {
	case cfg.Dispatcher:
		if o.Content != nil {
			return nil, errors.New("mirror: a dispatcher serves no content")
		}
	case cfg.Root != "":
		// The back-end role: a memory cache in front of the disk, so that a
		// locality-aware front end makes the site's caches add up.
		cache, cerr := serve.NewCache(cfg.Site.Cache, serve.CacheOptions{Registerer: o.Registry})
		if cerr != nil {
			return nil, cerr
		}
		if m.files, err = serve.NewFileServer(cfg.Root, serve.FileServerOptions{Listing: cfg.Listing, Logger: o.Logger, Cache: cache, MaxRanges: maxRanges(cfg.MaxRanges)}); err != nil {
			return nil, err
		}
		// What it serves is reported to a site front end (api.SiteReport).
		m.completions = frontend.NewCompletions()
		content = m.completions.Wrap(m.files)
	case o.Content == nil:
		return nil, ErrNoContent
	default:
		content = o.Content
		m.site, _ = o.Content.(SiteStatusSource)
		if s, ok := o.Content.(SiteServing); ok {
			m.serving = s.Serving
		}
	}

	flows := group.NewFlowMeter(cfg.Redirect.TimeConstant.D())
	rc := probe.ReporterConfig{
		Group: cfg.Group, Member: cfg.Member, Capacity: cfg.Capacity, Bandwidth: cfg.Bandwidth.BytesPerSecond(),
		Window: o.ReportWindow, RunQueue: o.RunQueue, Serving: flows.Served, Clock: o.Clock, Logger: o.Logger,
	}
	cfg.RunQueue.apply(&rc)
	m.reporter, err = probe.NewReporter(rc)
	if err != nil {
		return nil, fmt.Errorf("mirror: reporter: %w", err)
	}
	if o.Registry != nil {
		if err := o.Registry.Register(m.reporter.Collector("mirror", group.ReportUtilization)); err != nil {
			return nil, fmt.Errorf("mirror: register load metrics: %w", err)
		}
	}
	window := o.ReportWindow
	if window <= 0 {
		window = probe.DefaultReportWindow
	}
	m.meter = group.NewLoadMeter(m.reporter, cfg.Capacity, cfg.Bandwidth.BytesPerSecond(), window/10)

	if d := cfg.DNSD; len(d.URLs) > 0 {
		self := cfg.Member
		if cfg.Dispatcher {
			self = "" // not a member: every member is a candidate
		}
		// Redirects are booked on the siblings as their load reports,
		// taken over the same window as this mirror's, will show them.
		booking := group.MirrorBooking(window, flows.TimeConstant())
		m.view, err = group.NewViewWatcher(group.ViewWatcherOptions{
			URLs: d.URLs, Group: cfg.Group, Self: self, Interval: d.ViewInterval.D(), Booking: booking,
			Client: o.Client, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registry,
		})
		if err != nil {
			return nil, err
		}
		po := group.PusherOptions{
			URLs: d.URLs, One: d.Push == PushOne, Group: cfg.Group, Member: cfg.Member, Secret: []byte(d.Secret),
			Interval: d.PushInterval.D(), Snapshot: m.reporter.Snapshot, Serving: m.serving,
			Client: o.Client, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registry,
		}
		if cfg.Dispatcher {
			// No load of its own to report: the redirects it sends, so
			// that dnsd (and whoever reads its views) sees them before the
			// members' reports do.
			// To every dnsd, whatever dnsd.push says: the nodes of an NS
			// set share load reports through etcd, not redirect reports
			// (each books the redirects it is told of).
			po.Member, po.Snapshot, po.One = "", nil, false
			po.Redirects = func(now time.Time) api.RedirectReport {
				return api.RedirectReport{Dispatcher: cfg.Host, Time: now, Members: booking.Sent.Rates(now)}
			}
		}
		if !cfg.Dispatcher || d.Secret != "" { // a dispatcher without the secret reports nothing
			if m.pusher, err = group.NewPusher(po); err != nil {
				return nil, err
			}
		}
	}

	if j := cfg.Join; j.Enabled {
		l := cfg.Location
		m.joiner, err = group.NewJoiner(group.JoinerOptions{
			URLs: cfg.DNSD.URLs, Group: cfg.Group, Secret: []byte(cfg.DNSD.Secret), LeaveWait: j.LeaveWait.D(),
			CheckInterval: j.CheckInterval.D(),
			Member: api.MemberInfo{
				Name: cfg.Member, Host: cfg.Host, Addresses: j.Addresses, Probe: j.Probe,
				Capacity: cfg.Capacity, Bandwidth: cfg.Bandwidth.BytesPerSecond(),
				Location: api.LocationView{Lat: l.Lat, Lon: l.Lon, Country: l.Country, Continent: l.Continent},
			},
			View: m.groupView, Client: o.Client, Clock: o.Clock, Logger: o.Logger, Registerer: o.Registry, Rand: joinRand(o.Rand),
		})
		if err != nil {
			return nil, err
		}
	}

	loc, err := geo.FromConfig(cfg.Geo)
	if err != nil {
		return nil, fmt.Errorf("mirror: %w", err)
	}
	ro := group.RedirectorOptions{
		Rules: RedirectRulesFromConfig(cfg), Next: content, Load: m.meter, Flows: flows, Locator: loc,
		Clock: o.Clock, Rand: o.Rand, Logger: o.Logger, Registerer: o.Registry,
	}
	if m.view != nil {
		ro.View = m.view
	}
	if m.files != nil { // not a nil *serve.FileServer in the interface
		ro.Files = m.files
	}
	if m.redirect, err = group.NewRedirector(ro); err != nil {
		return nil, err
	}
	m.handler = withHealth(m.serving, m.reporter.Wrap(m.redirect))

	po := ServerOptionsFromConfig(cfg, m.handler)
	po.Logger, po.Registerer = o.Logger, o.Registry
	if m.public, err = serve.NewServer(po); err != nil {
		return nil, err
	}
	status, err := NewStatusHandler(m, o.Clock)
	if err != nil {
		return nil, err
	}
	m.admin = http.MaxBytesHandler(NewAdminHandler(AdminOptions{Reporter: m.reporter, Gatherer: o.Registry, Logger: o.Logger, Status: status,
		SiteReport: m.siteReport(o.Clock), Serving: m.serving}), serve.DefaultMaxBodyBytes)
	return m, nil
}

// maxRanges is FileServerOptions.MaxRanges for the max_ranges key, whose
// 0 turns ranges off.
func maxRanges(n int) int {
	if n == 0 {
		return -1
	}
	return n
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

// siteReport serves a document root's report to its site front end; nil
// for the other roles.
func (m *Mirror) siteReport(clock func() time.Time) http.Handler {
	if m.completions == nil {
		return nil
	}
	return frontend.ReportHandler(func() frontend.BackendReport {
		now := clock()
		r := m.reporter.Snapshot(now)
		c := m.cfg.Load().Site.Cache
		rep := frontend.BackendReport{Time: now, InFlight: r.Conns, RequestsPerSecond: r.R, BytesPerSecond: r.BytesPerSecond}
		if c.Memory > 0 {
			rep.CacheMemory, rep.CacheMaxObject = int64(c.Memory), int64(c.MaxObject)
		}
		return rep
	}, m.completions)
}

// Handler returns the public handler chain without the HTTP server's
// request metrics: the load Reporter around the Redirector around the
// content.
func (m *Mirror) Handler() http.Handler { return m.handler }

// AdminHandler returns the admin handler (api.LoadReport, api.Metrics,
// api.Healthy and the status page: /, /status.css, api.MirrorStatus).
func (m *Mirror) AdminHandler() http.Handler { return m.admin }

// Reporter returns the load Reporter that counts the public requests.
func (m *Mirror) Reporter() *probe.Reporter { return m.reporter }

// Joiner returns the mirror's own membership (join), nil without join:
// run it beside Run, and call its Leave before the public listeners stop.
func (m *Mirror) Joiner() *group.Joiner { return m.joiner }

// groupView returns the latest group view, nil when there is none.
func (m *Mirror) groupView() *api.GroupView {
	if m.view == nil {
		return nil
	}
	s := m.view.Snapshot()
	if s == nil {
		return nil
	}
	return &s.View
}

// View returns the group view watcher, nil when dnsd is not configured.
func (m *Mirror) View() *group.ViewWatcher { return m.view }

// Serve serves the public handler on ln until ctx is done, then drains
// (see Server.Serve). Call it once per public listener.
func (m *Mirror) Serve(ctx context.Context, ln net.Listener) error { return m.public.Serve(ctx, ln) }

// Run pushes load reports and refreshes the group view until ctx is done
// (nothing to do without dnsd); it returns nil then.
func (m *Mirror) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	if m.view != nil {
		g.Go(func() error { return m.view.Run(ctx) })
	}
	if m.pusher != nil {
		g.Go(func() error { return m.pusher.Run(ctx) })
	}
	<-ctx.Done()
	return g.Wait()
}

// Close releases the document root. Requests still in flight may fail
// after it; call it once every Serve has returned. It is idempotent.
func (m *Mirror) Close() error {
	m.closeOnce.Do(func() {
		if m.files != nil {
			m.closeErr = m.files.Close()
		}
	})
	return m.closeErr
}

// SiteServing is what the mirror needs of a site front end to know
// whether it can serve: a back end up (or not yet checked). The handler of
// frontend.New is one; New finds it in Options.Content. A mirror that is
// not serving answers api.Healthy (on both listeners) and api.LoadReport
// 503 and pushes no load reports, so that dnsd takes it out of the
// answers however it watches it.
type SiteServing interface {
	Serving() bool
}

// Serving reports whether the mirror can serve: always, except for a site
// front end whose back ends are all down (see SiteServing).
func (m *Mirror) Serving() bool { return m.serving == nil || m.serving() }

// HealthPath is answered 200 on the public listener too, so a site front
// end (or any load balancer) can check a mirror where it sends requests;
// 503 while it is not serving (SiteServing). It is not counted as load
// and never redirected.
const HealthPath = api.HealthyPath

// withHealth answers HealthPath in front of next; serving, when set, says
// whether to answer 200 or 503.
func withHealth(serving func() bool, next http.Handler) http.Handler {
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
