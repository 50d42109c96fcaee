package frontend

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/h1"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler/site"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Options configure the site front end built by New.
type Options struct {
	// Logger receives health flips and proxy errors (default: discard).
	Logger *slog.Logger
	// Registerer, when not nil, gets the front end's metrics
	// (transmirror_mirror_backend_*, ...). A handler built from a reloaded
	// config shares the collectors of the one it replaces; the label
	// values of a back end are deleted when the last handler that has it
	// is closed.
	Registerer prometheus.Registerer
	// Rand is the policy's random source, owned by the policy from then
	// on (default: a ChaCha8 source seeded from crypto/rand).
	Rand *rand.Rand
	// Now is the clock given to the policy (default time.Now).
	Now func() time.Time
	// Transport carries requests and health checks to the back ends
	// (default: a keep-alive http.Transport, see New). The
	// handler's Close closes its idle connections.
	Transport *http.Transport
	// Content is the content map of the back ends (ContentMembers), which
	// the caller runs; required by site.content, unused without it.
	Content ContentMap
	// NoFastPath sends every proxied request through
	// httputil.ReverseProxy (tests compare the two paths).
	NoFastPath bool
}

// Response header timeout and connection pool of the default transport.
const (
	dialTimeout           = 5 * time.Second
	responseHeaderTimeout = time.Minute
	maxIdleConnsPerHost   = 256
)

// handler is the site front end; see New.
type handler struct {
	tHigh     float64 // the load of a back end at its bandwidth, per weight
	adm       *admission
	mode      string
	keyQuery  bool // site.target_key path_query: the key has the query
	policy    site.Policy
	contents  ContentMap // site.content; nil without it
	backends  []*backend
	health    HealthConfig
	transport *http.Transport
	proxy     *httputil.ReverseProxy
	fast      bool        // every back end is plain HTTP: GET and HEAD take the fast path
	heads     headBuffers // the fast path's request heads
	m         *metrics
	log       *slog.Logger
	now       func() time.Time

	cancel    context.CancelFunc
	wg        sync.WaitGroup // health checks and followed handoffs
	closeOnce sync.Once

	hmu      sync.Mutex
	followed map[*net.UnixConn]struct{} // handoffs whose reports are read
	closing  bool
}

var (
	_ http.Handler = (*handler)(nil)
	_ io.Closer    = (*handler)(nil)
)

// backend is one back end and the front end's live view of it.
type backend struct {
	name     string
	url      *url.URL
	public   *url.URL // redirect mode
	socket   string   // handoff mode
	pool     *h1.Pool // the fast path's connections; nil for an https back end
	checkURL string
	weight   float64
	memory   int64

	active   atomic.Int64 // requests in flight (site.Backend.Active)
	routable atomic.Bool  // health is not down
	health   backendHealth

	reportURL string // admin_url + api.SiteReport; "" without admin_url
	rep       reported

	bandwidth float64  // bytes per second, 0 for no limit
	sent      byteRate // the bytes of its completed responses

	// Its series of picks (under the handler's policy) and of requests
	// in flight, looked up once (metrics.adopt), not per request.
	picks    prometheus.Counter
	inFlight prometheus.Gauge
}

// byteRateTau is the time constant of a back end's byte rate.
const byteRateTau = 2 * time.Second

// byteRate is an exponentially decaying rate of bytes: each completed
// response's size, decaying with time constant byteRateTau.
type byteRate struct {
	mu sync.Mutex
	v  float64 // bytes, decayed to at
	at time.Time
}

func (r *byteRate) add(n int64, now time.Time) {
	if n <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.v = r.decayed(now) + float64(n)
	if now.After(r.at) {
		r.at = now
	}
}

// perSecond returns the rate at now.
func (r *byteRate) perSecond(now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.decayed(now) / byteRateTau.Seconds()
}

func (r *byteRate) decayed(now time.Time) float64 {
	if dt := now.Sub(r.at); dt > 0 && r.v > 0 {
		return r.v * math.Exp(-float64(dt)/float64(byteRateTau))
	}
	return r.v
}

// bandwidthLoad is b's bandwidth fraction at now in the policies' load
// units: t_high requests in flight per unit of weight at 100%; 0
// without a bandwidth.
func (h *handler) bandwidthLoad(b *backend, now time.Time) float64 {
	if b.bandwidth <= 0 {
		return 0
	}
	w := b.weight
	if w <= 0 {
		w = DefaultWeight
	}
	return b.sent.perSecond(now) / b.bandwidth * h.tHigh * w
}

