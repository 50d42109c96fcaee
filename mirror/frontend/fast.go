package frontend

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"

	"github.com/transmirror/transmirror/mirror/h1"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler/site"
)

// The fast path of proxy mode.
//
// A GET or HEAD without a body, for a back end reached by plain HTTP,
// goes through h1's pooled connections rather than
// httputil.ReverseProxy over net/http.Transport: the request head is
// written in one write from the parsed request, the response head read
// and parsed from one buffered read, a small body written to the client
// in one write. It does what ReverseProxy does with the front end's
// Rewrite (hop-by-hop fields removed both ways, X-Forwarded-For,
// X-Forwarded-Host, X-Forwarded-Proto and Forwarded set from the client's
// request alone, the back end's host in Host), the same retry on another
// back end when the first fails before a response, the same passive
// health, metrics and policy signals. Anything else (a body, an Upgrade,
// an https back end) takes ReverseProxy.

// fastable reports whether r may take the fast path.
func fastable(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		r.ContentLength == 0 && len(r.TransferEncoding) == 0 &&
		first(r.Header["Upgrade"]) == "" && first(r.Header["Expect"]) == ""
}

// first is what Header.Get returns for the values vv of a canonical key.
func first(vv []string) string {
	if len(vv) == 0 {
		return ""
	}
	return vv[0]
}

// notForwarded reports whether the request field k (canonical) stays
// behind: a hop-by-hop field, or one of the client's own forwarding
// fields, which the front end replaces with its own (as ReverseProxy's
// Rewrite does). A switch, not a map: it is asked for every field of
// every request.
func notForwarded(k string) bool {
	switch k {
	case "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded":
		return true
	}
	return h1.HopByHop(k)
}

// headBuffers recycles the request heads' buffers.
type headBuffers struct{ p sync.Pool }

func (hb *headBuffers) get() *[]byte {
	if b, ok := hb.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 2048)
	return &b
}

func (hb *headBuffers) put(b *[]byte) {
	if cap(*b) <= 64<<10 {
		*b = (*b)[:0]
		hb.p.Put(b)
	}
}

// requestHead appends the head of r as it goes to back end b.
func requestHead(buf []byte, r *http.Request, b *backend) []byte {
	buf = append(buf, r.Method...)
	buf = append(buf, ' ')
	buf = appendTarget(buf, b, r)
	buf = append(buf, " HTTP/1.1\r\nHost: "...)
	buf = append(buf, b.url.Host...)
	buf = append(buf, "\r\n"...)
	drop := connectionFields(r.Header)
	for k, vv := range r.Header {
		if notForwarded(k) || drop[k] {
			continue
		}
		for _, v := range vv {
			buf = appendField(buf, k, v)
		}
	}
	if te := r.Header["Te"]; len(te) > 0 && strings.Contains(strings.ToLower(strings.Join(te, ",")), "trailers") {
		buf = appendField(buf, "Te", "trailers")
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		buf = appendField(buf, "X-Forwarded-For", host)
	}
	if r.Host != "" {
		buf = appendField(buf, "X-Forwarded-Host", r.Host)
	}
	proto := "http"
	if r.TLS != nil {
		proto = "https"
	}
	buf = appendField(buf, "X-Forwarded-Proto", proto)
	buf = append(buf, "Forwarded: "...)
	buf = appendForwarded(buf, r)
	return append(buf, "\r\n\r\n"...)
}

// appendTarget appends the request target of r on b: its path and query
// on b's URL (targetURL), without building a URL when b's has neither.
func appendTarget(buf []byte, b *backend, r *http.Request) []byte {
	if (b.url.Path == "" || b.url.Path == "/") && b.url.RawQuery == "" {
		buf = append(buf, r.URL.EscapedPath()...)
		if r.URL.RawQuery != "" {
			buf = append(buf, '?')
			buf = append(buf, r.URL.RawQuery...)
		}
		return buf
	}
	return append(buf, targetURL(b.url, r.URL).RequestURI()...)
}

func appendField(buf []byte, k, v string) []byte {
	buf = append(buf, k...)
	buf = append(buf, ": "...)
	buf = append(buf, v...)
	return append(buf, "\r\n"...)
}

// connectionFields are the fields that r's Connection fields name, in
// canonical form (nil for none, the common case).
func connectionFields(h http.Header) map[string]bool {
	var drop map[string]bool
	for _, v := range h["Connection"] {
		for opt := range strings.SplitSeq(v, ",") {
			if opt = strings.TrimSpace(opt); opt != "" {
				if drop == nil {
					drop = make(map[string]bool)
				}
				drop[textproto.CanonicalMIMEHeaderKey(opt)] = true
			}
		}
	}
	return drop
}

