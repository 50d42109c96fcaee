package probe

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultReportWindow is the default width of a Reporter's sliding window.
const DefaultReportWindow = 10 * time.Second

// reporterBuckets is the number of buckets of a Reporter's sliding window.
const reporterBuckets = 10

// ReporterConfig configures a Reporter.
type ReporterConfig struct {
	// Group and Member name the reporting mirror (required).
	Group, Member string
	// Capacity is the member's configured capacity, in load units (>= 0).
	Capacity float64
	// Bandwidth is the member's configured bandwidth, in bytes per second
	// (>= 0; 0 is no limit).
	Bandwidth float64
	// Window is the sliding window that rates are taken over (default
	// DefaultReportWindow, at least 10 ms).
	Window time.Duration
	// RunQueue returns the host's run-queue length (default ReadRunQueue).
	RunQueue func() (float64, error)
	// RunQueueInFlight makes m the requests in flight through this
	// Reporter at the time of the report, instead of RunQueue's figure: a
	// run queue of the process's own, for a mirror whose host's load
	// average is not its own (a host shared with other work).
	RunQueueInFlight bool
	// Serving, when set, gives the rate of the requests served (not
	// redirected) at now, exponentially weighted over about a second: the
	// report's serving_load is 10·(Serving + m). Nil leaves it out.
	Serving func(now time.Time) float64
	// Generation, when set, gives the member's generation for each report
	// (Trace.Generation); zero, or nil, leaves it out.
	Generation func() time.Time
	// Schemes are the schemes the member serves (Report.Schemes); nil
	// leaves them out.
	Schemes []string
	// CertNotAfter, when set, gives Report.CertNotAfter for each report.
	CertNotAfter func() time.Time
	// Clock returns the time of a completed request and of a report served
	// over HTTP (default time.Now).
	Clock func() time.Time
	// Logger gets run-queue read failures, once per failing spell (default
	// discards).
	Logger *slog.Logger
}

// Reporter measures a mirror's load and makes its Reports: the HTTP server
// counts requests through Wrap (or RequestStarted and RequestDone), and
// Snapshot or ServeHTTP turn the counts of the sliding window into rates.
// A Reporter is safe for concurrent use.
type Reporter struct {
	cfg   ReporterConfig
	width int64 // bucket width, ns
	start time.Time

	inFlight  atomic.Int64
	seq       atomic.Uint64
	capacity  atomic.Uint64              // math.Float64bits of the capacity; see SetCapacity
	bandwidth atomic.Uint64              // math.Float64bits of the bandwidth; see SetBandwidth
	paths     atomic.Pointer[pathSource] // see SetPaths

	mu      sync.Mutex
	buckets [reporterBuckets]bucket
	lastM   float64
	rqErr   bool // the last run-queue read failed
}

type bucket struct {
	epoch                             int64
	requests, bytes, redirects, group int64
}

var _ http.Handler = (*Reporter)(nil)

