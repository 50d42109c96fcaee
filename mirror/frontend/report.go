package frontend

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/transmirror/transmirror/probe"
)

// Back-end reports.
//
// A back end (a mirror with a root) answers GET /v1/site on its admin
// server (api.SiteReport) with a BackendReport: its requests in flight
// and rates, its memory cache's size and object limit, and the requests
// it completed since the last report (Completions keeps the latest
// maxCompletions). A front end whose backends[].admin_url is set fetches
// it every health interval, so that
//
//   - every policy sees the back end's real cache (memory and max
//     object size) rather than a copy in the front end's config;
//   - in redirect mode, where the front end never sees a request after
//     its 302, the policies see the back end's in flight count (the
//     reported one plus the redirects issued since, each counted as in
//     flight for the back end's mean service time) and Done gets each
//     completed request's size.
//
// The lag is at most one health interval plus the fetch.

// maxCompletions bounds a back end's ring of completed requests and the
// completions of one report.
const maxCompletions = 4096

// maxReportKey bounds the RequestKey of a completion, and of a handoff
// report's begin record.
const maxReportKey = 16 << 10

// BackendReport is a back end's report to its site front end.
type BackendReport struct {
	// Time is when it was taken.
	Time time.Time `json:"time"`
	// InFlight is the requests being served; RequestsPerSecond and
	// BytesPerSecond the rates of the load report's window.
	InFlight          int64   `json:"in_flight"`
	RequestsPerSecond float64 `json:"requests_per_second"`
	BytesPerSecond    float64 `json:"bytes_per_second"`
	// CacheMemory and CacheMaxObject are the memory cache's bound and
	// largest object (site.cache); 0 without a cache.
	CacheMemory    int64 `json:"cache_memory"`
	CacheMaxObject int64 `json:"cache_max_object"`
	// Completions are the requests completed after the one numbered
	// "after" in the query, oldest first; Next is the number to ask after
	// next time, Lost how many were dropped from the ring unread.
	Completions []Completion `json:"completions"`
	Next        uint64       `json:"next"`
	Lost        uint64       `json:"lost"`
}

// RequestKey is what the site policies, the completions of a back end's
// report and a handoff's begin record know of a request: its escaped path
// and, when withQuery and it has a query, "?" and the first 8 bytes of
// the query's SHA-256 in hex, never the query itself. The report is served
// to anyone who can reach the admin listener, and a client's query may
// carry a token (?token=…); the digest still tells one query from
// another for site.target_key: path_query. A back end reports keys with
// the digest (it does not know the front end's target_key); the front
// end takes them through policyKey.
func RequestKey(u *url.URL, withQuery bool) string {
	if !withQuery || u.RawQuery == "" {
		return u.EscapedPath()
	}
	sum := sha256.Sum256([]byte(u.RawQuery))
	return u.EscapedPath() + "?" + hex.EncodeToString(sum[:8])
}

// policyKey returns the policy's key of a request that a back end
// reported as key (RequestKey with the query's digest): key itself when
// withQuery, else its path.
func policyKey(key string, withQuery bool) string {
	if withQuery {
		return key
	}
	path, _, _ := strings.Cut(key, "?")
	return path
}

// Completion is one completed request: its RequestKey and the size Done
// is told (see doneSize).
type Completion struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
}

// Completions is a back end's ring of its latest completed requests.
type Completions struct {
	mu   sync.Mutex
	ring [maxCompletions]Completion
	n    uint64 // completions so far; the last is numbered n
}

// NewCompletions returns an empty ring.
func NewCompletions() *Completions { return &Completions{} }

// Wrap records every request next answers.
func (c *Completions) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := probe.NewCountingWriter(w)
		defer func() { c.add(Completion{Key: RequestKey(r.URL, true), Size: responseSize(cw)}) }()
		next.ServeHTTP(cw, r)
	})
}

func (c *Completions) add(x Completion) {
	if len(x.Key) > maxReportKey {
		x.Key = x.Key[:maxReportKey]
	}
	c.mu.Lock()
	c.n++
	c.ring[c.n%maxCompletions] = x
	c.mu.Unlock()
}

// Since returns the completions numbered after..n, the next number to ask
// after and how many of them the ring no longer holds.
func (c *Completions) Since(after uint64) (out []Completion, next, lost uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if after > c.n {
		after = 0 // the back end restarted: start over
	}
	first := after + 1
	if c.n >= maxCompletions && first <= c.n-maxCompletions {
		lost = c.n - maxCompletions + 1 - first
		first = c.n - maxCompletions + 1
	}
	out = make([]Completion, 0, c.n+1-first)
	for i := first; i <= c.n; i++ {
		out = append(out, c.ring[i%maxCompletions])
	}
	return out, c.n, lost
}

// ReportHandler serves a back end's report: base gives the figures,
// completions (may be nil) the requests completed after the query's
// "after".
func ReportHandler(base func() BackendReport, completions *Completions) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := base()
		if completions != nil {
			after, _ := strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
			rep.Completions, rep.Next, rep.Lost = completions.Since(after)
		}
		if rep.Completions == nil {
			rep.Completions = []Completion{}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(rep)
	})
}

// responseSize is what Done is told of the response cw saw: see
// doneSize (a handler that wrote nothing answered 200).
func responseSize(cw *probe.CountingWriter) int64 {
	cl := int64(-1)
	if v := cw.Header().Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			cl = n
		}
	}
	status := cw.Status()
	if status == 0 {
		status = http.StatusOK
	}
	return doneSize(status, cl, cw.Bytes())
}
