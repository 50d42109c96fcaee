package group

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
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
	// URLs are the admin base URLs of dnsd (at least one); reports go to
	// their api.PushLoad route, a dispatcher's to api.PushRedirects.
	URLs []string
	// One pushes each report to one URL only, the last that accepted one,
	// trying the next ones in turn when it fails (dnsd.push: one); false
	// pushes it to every URL (dnsd.push: all, and always a dispatcher's
	// redirect reports, which an NS set does not share).
	One bool
	// Group and Member name this mirror (required; a dispatcher, which is
	// no member, has no Member and pushes Redirects instead).
	Group, Member string
	// Secret is the group's push secret (required).
	Secret []byte
	// Interval is the time between pushes (default DefaultPushInterval).
	Interval time.Duration
	// Timeout bounds one push to one URL (default the smaller of Interval
	// and DefaultPushTimeout).
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
	// Logger gets failures, once per failing spell of each URL (default:
	// discard).
	Logger *slog.Logger
	// Registerer, when set, gets transmirror_mirror_pushes_total{dnsd,result}
	// and transmirror_mirror_push_last_success_timestamp_seconds{dnsd}, dnsd
	// being the URL's index in URLs ("0" for the first).
	Registerer prometheus.Registerer
}

// Pusher is LOAD-INFORM: it POSTs this mirror's signed load report to dnsd
// every interval, to every URL or to one of them (PusherOptions.One). A
// failing push is counted and retried at the next tick; the first failure
// of a spell is logged at Warn, the recovery at Info, for each URL apart.
type Pusher struct {
	o       PusherOptions
	targets []*pushTarget
	log     *slog.Logger

	pushes *prometheus.CounterVec
	lastOK *prometheus.GaugeVec
	mu     sync.Mutex // one push at a time; guards cur and the spells
	cur    int        // with One: the target tried first
}

// pushTarget is one dnsd that reports go to.
type pushTarget struct {
	label  string // the URL's index, the dnsd label
	api    *api.Client
	target string // the push URL, for logs
	spell  spell
}

// NewPusher checks o and returns a Pusher.
func NewPusher(o PusherOptions) (*Pusher, error) {
	switch {
	case len(o.URLs) == 0:
		return nil, errors.New("mirror: pusher: a dnsd URL is required")
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
	p := &Pusher{
		o:   o,
		log: o.Logger,
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "pushes_total",
			Help: "Load reports pushed to dnsd, by dnsd (the index of its URL) and result (ok, unauthorized, rejected, server_error, network, not_serving).",
		}, []string{"dnsd", "result"}),
		lastOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "mirror", Name: "push_last_success_timestamp_seconds",
			Help: "When a load report was last accepted by dnsd (the index of its URL), in seconds since the epoch (0: never).",
		}, []string{"dnsd"}),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	for i, u := range o.URLs {
		c, err := api.NewClient(u, api.ClientOptions{HTTP: o.Client, Secret: o.Secret, Clock: o.Clock})
		if err != nil {
			return nil, fmt.Errorf("mirror: pusher: %w", err)
		}
		t := &pushTarget{label: strconv.Itoa(i), api: c, target: c.URL(api.PushLoad, o.Group, o.Member)}
		if o.Redirects != nil {
			t.target = c.URL(api.PushRedirects, o.Group)
		}
		t.spell = spell{log: p.log, what: "load push", target: t.target}
		p.targets = append(p.targets, t)
		for _, r := range []string{pushOK, pushUnauthorized, pushRejected, pushServerError, pushNetwork, pushNotServing} {
			p.pushes.WithLabelValues(t.label, r)
		}
		p.lastOK.WithLabelValues(t.label)
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

// Push sends one report now, each attempt bounded by the push timeout, and
// returns why it failed, if it did: to every URL (nil when all accepted
// it), or with One to the URL that last accepted one and, when that fails,
// to the next ones in turn until one accepts it (nil then). Each attempt
// is counted and a change between failing and working is logged, by URL.
func (p *Pusher) Push(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.o.Serving != nil && !p.o.Serving() {
		// Counted once, on the URL it would have gone to first.
		t := p.targets[p.cur]
		p.pushes.WithLabelValues(t.label, pushNotServing).Inc()
		t.spell.note(ctx, pushNotServing, ErrNotServing)
		return ErrNotServing
	}
	now := p.o.Clock()
	body := p.body(now)
	if p.o.One {
		var errs []error
		for k := range p.targets {
			i := (p.cur + k) % len(p.targets)
			if err := p.pushTo(ctx, p.targets[i], body, now); err != nil {
				errs = append(errs, err)
				continue
			}
			p.cur = i
			return nil
		}
		return errors.Join(errs...)
	}
	errs := make([]error, len(p.targets))
	var wg sync.WaitGroup
	for i, t := range p.targets {
		wg.Go(func() { errs[i] = p.pushTo(ctx, t, body, now) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pushBody is what one push sends, the same to every URL: it sends its
// report (a load report, or a dispatcher's redirect report) with the
// client of one dnsd.
type pushBody func(ctx context.Context, c *api.Client) error

// body returns what one push sends: the report of now.
func (p *Pusher) body(now time.Time) pushBody {
	if p.o.Redirects != nil {
		r := p.o.Redirects(now)
		return func(ctx context.Context, c *api.Client) error { return c.PushRedirects(ctx, p.o.Group, r) }
	}
	r := p.o.Snapshot(now)
	return func(ctx context.Context, c *api.Client) error { return c.PushLoad(ctx, r) }
}

// pushTo sends body to t and counts and notes the outcome.
func (p *Pusher) pushTo(ctx context.Context, t *pushTarget, body pushBody, now time.Time) error {
	result, err := p.send(ctx, t, body)
	if err == nil {
		p.lastOK.WithLabelValues(t.label).Set(float64(now.UnixNano()) / 1e9)
	}
	p.pushes.WithLabelValues(t.label, result).Inc()
	t.spell.note(ctx, result, err)
	return err
}

// send sends body to t within the push timeout and returns the result
// label of the outcome.
func (p *Pusher) send(ctx context.Context, t *pushTarget, body pushBody) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, p.o.Timeout)
	defer cancel()
	err := body(ctx, t.api)
	var se *api.StatusError
	switch {
	case err == nil:
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