// NewReporter returns a Reporter for cfg, with its window starting now by
// cfg.Clock.
func NewReporter(cfg ReporterConfig) (*Reporter, error) {
	if err := checkName(cfg.Group); err != nil {
		return nil, fmt.Errorf("%w: group: %w", ErrInvalidSpec, err)
	}
	if err := checkName(cfg.Member); err != nil {
		return nil, fmt.Errorf("%w: member: %w", ErrInvalidSpec, err)
	}
	if err := CheckCapacity(cfg.Capacity); err != nil {
		return nil, err
	}
	if err := CheckBandwidth(cfg.Bandwidth); err != nil {
		return nil, err
	}
	if err := checkSchemes(cfg.Schemes); err != nil {
		return nil, fmt.Errorf("%w: schemes: %w", ErrInvalidSpec, err)
	}
	cfg.Schemes = slices.Clone(cfg.Schemes)
	if cfg.Window == 0 {
		cfg.Window = DefaultReportWindow
	}
	if cfg.Window < 10*time.Millisecond {
		return nil, fmt.Errorf("%w: window %s: want at least 10ms", ErrInvalidSpec, cfg.Window)
	}
	if cfg.RunQueue == nil {
		cfg.RunQueue = ReadRunQueue
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Reporter{cfg: cfg, width: int64(cfg.Window / reporterBuckets), start: cfg.Clock()}
	for i := range r.buckets {
		r.buckets[i].epoch = -1 << 62
	}
	r.capacity.Store(math.Float64bits(cfg.Capacity))
	r.bandwidth.Store(math.Float64bits(cfg.Bandwidth))
	return r, nil
}

// CheckCapacity returns an error unless c is a capacity that a Reporter
// takes: a finite number >= 0.
func CheckCapacity(c float64) error {
	if !(c >= 0) || c > 1e300 {
		return fmt.Errorf("%w: capacity %g: want a finite number >= 0", ErrInvalidSpec, c)
	}
	return nil
}

// SetCapacity makes c the capacity of the reports from now on (a reload).
// c must pass CheckCapacity; any other value is ignored, so that the
// reports stay valid.
func (r *Reporter) SetCapacity(c float64) {
	if CheckCapacity(c) == nil {
		r.capacity.Store(math.Float64bits(c))
	}
}

// CheckBandwidth returns an error unless b is a bandwidth that a Reporter
// takes: a finite number of bytes per second >= 0.
func CheckBandwidth(b float64) error {
	if !(b >= 0) || b > 1e300 {
		return fmt.Errorf("%w: bandwidth %g: want a finite number of bytes per second >= 0", ErrInvalidSpec, b)
	}
	return nil
}

// SetBandwidth makes b the bandwidth of the reports from now on (a
// reload). b must pass CheckBandwidth; any other value is ignored.
func (r *Reporter) SetBandwidth(b float64) {
	if CheckBandwidth(b) == nil {
		r.bandwidth.Store(math.Float64bits(b))
	}
}

// RequestStarted counts a request in flight; pair it with RequestDone.
func (r *Reporter) RequestStarted() { r.inFlight.Add(1) }

// RequestDone ends a request counted by RequestStarted, which wrote bytes
// response bytes and was a redirect (302) or not.
func (r *Reporter) RequestDone(bytes int64, redirected bool) {
	r.requestDone(bytes, redirected, false)
}

// requestDone is RequestDone for a request that came in on the group name
// or not.
func (r *Reporter) requestDone(bytes int64, redirected, onGroup bool) {
	r.inFlight.Add(-1)
	e := floorDiv(r.cfg.Clock().UnixNano(), r.width)
	r.mu.Lock()
	b := &r.buckets[mod(e, reporterBuckets)]
	if e > b.epoch {
		*b = bucket{epoch: e}
	}
	b.requests++
	b.bytes += bytes
	if redirected {
		b.redirects++
	}
	if onGroup {
		b.group++
	}
	r.mu.Unlock()
}

// Snapshot returns the report for now: rates over the sliding window that
// ends at now, the requests in flight, the run-queue length (the last good
// one when RunQueue fails; the requests in flight with RunQueueInFlight)
// and the next sequence number.
func (r *Reporter) Snapshot(now time.Time) Report {
	m, err := r.runQueue()
	r.mu.Lock()
	if err == nil && m >= 0 && m < 1e300 {
		if r.rqErr {
			r.cfg.Logger.Info("run queue readable again", "group", r.cfg.Group, "member", r.cfg.Member)
		}
		r.lastM, r.rqErr = m, false
	} else {
		if err == nil {
			err = fmt.Errorf("probe: run queue %g out of range", m)
		}
		if !r.rqErr {
			r.cfg.Logger.Warn("run queue unreadable, reporting the last good value",
				"group", r.cfg.Group, "member", r.cfg.Member, "last", r.lastM, "err", err)
		}
		r.rqErr = true
	}
	m = r.lastM
	var req, byt, red, grp int64
	cur := floorDiv(now.UnixNano(), r.width)
	for _, b := range r.buckets {
		if b.epoch <= cur && b.epoch > cur-reporterBuckets {
			req, byt, red, grp = req+b.requests, byt+b.bytes, red+b.redirects, grp+b.group
		}
	}
	r.mu.Unlock()

	// The window covers the older full buckets and the current one so far,
	// and nothing before the Reporter started.
	span := time.Duration((reporterBuckets-1)*r.width + now.UnixNano() - cur*r.width)
	if since := now.Sub(r.start); since < span {
		span = since
	}
	rate := func(n int64) float64 {
		if span <= 0 {
			return 0
		}
		return float64(n) / span.Seconds()
	}
	rep := Report{
		Group:                  r.cfg.Group,
		Member:                 r.cfg.Member,
		Seq:                    r.seq.Add(1),
		Time:                   now,
		R:                      rate(req),
		M:                      m,
		Conns:                  max(r.inFlight.Load(), 0),
		BytesPerSecond:         rate(byt),
		RedirectsPerSecond:     rate(red),
		Capacity:               math.Float64frombits(r.capacity.Load()),
		Bandwidth:              math.Float64frombits(r.bandwidth.Load()),
		GroupRequestsPerSecond: rate(grp),
		Window:                 r.cfg.Window.Seconds(),
		Schemes:                r.cfg.Schemes,
	}
	rep.Load = LoadOf(rep.R, rep.M)
	if r.cfg.Serving != nil {
		if s := r.cfg.Serving(now); s >= 0 && s < 1e300 {
			rep.ServingLoad = LoadOf(s, rep.M)
		}
	}
	if r.cfg.Generation != nil {
		rep.Generation = r.cfg.Generation()
	}
	if r.cfg.CertNotAfter != nil {
		rep.CertNotAfter = r.cfg.CertNotAfter().UTC()
	}
	if ps := r.paths.Load(); ps != nil {
		rep.Top, rep.Rescued = validTop(ps.Top(now)), ps.Rescued()
	}
	return rep
}

// PathSource is what a report says of the content asked of a member: its
// most requested paths at now, most requested first (mirror/popular's
// Counter), and the requests it rescued (redirected to a sibling that
// holds the file instead of answering 404) since it started.
type PathSource interface {
	Top(now time.Time) []PathCount
	Rescued() uint64
}

type pathSource struct{ PathSource }

// SetPaths makes p the source of the reports' top and rescued from now on
// (nil: none). It is set once the public chain is built, after the
// Reporter that the chain's meters need.
func (r *Reporter) SetPaths(p PathSource) {
	if p == nil {
		r.paths.Store(nil)
		return
	}
	r.paths.Store(&pathSource{p})
}

// validTop returns the first MaxTopPaths entries of top that a report may
// carry (see checkTop), so that the reports stay valid; nil for none.
func validTop(top []PathCount) []PathCount {
	var out []PathCount
	seen := make(map[string]bool, len(top))
	for _, pc := range top {
		if len(out) == MaxTopPaths {
			break
		}
		if CheckTopPath(pc.Path) == nil && !seen[pc.Path] && pc.Count > 0 && pc.Count <= MaxTopCount {
			seen[pc.Path] = true
			out = append(out, pc)
		}
	}
	return out
}

// runQueue returns the report's m as configured.
func (r *Reporter) runQueue() (float64, error) {
	if r.cfg.RunQueueInFlight {
		return float64(max(r.inFlight.Load(), 0)), nil
	}
	return r.cfg.RunQueue()
}

// ServeHTTP answers GET (and HEAD) with the current report as JSON; a
// mirror mounts it on its admin server's load report route (api.LoadReport).
func (r *Reporter) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	b, err := json.Marshal(r.Snapshot(r.cfg.Clock()))
	if err != nil { // can not happen: Report has only marshalable fields
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", fmt.Sprint(len(b)))
	if req.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}

// Wrap returns h counting its requests: in flight while h runs, then done
// with the bytes h wrote, whether it answered 302 and whether it came in
// on the group name (the Host header, port and trailing dot aside).
func (r *Reporter) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.RequestStarted()
		cw := NewCountingWriter(w)
		onGroup := onHost(req.Host, r.cfg.Group)
		defer func() { r.requestDone(cw.n, cw.status == http.StatusFound, onGroup) }()
		h.ServeHTTP(cw, req)
	})
}