// reported is what the front end knows from a back end's reports, and
// the redirects issued since the last one (redirect mode).
type reported struct {
	mu        sync.Mutex
	at        time.Time // zero: no report yet
	inFlight  float64
	service   time.Duration // mean time a request is in flight
	memory    int64
	maxObject int64
	next      uint64  // completions to ask after
	pending   float64 // redirects since the report still in flight, as of pendingAt
	pendingAt time.Time
	warned    bool // the reported cache differs from the configured one: logged
}

// Bounds and default of a back end's mean service time (Little's law:
// in flight / requests per second), for the redirects issued since its
// last report.
const (
	minService     = time.Millisecond
	maxService     = 10 * time.Second
	defaultService = 100 * time.Millisecond
)

// load returns b's in-flight estimate at now in redirect mode: the
// reported count plus the redirects since, each decaying over the mean
// service time.
func (r *reported) load(now time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight + r.pendingAt0(now)
}

// pendingAt0 is the pending redirects decayed to now; the caller holds mu.
func (r *reported) pendingAt0(now time.Time) float64 {
	if r.pending == 0 {
		return 0
	}
	dt := now.Sub(r.pendingAt)
	if dt <= 0 {
		return r.pending
	}
	return r.pending * math.Exp(-float64(dt)/float64(r.serviceTime()))
}

func (r *reported) serviceTime() time.Duration {
	if r.service <= 0 {
		return defaultService
	}
	return r.service
}

// redirected counts one redirect to the back end at now.
func (r *reported) redirected(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = r.pendingAt0(now) + 1
	r.pendingAt = now
}

// cache returns the reported memory and max object size, 0 when unknown.
func (r *reported) cache() (memory, maxObject int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.memory, r.maxObject
}

// New returns the site front end for backends with cfg's policy, mode
// and health checks (cfg and backends as Check leaves them; zero fields
// of cfg take their defaults), and a Closer that stops the
// health checks and closes idle back-end connections (call it after the
// servers using the handler have stopped).
//
// For each request the policy picks among the back ends that are not
// down, given a site.Request with Key = RequestKey (the escaped path;
// under site.target_key: path_query a digest of the query too, never the
// query), Client = the remote address and Size = 0 (unknown), and the
// number of requests each back end has in flight. With site.content it
// is also given site.Request.Has, the back ends that hold the request's
// file (see content.go). When every back end is down the front end fails
// open and picks among all of them
// (transmirror_mirror_all_backends_down_total). The pick is handed over
// by cfg.Mode:
//
//   - proxy: the request is streamed through httputil.ReverseProxy with
//     X-Forwarded-For (the client address only: what the client sent is
//     dropped), X-Forwarded-Host, X-Forwarded-Proto and Forwarded set; the
//     back end sees its own host name in Host. Bodies are never buffered.
//     A GET or HEAD without a body that fails on the back end before a
//     response arrives (dial error, refused, reset, timeout) is retried
//     once on another back end, which the policy picks with the failed
//     one excluded; nothing has been sent to the client by then. After
//     that, or for other methods, the client gets 502 (504 on timeout).
//   - redirect: 302 to the back end's public_url + path + query, with
//     Cache-Control: no-store, so that the client asks the front end
//     again next time.
//   - handoff: the client connection itself is passed to the back end
//     process (see ListenHandoff); the response goes from the back end
//     straight to the client.
//
// Policy.Done is called when the request completes, with the response's
// Content-Length (200 only) or the bytes relayed as its Size, 0 when
// neither is known (redirect, handoff).
func New(cfg Config, backends []Backend, o Options) (http.Handler, io.Closer, error) {
	if len(backends) == 0 {
		return nil, nil, errors.New("frontend: no back ends")
	}
	sc := cfg
	if sc.Policy.Name == "" {
		sc.Policy.Name = DefaultPolicy
	}
	if sc.Mode == "" {
		sc.Mode = ModeProxy
	}
	contents, err := contentMap(sc, o)
	if err != nil {
		return nil, nil, err
	}
	if o.Rand == nil {
		var seed [32]byte
		if _, err := crand.Read(seed[:]); err != nil {
			return nil, nil, fmt.Errorf("frontend: seed: %w", err)
		}
		o.Rand = rand.New(rand.NewChaCha8(seed))
	}
	pol, err := site.New(sc.Policy.Name, sc.Policy.Params(), o.Rand)
	if err != nil {
		return nil, nil, fmt.Errorf("frontend: %w", err)
	}
	tHigh := sc.Policy.Params().THigh
	if tHigh <= 0 {
		tHigh = site.DefaultParams().THigh
	}
	h := &handler{
		tHigh:     tHigh,
		adm:       newAdmission(sc, backends),
		mode:      sc.Mode,
		keyQuery:  sc.TargetKey == TargetKeyPathQuery,
		policy:    pol,
		contents:  contents,
		health:    withHealthDefaults(sc.Health),
		transport: o.Transport,
		log:       o.Logger,
		now:       o.Now,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if h.transport == nil {
		h.transport = newTransport()
	}
	for _, bc := range backends {
		b, err := newBackend(bc, h.health, sc.Mode)
		if err != nil {
			return nil, nil, err
		}
		h.backends = append(h.backends, b)
	}
	h.fast = !o.NoFastPath
	for _, b := range h.backends {
		h.fast = h.fast && b.pool != nil
	}
	h.m = newMetrics()
	if o.Registerer != nil {
		if h.m, err = probe.RegisterShared(o.Registerer, h.m); err != nil {
			return nil, nil, fmt.Errorf("frontend: register metrics: %w", err)
		}
	}
	h.m.adopt(pol.Name(), h.backends)
	h.adm.m = h.m
	h.m.follow(h)
	h.m.admissionLimit.Set(float64(h.adm.limit))
	h.proxy = h.newProxy()
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	for _, b := range h.backends {
		h.wg.Go(func() { h.runHealthChecks(ctx, b) })
	}
	return h, h, nil
}

// newProxy returns the reverse proxy of the proxy mode, over h's picks
// and retries.
func (h *handler) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      retryTransport{h},
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.proxyError,
		ErrorLog:       slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		BufferPool:     newBufferPool(),
		// Flush after every write: what the back end sent is on its way
		// to the client before the next read (writes of a whole buffer
		// bypass the response's small buffers anyway).
		FlushInterval: -1,
	}
}

