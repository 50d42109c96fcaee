package popular

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/probe"
)

const (
	// MaxPathLen bounds a counted path, in bytes of its canonical escaped
	// form (Key); a longer one is not counted (ResultTooLong).
	MaxPathLen = 512
	// ReportLen is how many paths a load report carries.
	ReportLen = 16
)

// The results of transmirror_mirror_popular_requests_total, the bounded
// label set of Counter's metric.
const (
	ResultCounted = "counted"
	ResultTooLong = "too_long"
)

// CounterOptions configure a Counter.
type CounterOptions struct {
	// Hosts are the host names whose requests count (the group name, the
	// member's own host name); the Host header's port and a trailing dot
	// aside, without case. A request on any other name does not count.
	Hosts []string
	// Redirects counts the requests answered with a redirect too: a
	// dispatcher's, which answers nothing else. A member leaves it off and
	// counts where a request is answered, so that a request redirected to
	// a sibling counts once in the group, at the sibling.
	Redirects bool
	// Clock is the time of a count (default time.Now).
	Clock func() time.Time
	// Registerer, when set, gets
	// transmirror_mirror_popular_requests_total{result}.
	Registerer prometheus.Registerer
}

// Counter counts the requests of a public handler chain in a Sketch:
// Wrap counts, Top reads. It is safe for concurrent use.
type Counter struct {
	o                CounterOptions
	results          *prometheus.CounterVec
	counted, tooLong prometheus.Counter

	mu sync.Mutex
	sk *Sketch
}

// NewCounter returns a Counter of DefaultCounters counters halved every
// HalfLife from now by o.Clock.
func NewCounter(o CounterOptions) (*Counter, error) {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	c := &Counter{o: o, sk: NewSketch(DefaultCounters, HalfLife, o.Clock())}
	c.results = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "mirror", Name: "popular_requests_total",
		Help: "GET requests on the group or member name that the most-requested sketch took in, by result (counted; too_long: a path longer than 512 bytes, not counted).",
	}, []string{"result"})
	c.counted, c.tooLong = c.results.WithLabelValues(ResultCounted), c.results.WithLabelValues(ResultTooLong)
	if o.Registerer != nil {
		if err := o.Registerer.Register(c.results); err != nil {
			return nil, fmt.Errorf("popular: register metrics: %w", err)
		}
	}
	return c, nil
}

// Wrap returns h counting, once h has answered, each request that Counts
// and that came in on one of the Hosts, unless it was answered with a
// redirect (and Redirects is off).
func (c *Counter) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Counts(r) || !c.onHosts(r.Host) {
			h.ServeHTTP(w, r)
			return
		}
		cw := probe.NewCountingWriter(w)
		h.ServeHTTP(cw, r)
		if c.o.Redirects || !isRedirect(cw.Status()) {
			c.Add(r.URL.Path)
		}
	})
}

// Add counts the decoded URL path p once now, unless its Key is longer
// than MaxPathLen.
func (c *Counter) Add(p string) {
	k := Key(p)
	if len(k) > MaxPathLen {
		c.tooLong.Inc()
		return
	}
	c.counted.Inc()
	now := c.o.Clock()
	c.mu.Lock()
	c.sk.Add(now, k)
	c.mu.Unlock()
}

// Top returns the ReportLen most requested paths at now, keys as Key
// makes them.
func (c *Counter) Top(now time.Time) []Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sk.Top(now, ReportLen)
}

// Counts reports whether r is a request that counts: a GET, without a
// Range header or with one whose first range starts at byte 0 ("bytes=0-"
// and the like), so that a download fetched in segments counts once. HEAD
// and every other method do not count.
func Counts(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	v, ok := r.Header["Range"]
	if !ok {
		return true
	}
	if len(v) != 1 {
		return false
	}
	spec, found := strings.CutPrefix(strings.TrimSpace(v[0]), "bytes=")
	if !found {
		return false
	}
	first, _, _ := strings.Cut(spec, ",")
	start, _, found := strings.Cut(strings.TrimSpace(first), "-")
	if !found || start == "" {
		return false // a suffix range: the end of the file
	}
	n, err := strconv.ParseUint(strings.TrimSpace(start), 10, 64)
	return err == nil && n == 0
}

// Key returns the canonical form of the decoded URL path p, what a report
// carries: p cleaned as the file server maps it ("//" is "/", "." and ".."
// segments resolved, path.Clean, a trailing slash kept), then escaped as a
// URL path (url.URL.EscapedPath) with '&' as %26 too. It is printable
// ASCII without space, '"', '\\', '<', '>' or '&' (which JSON would
// escape), so that its JSON is its length plus the quotes, and the
// spellings of one path have one key.
func Key(p string) string {
	clean := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return strings.ReplaceAll((&url.URL{Path: clean}).EscapedPath(), "&", "%26")
}

func (c *Counter) onHosts(h string) bool {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(h, ".")
	for _, host := range c.o.Hosts {
		if host = strings.TrimSuffix(host, "."); host != "" && strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}