// CountingWriter counts the response body bytes written through it and
// keeps the status. It keeps the server's sendfile path (ReadFrom) and
// reaches the wrapped writer for http.ResponseController (Unwrap).
type CountingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

// NewCountingWriter returns a CountingWriter around w.
func NewCountingWriter(w http.ResponseWriter) *CountingWriter {
	return &CountingWriter{ResponseWriter: w}
}

// Status returns the response's status, 0 while nothing was written.
func (c *CountingWriter) Status() int { return c.status }

// Bytes returns the body bytes written so far.
func (c *CountingWriter) Bytes() int64 { return c.n }

func (c *CountingWriter) WriteHeader(code int) {
	if c.status == 0 && code >= 200 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// ReadFrom keeps the server's sendfile path when the wrapped writer has one.
func (c *CountingWriter) ReadFrom(src io.Reader) (int64, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{c.ResponseWriter}, src)
	}
	c.n += n
	return n, err
}

// Flush flushes the wrapped writer if it can.
func (c *CountingWriter) Flush() {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the wrapped writer.
func (c *CountingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

type writerOnly struct{ io.Writer }

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// onHost reports whether the Host header h names host: the port stripped,
// case-insensitive, a trailing dot on either side tolerated.
func onHost(h, host string) bool {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h, host = strings.TrimSuffix(h, "."), strings.TrimSuffix(host, ".")
	return host != "" && strings.EqualFold(h, host)
}
