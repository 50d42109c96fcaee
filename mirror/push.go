package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

// DefaultPushTimeout bounds one push (and one view refresh) when the
// interval is longer.
const DefaultPushTimeout = 5 * time.Second

// Results of a push, the values of the result label of
// transmirror_mirror_pushes_total.
const (
	pushOK           = "ok"           // 2xx
	pushUnauthorized = "unauthorized" // 401, 403: wrong secret or clock
	pushRejected     = "rejected"     // any other 4xx
	pushServerError  = "server_error" // 5xx or another status
	pushNetwork      = "network"      // no answer: connect, timeout, reset
	pushNotServing   = "not_serving"  // not sent: no back end up (SiteServing)
)

// PusherOptions configure a Pusher.
type PusherOptions struct {
	// URL is dnsd's admin base URL (required); reports go to its
	// api.PushLoad route, a dispatcher's to api.PushRedirects.
	URL string
	// Group and Member name this mirror (required; a dispatcher, which is
	// no member, has no Member and pushes Redirects instead).
	Group, Member string
	// Secret is the group's push secret (required).
	Secret []byte
	// Interval is the time between pushes (default DefaultPushInterval).
	Interval time.Duration
	// Timeout bounds one push (default the smaller of Interval and
	// DefaultPushTimeout).
	Timeout time.Duration
	// Snapshot makes the report to push, usually probe.Reporter.Snapshot
	// (required unless Redirects); the report names Group and Member.
	Snapshot func(now time.Time) probe.Report
	// Serving, when set and false, skips the push (counted as
	// not_serving): a site front end with no back end up reports nothing,
	// so that dnsd's pushes go stale and its pull (api.LoadReport, 503
	// then) takes the member out.
	Serving func() bool
	// Redirects makes a dispatcher's report of the redirects it sends
	// (api.RedirectReport), pushed instead of a load report.
	Redirects func(now time.Time) api.RedirectReport
	// Client sends the pushes (default: api.Client's, which follows no
	// redirect).
	Client *http.Client
	// Clock gives the time of reports and signatures (default time.Now).
	Clock func() time.Time
	// Logger gets failures, once per failing spell (default: discard).
	Logger *slog.Logger
	// Registerer, when set, gets transmirror_mirror_pushes_total{result}
	// and transmirror_mirror_push_last_success_timestamp_seconds.
	Registerer prometheus.Registerer
}

// Pusher is LOAD-INFORM: it POSTs this mirror's signed load report to dnsd
// every interval. A failing push is counted and retried at the next tick;
// the first failure of a spell is logged at Warn, the recovery at Info.
type Pusher struct {
	o      PusherOptions
	api    *api.Client
	target string // for logs
	log    *slog.Logger

	pushes *prometheus.CounterVec
	lastOK prometheus.Gauge
	mu     sync.Mutex // one push at a time; guards spell
	spell  spell
}

// NewPusher checks o and returns a Pusher.
func NewPusher(o PusherOptions) (*Pusher, error) {
	switch {
	case o.Redirects != nil && (o.Group == "" || len(o.Secret) == 0):
		return nil, errors.New("mirror: pusher: group and secret are required")
	case o.Redirects == nil && (o.Group == "" || o.Member == "" || len(o.Secret) == 0 || o.Snapshot == nil):
		return nil, errors.New("mirror: pusher: group, member, secret and snapshot are required")
	}
	if o.Interval <= 0 {
		o.Interval = DefaultPushInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = min(o.Interval, DefaultPushTimeout)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	c, err := api.NewClient(o.URL, api.ClientOptions{HTTP: o.Client, Secret: o.Secret, Clock: o.Clock})
	if err != nil {
		return nil, fmt.Errorf("mirror: pusher: %w", err)
	}
	target := c.URL(api.PushLoad, o.Group, o.Member)
	if o.Redirects != nil {
		target = c.URL(api.PushRedirects, o.Group)
	}
	p := &Pusher{
		o:      o,
		api:    c,
		target: target,
		log:    o.Logger,
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "pushes_total",
			Help: "Load reports pushed to dnsd, by result (ok, unauthorized, rejected, server_error, network, not_serving).",
		}, []string{"result"}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "push_last_success_timestamp_seconds",
			Help: "When a load report was last accepted by dnsd, in seconds since the epoch (0: never).",
		}),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.spell = spell{log: p.log, what: "load push", target: p.target}
	for _, r := range []string{pushOK, pushUnauthorized, pushRejected, pushServerError, pushNetwork, pushNotServing} {
		p.pushes.WithLabelValues(r)
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{p.pushes, p.lastOK} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("mirror: pusher: register metrics: %w", err)
			}
		}
	}
	return p, nil
}

// Run pushes at once and then every interval until ctx is done; it
// returns nil then. Failures do not stop it.
func (p *Pusher) Run(ctx context.Context) error {
	every(ctx, p.o.Interval, func(ctx context.Context) { _ = p.Push(ctx) }) // counted and logged by Push
	return nil
}

// Push sends one report now, bounded by the push timeout, and returns why
// it failed, if it did. The result is counted and a change between
// failing and working is logged.
func (p *Pusher) Push(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	result, err := p.push(ctx)
	p.pushes.WithLabelValues(result).Inc()
	p.spell.note(ctx, result, err)
	return err
}

func (p *Pusher) push(ctx context.Context) (string, error) {
	if p.o.Serving != nil && !p.o.Serving() {
		return pushNotServing, ErrNotServing
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	now := p.o.Clock()
	var err error
	if p.o.Redirects != nil {
		err = p.api.PushRedirects(ctx, p.o.Group, p.o.Redirects(now))
	} else {
		err = p.api.PushLoad(ctx, p.o.Snapshot(now))
	}
	var se *api.StatusError
	switch {
	case err == nil:
		p.lastOK.Set(float64(now.UnixNano()) / 1e9)
		return pushOK, nil
	case errors.As(err, &se):
		result := pushServerError
		switch c := se.Code; {
		case c == http.StatusUnauthorized || c == http.StatusForbidden:
			result = pushUnauthorized
		case c >= 400 && c < 500:
			result = pushRejected
		}
		return result, fmt.Errorf("%w: %w", ErrPushRefused, err)
	case errors.Is(err, api.ErrTransport):
		return pushNetwork, fmt.Errorf("mirror: push: %w", err)
	}
	return pushRejected, fmt.Errorf("mirror: push: %w", err)
}
