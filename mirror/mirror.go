package mirror

import (
	"context"
	"errors"
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
)

// Errors of the mirror's global role.
var (
	// ErrNeedsRestart is wrapped by the errors of a reload that changes a
	// key the running mirror can not change (see RestartChanges).
	ErrNeedsRestart = errors.New("needs a restart")
)

// Options are what NewMember and NewDispatcher need besides the Config. The zero value works.
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
// ViewWatcher (GROUP-QUERY). Build it with NewMember or NewDispatcher, run Run and one Serve per
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
	started     time.Time             // when it was built (Status)
	redirect    *group.Redirector
	handler     http.Handler // without the server's metrics
	public      *serve.Server
	admin       http.Handler // the admin handler; cmd/mirror serves it

	closeOnce sync.Once
	closeErr  error
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
// frontend.New is one; NewMember finds it in Options.Content. A mirror that is
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