// serveFast streams r through the back end the policy picks, on the
// fast path.
func (h *handler) serveFast(w http.ResponseWriter, r *http.Request, req site.Request) {
	b, err := h.pick(req, nil)
	if err != nil {
		http.Error(w, http.StatusText(http.StatusServiceUnavailable), http.StatusServiceUnavailable)
		return
	}
	cw := probe.NewCountingWriter(w)
	status, length := 0, int64(-1)
	defer func() { // also when the relay panics with http.ErrAbortHandler
		h.m.proxiedBytes.Add(float64(cw.Bytes()))
		h.release(b, req, doneSize(status, length, cw.Bytes()))
	}()
	hb := h.heads.get()
	defer h.heads.put(hb)
	c, resp, stop, err := h.fastExchange(w, r, &b, req, hb)
	if err != nil {
		if r.Context().Err() == nil {
			h.fastError(w, r, b, err)
		}
		return
	}
	status, length = resp.Status, resp.ContentLength
	h.relay(cw, r, b, c, resp, stop)
}

// fastExchange sends r to *b and reads the response head, retrying once
// on another back end (which it stores in *b) as retryTransport does.
func (h *handler) fastExchange(w http.ResponseWriter, r *http.Request, b **backend, req site.Request, hb *[]byte) (*h1.Conn, *h1.Response, unhook, error) {
	for retried := false; ; retried = true {
		*hb = requestHead((*hb)[:0], r, *b)
		c, resp, stop, err := exchange(w, r.Context(), (*b).pool, *hb, r.Method == http.MethodHead)
		if err == nil {
			h.transition(*b, "request", "")((*b).health.request(true, ""))
			return c, resp, stop, nil
		}
		if r.Context().Err() != nil {
			return nil, nil, unhook{}, err // the client left: not the back end's fault
		}
		h.backendFailed(*b, errKind(err), err)
		if retried {
			return nil, nil, unhook{}, err
		}
		next, perr := h.pick(req, *b)
		if perr != nil {
			return nil, nil, unhook{}, err
		}
		h.release(*b, req, 0)
		*b = next
		h.m.retries.Inc()
	}
}

// exchange sends head on a connection of p and reads the response head;
// a connection that the back end closed while it was idle is not its
// failure: the next one is tried (at last a new one). The connection's
// Abort runs if the client leaves first (h1.AfterLeave; on another
// server, when ctx ends); its unhook's stop removes the hook (false: it
// ran).
func exchange(w http.ResponseWriter, ctx context.Context, p *h1.Pool, head []byte, isHead bool) (*h1.Conn, *h1.Response, unhook, error) {
	for {
		c, err := p.Get(ctx)
		if err != nil {
			return nil, nil, unhook{}, err
		}
		u := unhook{leave: h1.AfterLeave(w, c.AbortFunc())}
		if u.leave == nil {
			u.ctx = context.AfterFunc(ctx, c.AbortFunc())
		}
		resp, err := c.Do(head, isHead, responseHeaderTimeout)
		if err == nil {
			return c, resp, u, nil
		}
		u.stop()
		c.Close()
		if !c.Reused || !errors.Is(err, h1.ErrNoResponse) {
			return nil, nil, unhook{}, err
		}
	}
}

// unhook removes the abort hook of an exchange: h1's or the context's.
type unhook struct {
	leave *h1.Leave
	ctx   func() bool
}

// stop removes the hook; false: it ran.
func (u unhook) stop() bool {
	if u.leave != nil {
		return u.leave.Stop()
	}
	return u.ctx()
}

// relay writes resp and its body to the client, then gives c back (or
// closes it). A body that fails halfway is a passive error of b (unless
// the client left) and aborts the client's response, as ReverseProxy
// does.
func (h *handler) relay(w http.ResponseWriter, r *http.Request, b *backend, c *h1.Conn, resp *h1.Response, stop unhook) {
	if !h1.RelayFields(w, resp) {
		copyFields(w.Header(), resp)
	}
	w.WriteHeader(resp.Status)
	_, err := c.Body().WriteTo(w)
	if !stop.stop() || err != nil {
		c.Close()
	} else {
		c.Release()
	}
	if err == nil {
		return
	}
	var we *h1.WriteError
	if !errors.As(err, &we) && r.Context().Err() == nil {
		h.backendFailed(b, errBody, err)
		// What came before the failure goes out, as from ReverseProxy,
		// so that the client sees a response cut short.
		_ = http.NewResponseController(w).Flush()
	}
	panic(http.ErrAbortHandler)
}

// copyFields copies resp's end-to-end fields to hd, for a server that
// is not h1's (h1.RelayFields writes them without the map).
// The values share one backing array (a field that repeats gets its
// own), so that a response costs two allocations, not one per field.
func copyFields(hd http.Header, resp *h1.Response) {
	var buf [16]h1.Field
	fields := resp.EndToEnd(buf[:0])
	vals := make([]string, len(fields))
	n := 0
	for _, f := range fields {
		k := textproto.CanonicalMIMEHeaderKey(f.Name)
		if vv, ok := hd[k]; ok {
			hd[k] = append(vv, f.Value)
			continue
		}
		vals[n] = f.Value
		hd[k] = vals[n : n+1 : n+1]
		n++
	}
}

// fastError answers a request whose back end failed before a response,
// as proxyError does for ReverseProxy (failedStatus).
func (h *handler) fastError(w http.ResponseWriter, r *http.Request, b *backend, err error) {
	h.log.Debug("proxy failed", "backend", b.name, "path", r.URL.Path, "err", err)
	code := failedStatus(err)
	http.Error(w, http.StatusText(code), code)
}