// newTransport returns the keep-alive transport to the back ends.
func newTransport() *http.Transport {
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           d.DialContext,
		MaxIdleConns:          0, // per host only
		MaxIdleConnsPerHost:   maxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: responseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		WriteBufferSize:       32 << 10,
		ReadBufferSize:        32 << 10,
	}
}

// withHealthDefaults fills the zero fields of a health config that did
// not go through Check.
func withHealthDefaults(c HealthConfig) HealthConfig {
	if c.Path == "" {
		c.Path = DefaultHealthPath
	}
	if c.Interval <= 0 {
		c.Interval = yamlconf.Duration(DefaultHealthInterval)
	}
	if c.Timeout <= 0 {
		c.Timeout = yamlconf.Duration(DefaultHealthTimeout)
	}
	if c.Rise <= 0 {
		c.Rise = DefaultHealthRise
	}
	if c.Fall <= 0 {
		c.Fall = DefaultHealthFall
	}
	return c
}

func newBackend(bc Backend, hc HealthConfig, mode string) (*backend, error) {
	u, err := url.Parse(bc.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("frontend: back end %q: bad url %q", bc.Name, bc.URL)
	}
	b := &backend{
		name:      bc.Name,
		url:       u,
		socket:    bc.HandoffSocket,
		checkURL:  targetURL(u, &url.URL{Path: hc.Path}).String(),
		weight:    bc.Weight,
		memory:    int64(bc.Memory),
		bandwidth: bc.Bandwidth.BytesPerSecond(),
		health:    backendHealth{rise: hc.Rise, fall: hc.Fall, passive: hc.PassiveErrors},
	}
	if bc.PublicURL != "" {
		if b.public, err = url.Parse(bc.PublicURL); err != nil {
			return nil, fmt.Errorf("frontend: back end %q: bad public_url %q", bc.Name, bc.PublicURL)
		}
	}
	switch {
	case mode == ModeRedirect && b.public == nil:
		return nil, fmt.Errorf("frontend: back end %q: redirect mode needs public_url", bc.Name)
	case mode == ModeHandoff && b.socket == "":
		return nil, fmt.Errorf("frontend: back end %q: handoff mode needs handoff_socket", bc.Name)
	}
	if bc.AdminURL != "" {
		au, err := url.Parse(bc.AdminURL)
		if err != nil || au.Host == "" {
			return nil, fmt.Errorf("frontend: back end %q: bad admin_url %q", bc.Name, bc.AdminURL)
		}
		b.reportURL = targetURL(au, &url.URL{Path: api.SiteReport.Path()}).String()
	}
	if u.Scheme == "http" {
		b.pool = h1.NewPool(hostPort(u), h1.PoolOptions{MaxIdle: maxIdleConnsPerHost, DialTimeout: dialTimeout})
	}
	b.routable.Store(true)
	return b, nil
}

