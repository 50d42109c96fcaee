package contentmap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/probe/api"
)

// Defaults of Options.
const (
	// DefaultInterval is how often a member's index is asked for.
	DefaultInterval = 30 * time.Second
	// DefaultConcurrency bounds the fetches in flight.
	DefaultConcurrency = 8
	// DefaultTimeout bounds one fetch (a whole index of a million files
	// is tens of megabytes).
	DefaultTimeout = time.Minute
	// DefaultNotFoundBackoff is how long a member that answered 404
	// (content.index off) is left alone.
	DefaultNotFoundBackoff = 10 * time.Minute
	// DefaultMinRefresh is the least time between two fetches of one
	// member that Refresh starts.
	DefaultMinRefresh = time.Second
	// maxWait is the longest Run sleeps, so that a new member is fetched
	// within it.
	maxWait = 5 * time.Second
)

// ErrOptions is why New refused its options.
var ErrOptions = errors.New("content: options")

// Member is one member of a group as the map needs it.
type Member struct {
	Group, Name string
	// Probe is the member's probe URL ("" for a push-only member, which
	// has no index here).
	Probe string
	// PublicOnly fetches on public addresses only (probe.PublicOnly).
	PublicOnly bool
}

// Options configure New; a zero field takes its default.
type Options struct {
	// Subsystem is the daemon whose metrics these are ("dnsd",
	// "mirror"): transmirror_<Subsystem>_content_fetch_errors_total
	// (required).
	Subsystem string
	// Client fetches the indexes (required): dnsd's probe client.
	Client *http.Client
	// Members returns the members of every group (required).
	Members func() []Member
	// Registry registers the metrics; nil registers none.
	Registry prometheus.Registerer
	// Logger gets a member's fetches going wrong (once, with why) and
	// coming right again (default: discard).
	Logger *slog.Logger
	// Now is the clock (default time.Now); Rand draws the jitter
	// (default a random seed).
	Now  func() time.Time
	Rand *rand.Rand
	// Interval between the fetches of one member (DefaultInterval), plus
	// a random delay of at most Jitter (default Interval/10).
	Interval, Jitter time.Duration
	// Timeout bounds one fetch (DefaultTimeout).
	Timeout time.Duration
	// NotFoundBackoff is how long a member that has no index is left
	// alone (DefaultNotFoundBackoff).
	NotFoundBackoff time.Duration
	// MinRefresh is the least time between two fetches of one member
	// that Refresh starts (DefaultMinRefresh).
	MinRefresh time.Duration
	// Concurrency bounds the fetches in flight (DefaultConcurrency).
	Concurrency int
	// Limits bound what one member's index may be.
	Limits content.Limits
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.Client == nil:
		return o, fmt.Errorf("%w: Client is required", ErrOptions)
	case o.Members == nil:
		return o, fmt.Errorf("%w: Members is required", ErrOptions)
	case o.Subsystem == "":
		return o, fmt.Errorf("%w: Subsystem is required", ErrOptions)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Rand == nil {
		o.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	o.Interval = cmp(o.Interval, DefaultInterval)
	o.Jitter = cmp(o.Jitter, o.Interval/10)
	o.Timeout = cmp(o.Timeout, DefaultTimeout)
	o.NotFoundBackoff = cmp(o.NotFoundBackoff, DefaultNotFoundBackoff)
	o.MinRefresh = cmp(o.MinRefresh, DefaultMinRefresh)
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	return o, nil
}

// cmp is d, or def when d is not positive.
func cmp(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Map is the content map: a copy of each reachable member's index.
type Map struct {
	o       Options
	metrics *metrics
	sem     chan struct{} // a slot of each fetch in flight

	mu      sync.Mutex
	members map[key]*member
}

type key struct{ group, member string }

// member is one member's copy and when to fetch it next.
type member struct {
	spec    Member
	url     string // "" when it has no index URL
	replica *content.Replica
	next    time.Time
	last    time.Time     // when the last fetch started
	done    chan struct{} // closed when the fetch in flight ends; nil: none
	failing bool          // the last fetch failed (not a 429): logged once
	known   bool          // a fetch has succeeded: the copy is the member's index
}

// New returns an empty Map; Run (or Poll) fills it.
func New(o Options) (*Map, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	met, err := newMetrics(o.Registry, o.Subsystem)
	if err != nil {
		return nil, err
	}
	return &Map{o: o, metrics: met, sem: make(chan struct{}, o.Concurrency), members: map[key]*member{}}, nil
}

// IndexURL is the index URL of a member with probe URL probe: its path's
// final /v1/load replaced by /v1/content/index (or that path at the root
// when it does not end so), the same scheme, host and port, no query; ""
// for no probe URL or one that does not parse.
func IndexURL(probe string) string {
	u, err := url.Parse(probe)
	if probe == "" || err != nil || u.Host == "" {
		return ""
	}
	idx := api.ContentIndex.Path()
	if p, ok := strings.CutSuffix(u.Path, api.LoadReport.Path()); ok {
		idx = p + idx
	}
	u.Path, u.RawPath, u.RawQuery, u.Fragment = idx, "", "", ""
	return u.String()
}

// sync makes the members those of o.Members: new ones are due at once,
// one whose probe URL changed starts a new copy, gone ones are forgotten.
func (m *Map) sync() {
	want := map[key]Member{}
	for _, s := range m.o.Members() {
		want[key{s.Group, s.Name}] = s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	groups := map[string]bool{}
	for k, s := range want {
		groups[k.group] = true
		if old, ok := m.members[k]; ok && old.spec == s {
			continue
		}
		m.members[k] = &member{spec: s, url: IndexURL(s.Probe), replica: content.NewReplica(m.o.Limits)}
	}
	for k := range m.members {
		if _, ok := want[k]; !ok {
			delete(m.members, k)
			if !groups[k.group] {
				m.metrics.forget(k.group)
			}
		}
	}
}

// Poll brings the members up to date with o.Members, fetches every
// member that is due, at most Concurrency at once, and returns when they
// are done.
func (m *Map) Poll(ctx context.Context) {
	var wg sync.WaitGroup
	m.start(ctx, &wg)
	wg.Wait()
}

// Run polls until ctx is done, waking at least every few seconds to
// follow the members; a slow member delays no other's fetch (each member
// has at most one in flight). It returns when the fetches in flight have
// ended.
func (m *Map) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		m.start(ctx, &wg)
		t := time.NewTimer(min(maxWait, m.o.Interval))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// start brings the members up to date with o.Members and starts a fetch
// of every member that is due and has none in flight, each waiting for
// one of Concurrency slots.
func (m *Map) start(ctx context.Context, wg *sync.WaitGroup) {
	m.sync()
	now := m.o.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mb := range m.members {
		if mb.url == "" || mb.done != nil || now.Before(mb.next) {
			continue
		}
		m.launch(ctx, wg, mb, now)
	}
}

// launch starts a fetch of mb, which has none in flight; m.mu is held.
func (m *Map) launch(ctx context.Context, wg *sync.WaitGroup, mb *member, now time.Time) {
	done := make(chan struct{})
	mb.done, mb.last = done, now
	wg.Go(func() {
		defer close(done)
		select {
		case m.sem <- struct{}{}:
		case <-ctx.Done():
			m.mu.Lock()
			mb.done = nil
			m.mu.Unlock()
			return
		}
		defer func() { <-m.sem }()
		m.fetch(ctx, mb)
	})
}

// Refresh brings the copies of group's members up to date now, for a
// request that no member's copy holds: it fetches every member of group
// with an index URL whose last fetch started at least MinRefresh ago
// (and joins a fetch in flight), and returns when they have ended or ctx
// is done. However often it is called, a member is asked at most once per
// MinRefresh, and mostly answers 304.
func (m *Map) Refresh(ctx context.Context, group string) {
	var wg sync.WaitGroup
	var wait []chan struct{}
	now := m.o.Now()
	m.mu.Lock()
	for k, mb := range m.members {
		switch {
		case k.group != group || mb.url == "":
			continue
		case mb.done == nil && now.Sub(mb.last) >= m.o.MinRefresh:
			m.launch(ctx, &wg, mb, now)
		}
		if mb.done != nil {
			wait = append(wait, mb.done)
		}
	}
	m.mu.Unlock()
	for _, d := range wait {
		select {
		case <-d:
		case <-ctx.Done():
			return
		}
	}
}
