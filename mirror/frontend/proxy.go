package frontend

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"syscall"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler/site"
)

// ServeHTTP hands r to a back end by the configured mode.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := policyRequest(r, h.keyQuery)
	h.restrict(r, &req)
	if h.mode == ModeRedirect {
		h.serveRedirect(w, r, req)
		return
	}
	if err := h.adm.admit(r.Context()); err != nil {
		if r.Context().Err() == nil {
			w.Header().Set("Retry-After", "1")
			http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		}
		return
	}
	s := &slot{a: h.adm, held: true}
	defer s.release()
	if h.mode == ModeHandoff {
		h.serveHandoff(w, r, req, s)
		return
	}
	if h.fast && fastable(r) {
		h.serveFast(w, r, req)
		return
	}
	h.serveProxy(w, r, req)
}

// attempt is one proxied request: the back end it is on (which a retry
// changes) and what its response said. It travels in the request context
// from ServeHTTP through Rewrite, the transport and ModifyResponse, all
// on the request's goroutine.
type attempt struct {
	req     site.Request
	in      *url.URL
	b       *backend
	retried bool
	status  int
	length  int64 // the response's Content-Length, -1 unknown
}

type attemptKey struct{}

func attemptOf(ctx context.Context) *attempt {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	return a
}

// serveProxy streams r through the back end the policy picks.
func (h *handler) serveProxy(w http.ResponseWriter, r *http.Request, req site.Request) {
	b, err := h.pick(req, nil)
	if err != nil {
		http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		return
	}
	a := &attempt{req: req, in: r.URL, b: b, length: -1}
	cw := probe.NewCountingWriter(w)
	// Deferred: ReverseProxy panics with http.ErrAbortHandler when the
	// body fails halfway, and the in-flight count must still drop.
	defer func() {
		h.m.proxiedBytes.Add(float64(cw.Bytes()))
		h.release(a.b, a.req, doneSize(a.status, a.length, cw.Bytes()))
	}()
	h.proxy.ServeHTTP(cw, r.WithContext(context.WithValue(r.Context(), attemptKey{}, a)))
}

// doneSize is the size Done is told of a response with status, its
// Content-Length (-1 unknown) and the body bytes written: the length of a
// 200, else what was written for a 200, 0 for any other status.
func doneSize(status int, length, written int64) int64 {
	switch {
	case status != http.StatusOK:
		return 0
	case length >= 0:
		return length
	}
	return written
}

// rewrite points the outgoing request at the attempt's back end and sets
// the forwarding headers (ReverseProxy has removed the client's own).
func (h *handler) rewrite(pr *httputil.ProxyRequest) {
	a := attemptOf(pr.In.Context())
	pr.Out.URL = targetURL(a.b.url, pr.In.URL)
	pr.Out.Host = ""
	pr.SetXForwarded()
	pr.Out.Header.Set("Forwarded", forwarded(pr.In))
}

// forwarded returns the RFC 7239 Forwarded element for r.
func forwarded(r *http.Request) string { return string(appendForwarded(nil, r)) }

// appendForwarded appends forwarded's value to buf.
func appendForwarded(buf []byte, r *http.Request) []byte {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		buf = append(buf, "for="...)
		if strings.Contains(host, ":") {
			buf = append(buf, `"[`...)
			buf = append(buf, host...)
			buf = append(buf, `]"`...)
		} else {
			buf = append(buf, host...)
		}
		buf = append(buf, ';')
	}
	if r.Host != "" && !strings.ContainsAny(r.Host, "\"\\\r\n") {
		buf = append(buf, `host="`...)
		buf = append(buf, r.Host...)
		buf = append(buf, `";`...)
	}
	if r.TLS != nil {
		return append(buf, "proto=https"...)
	}
	return append(buf, "proto=http"...)
}

func (h *handler) modifyResponse(resp *http.Response) error {
	if a := attemptOf(resp.Request.Context()); a != nil {
		a.status, a.length = resp.StatusCode, resp.ContentLength
	}
	return nil
}

// proxyError answers a request whose back end failed before a response:
// 504 for a timeout, else 502. Nothing is written for a client that left.
func (h *handler) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return
	}
	b := ""
	if a := attemptOf(r.Context()); a != nil {
		b = a.b.name
	}
	h.log.Debug("proxy failed", "backend", b, "path", r.URL.Path, "err", err)
	code := failedStatus(err)
	http.Error(w, http.StatusText(code), code)
}

// failedStatus is the answer to a request whose back end failed with err
// before a response: 504 for a timeout, else 502.
func failedStatus(err error) int {
	if errKind(err) == errTimeout {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// retryTransport sends the outgoing request to the attempt's back end,
// feeds the result to passive health, and retries an idempotent request
// without a body once on another back end when the first fails before
// its response: ReverseProxy has written nothing to the client then.
type retryTransport struct{ h *handler }

var _ http.RoundTripper = retryTransport{}

func (t retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	h := t.h
	a := attemptOf(req.Context())
	if a == nil {
		return h.transport.RoundTrip(req)
	}
	for {
		resp, err := h.transport.RoundTrip(req)
		if err == nil {
			h.transition(a.b, "request", "")(a.b.health.request(true, ""))
			resp.Body = &watchedBody{ReadCloser: resp.Body, ctx: req.Context(), h: h, b: a.b}
			return resp, nil
		}
		if req.Context().Err() != nil {
			return nil, err // the client left: not the back end's fault
		}
		kind := errKind(err)
		h.backendFailed(a.b, kind, err)
		if a.retried || !retryable(req) {
			return nil, err
		}
		next, perr := h.pick(a.req, a.b)
		if perr != nil {
			return nil, err
		}
		h.release(a.b, a.req, 0)
		a.b, a.retried = next, true
		h.m.retries.Inc()
		req = req.Clone(req.Context())
		req.URL = targetURL(next.url, a.in)
		req.Host = ""
	}
}

// backendFailed counts a failed request on b and feeds passive health.
func (h *handler) backendFailed(b *backend, kind string, err error) {
	h.m.errors.WithLabelValues(b.name, kind).Inc()
	h.transition(b, "requests", err.Error())(b.health.request(false, kind))
}

// retryable reports whether req may be sent again: GET or HEAD without a
// body.
func retryable(req *http.Request) bool {
	return (req.Method == http.MethodGet || req.Method == http.MethodHead) &&
		(req.Body == nil || req.Body == http.NoBody)
}

// errKind classifies a transport error for metrics and health.
func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return errRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errReset
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return errTimeout
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return errDial
	}
	return errOther
}

// watchedBody counts a back end's response body that fails halfway as
// a passive error (unless the client left first).
type watchedBody struct {
	io.ReadCloser
	ctx    context.Context
	h      *handler
	b      *backend
	failed bool
}

func (w *watchedBody) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !w.failed && w.ctx.Err() == nil {
		w.failed = true
		w.h.backendFailed(w.b, errBody, err)
	}
	return n, err
}

// serveRedirect answers 302 to the picked back end's public URL.
func (h *handler) serveRedirect(w http.ResponseWriter, r *http.Request, req site.Request) {
	b, err := h.pick(req, nil)
	if err != nil {
		http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		return
	}
	defer h.release(b, req, 0) // its size comes with the back end's report
	if b.reportURL != "" {
		b.rep.redirected(h.now())
	}
	hd := w.Header()
	hd.Set("Location", targetURL(b.public, r.URL).String())
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Length", "0")
	w.WriteHeader(http.StatusFound)
}