// hostPort is u's host with its port, 80 when it has none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// Close stops the health checks, closes idle back-end connections and
// removes the metric label values of back ends no other handler has. It
// is idempotent.
func (h *handler) Close() error {
	h.closeOnce.Do(func() {
		h.cancel()
		h.stopFollowing()
		h.wg.Wait()
		h.transport.CloseIdleConnections()
		for _, b := range h.backends {
			if b.pool != nil {
				b.pool.Close()
			}
		}
		h.m.unfollow(h)
		h.m.release(h.policy.Name(), h.backends)
	})
	return nil
}

// policyRequest is what the policy is told about r: its key is
// RequestKey(r.URL, withQuery) (site.target_key).
func policyRequest(r *http.Request, withQuery bool) site.Request {
	req := site.Request{Key: RequestKey(r.URL, withQuery)}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		req.Client = ap.Addr().Unmap()
	}
	return req
}

// pick asks the policy for a back end other than exclude and counts the
// request in flight on it; release undoes that. When no back end that
// holds the file (req.Has) is up, a first pick goes to the policy without
// req.Has; a retry (exclude) does not.
func (h *handler) pick(req site.Request, exclude *backend) (*backend, error) {
	bs := make([]site.Backend, len(h.backends))
	anyUp := false
	now := h.now()
	for i, b := range h.backends {
		up := b != exclude && b.routable.Load()
		bs[i] = site.Backend{Name: b.name, Weight: b.weight, MemoryBytes: b.memory, Up: up, Active: int(b.active.Load())}
		if b.reportURL != "" {
			if mem, maxObj := b.rep.cache(); mem > 0 {
				bs[i].MemoryBytes, bs[i].MaxObjectBytes = mem, maxObj
			}
			if h.mode == ModeRedirect {
				bs[i].Active = int(math.Round(b.rep.load(now)))
			}
		}
		if bw := h.bandwidthLoad(b, now); bw > float64(bs[i].Active) {
			bs[i].Active = int(math.Ceil(bw))
		}
		anyUp = anyUp || up
	}
	if !anyUp {
		// Every back end is down: fail open rather than answer nothing;
		// health checks can be wrong, and a failed try costs one 502.
		n := 0
		for i, b := range h.backends {
			if b != exclude {
				bs[i].Up = true
				n++
			}
		}
		if n == 0 {
			return nil, site.ErrNoBackend
		}
		h.m.allDown.Inc()
	}
	i, err := h.policy.Pick(req, bs, now)
	if errors.Is(err, site.ErrNoBackend) && req.Has != nil && exclude == nil {
		// Every back end that holds the file is down: the usual pick.
		h.m.contentHoldersDown.Inc()
		req.Has = nil
		i, err = h.policy.Pick(req, bs, now)
	}
	if err != nil {
		return nil, err
	}
	b := h.backends[i]
	b.active.Add(1)
	b.picks.Inc()
	b.inFlight.Inc()
	return b, nil
}

// begin counts a request in flight on b that the policy did not pick (a
// further request on a handed-off connection); release ends it.
func (h *handler) begin(b *backend) {
	b.active.Add(1)
	b.inFlight.Inc()
}

// release ends a request on b that pick or begin started and tells the
// policy, with the response size when known.
func (h *handler) release(b *backend, req site.Request, size int64) {
	b.active.Add(-1)
	b.inFlight.Dec()
	req.Size = size
	now := h.now()
	b.sent.add(size, now)
	h.policy.Done(req, b.name, now)
}

// targetURL is in (a request's path and query) on base: base's scheme and
// host, base's path followed by in's path, base's query before in's.
func targetURL(base, in *url.URL) *url.URL {
	u := &url.URL{
		Scheme:   base.Scheme,
		Host:     base.Host,
		Path:     in.Path,
		RawPath:  in.RawPath,
		RawQuery: in.RawQuery,
	}
	if p := strings.TrimSuffix(base.Path, "/"); p != "" {
		u.Path = p + in.Path
		if in.RawPath != "" || base.RawPath != "" {
			u.RawPath = strings.TrimSuffix(base.EscapedPath(), "/") + in.EscapedPath()
		}
	}
	switch {
	case base.RawQuery == "":
	case u.RawQuery == "":
		u.RawQuery = base.RawQuery
	default:
		u.RawQuery = base.RawQuery + "&" + u.RawQuery
	}
	return u
}

// bufferPool recycles ReverseProxy's copy buffers.
type bufferPool struct{ p sync.Pool }

var _ httputil.BufferPool = (*bufferPool)(nil)

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (p *bufferPool) Get() []byte { return *(p.p.Get().(*[]byte)) }

func (p *bufferPool) Put(b []byte) {
	if cap(b) >= 32<<10 {
		b = b[:32<<10]
		p.p.Put(&b)
	}
}
