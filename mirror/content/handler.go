package content

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Response headers of the Handler besides ETag.
const (
	// KindHeader says what the body is: "full" or "changes".
	KindHeader = "Transmirror-Index"
	// VersionHeader is the version the body brings its reader to.
	VersionHeader = "Transmirror-Index-Version"
)

// Source is what the Handler serves: the current index, and the changes
// since a version with the index they lead to, or false when only the
// full index will do. *Scanner is one.
type Source interface {
	Current() *Index
	Since(v uint64) (Changes, *Index, bool)
}

var _ Source = (*Scanner)(nil)

// HandlerOptions configure NewHandler; a zero field takes its default.
type HandlerOptions struct {
	// Limit is the per-client rate limit (see LimitOptions).
	Limit LimitOptions
	// Metrics, when set, count the answers (see NewMetrics).
	Metrics *Metrics
}

// Handler serves GET ?since=V: the changes since version V, or the full
// index when V is absent, 0, too old or unknown. KindHeader says which;
// ETag is the version that the body leads to, and an If-None-Match of the
// current version is answered 304, without spending the client's rate
// limit (a copy that is up to date costs nothing to confirm). Each body is encoded once (and
// gzipped once, for a client that accepts gzip) and kept while its
// version is current; each client is rate limited (429 with
// Retry-After). Only paths and their metadata leave: nothing outside the
// root and no file contents.
type Handler struct {
	src     Source
	limit   *limiter
	metrics *Metrics

	mu      sync.Mutex
	version uint64              // of what the cache holds
	full    *encoded            // nil until asked for
	changes map[uint64]*encoded // by from-version
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the Handler of src.
func NewHandler(src Source, o HandlerOptions) *Handler {
	return &Handler{src: src, limit: newLimiter(o.Limit), metrics: o.Metrics, changes: map[uint64]*encoded{}}
}

// ServeHTTP answers GET and HEAD of the index (see Handler).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var since uint64
	if s := r.URL.Query().Get("since"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			http.Error(w, "content: since: not a version: "+strconv.Quote(s), http.StatusBadRequest)
			h.metrics.answered("bad_request")
			return
		}
		since = v
	}
	if v := h.src.Current().Version(); r.Header.Get("If-None-Match") == etagOf(v) {
		kind := kindChanges
		if since == 0 {
			kind = kindFull
		}
		h.setHeaders(w, kind, v)
		w.WriteHeader(http.StatusNotModified) // free: it costs no token
		h.metrics.answered("not_modified")
		return
	}
	enc, kind, version := h.body(since)
	cost := 1.0
	if kind == kindFull {
		cost = FullCost
	}
	if wait, ok := h.limit.allow(r.RemoteAddr, cost); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(max(int((wait+time.Second-1)/time.Second), 1)))
		http.Error(w, "content: rate limited", http.StatusTooManyRequests)
		h.metrics.answered("rate_limited")
		return
	}
	h.setHeaders(w, kind, version)
	h.metrics.answered(kind)
	body := enc.plain
	hd := w.Header()
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = enc.gzipped()
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// etagOf is the ETag of version v.
func etagOf(v uint64) string { return `"` + strconv.FormatUint(v, 10) + `"` }

// setHeaders sets the headers of every answer of an index at version.
func (h *Handler) setHeaders(w http.ResponseWriter, kind string, version uint64) {
	hd := w.Header()
	hd.Set("ETag", etagOf(version))
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Vary", "Accept-Encoding")
	hd.Set(KindHeader, kind)
	hd.Set(VersionHeader, strconv.FormatUint(version, 10))
}

// encoded is one answer, encoded once, and gzipped once when first asked
// for so.
type encoded struct {
	plain []byte
	once  sync.Once
	gz    []byte
}

func (e *encoded) gzipped() []byte {
	e.once.Do(func() {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed) // a valid level
		zw.Write(e.plain)
		zw.Close()
		e.gz = b.Bytes()
	})
	return e.gz
}

// acceptsGzip reports whether an Accept-Encoding value accepts gzip: a
// "gzip" (or "*") token without q=0.
func acceptsGzip(accept string) bool {
	for tok := range strings.SplitSeq(accept, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(tok), ";")
		name = strings.TrimSpace(name)
		if name != "gzip" && name != "*" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

// body returns the encoded answer to since, its kind and version, from
// the cache when it was encoded for the current version already.
func (h *Handler) body(since uint64) (*encoded, string, uint64) {
	ch, x, ok := h.src.Since(since)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.version != x.Version() {
		h.version, h.full = x.Version(), nil
		clear(h.changes)
	}
	if !ok || since == 0 {
		if h.full == nil {
			var b bytes.Buffer
			EncodeIndex(&b, x) // a bytes.Buffer does not fail
			h.full = &encoded{plain: b.Bytes()}
		}
		return h.full, kindFull, x.Version()
	}
	if e, ok := h.changes[since]; ok {
		return e, kindChanges, x.Version()
	}
	var b bytes.Buffer
	EncodeChanges(&b, ch)
	if len(h.changes) >= maxCachedChanges {
		clear(h.changes)
	}
	e := &encoded{plain: b.Bytes()}
	h.changes[since] = e
	return e, kindChanges, x.Version()
}

// maxCachedChanges bounds the change sets the Handler keeps encoded.
const maxCachedChanges = DefaultHistory
