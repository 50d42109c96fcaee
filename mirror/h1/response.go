package h1

import (
	"context"
	"io"
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// response is the http.ResponseWriter of one request of a serverConn
// (the connection's own, reused). Its head is decided as net/http's
// chunkWriter decides it: the handler's fields are written as they were
// at WriteHeader (sorted, the ones net/http drops dropped), then the
// fields the server adds, in net/http's order; a body the handler wrote
// whole before returning gets a Content-Length, a longer one is chunked
// (HTTP/1.1) or ends with the connection (HTTP/1.0).
type response struct {
	c      *serverConn
	req    *http.Request
	body   *reqBody // nil: the request has none
	cancel context.CancelFunc
	header http.Header

	status      int
	wroteHeader bool // a final status is set
	headSent    bool // the head is in the write buffer
	handlerDone bool
	canContinue bool // 100 Continue may still be sent

	is11, isHead     bool
	wants10KeepAlive bool
	wantsClose       bool
	closeAfter       bool
	chunking         bool

	clen       int64 // the Content-Length; -1: none
	autoLength bool  // clen is the whole body's, the handler set none
	written    int64 // body bytes the handler wrote
	tooBig     bool  // more of the request body was left than is read after

	// Decided at WriteHeader from the handler's fields.
	te        string   // its Transfer-Encoding
	hasDate   bool     // it set Date
	hasType   bool     // it set Content-Type (maybe to nothing)
	hasCE     bool     // a Content-Encoding that is not empty
	hasConn   bool     // it set Connection (maybe to nothing)
	conn      []string // its Connection values, written at connAt unless dropped
	connAt    int      // where in the head they go
	trailers  []string // declared trailers, canonical
	relay     []Field  // a back end's fields that follow them (RelayFields)
	bodyStore reqBody
}

var (
	_ http.ResponseWriter = (*response)(nil)
	_ http.Flusher        = (*response)(nil)
	_ http.Hijacker       = (*response)(nil)
	_ io.ReaderFrom       = (*response)(nil)
)

// startResponse prepares the connection's response to req.
func (c *serverConn) startResponse(req *http.Request, cancel context.CancelFunc) *response {
	clear(c.header)
	w := &c.w
	*w = response{
		c: c, req: req, cancel: cancel, header: c.header, clen: -1,
		is11: req.ProtoAtLeast(1, 1), isHead: req.Method == http.MethodHead,
		wants10KeepAlive: req.ProtoMajor == 1 && req.ProtoMinor == 0 && hasToken(req.Header["Connection"], "keep-alive"),
		wantsClose:       req.Close || hasToken(req.Header["Connection"], "close"),
		trailers:         w.trailers[:0],
		relay:            w.relay[:0],
		conn:             w.conn[:0],
	}
	c.wr.start()
	if req.Body == nil || req.Body == http.NoBody {
		c.cr.watch(cancel)
		return w
	}
	w.bodyStore = reqBody{rc: req.Body, w: w, limit: c.s.MaxBodyBytes}
	w.body = &w.bodyStore
	req.Body = w.body
	if hasToken(req.Header["Expect"], "100-continue") && w.is11 && req.ContentLength != 0 {
		w.canContinue, w.bodyStore.expect = true, true
	}
	return w
}

// hasToken reports whether one of the comma-separated values vv has
// token, case-insensitively.
func hasToken(vv []string, token string) bool {
	return httpguts.HeaderValuesContainsToken(vv, token)
}

// expectFailed answers 417 to a request with an Expect other than
// 100-continue, as net/http does; true: it did.
func (w *response) expectFailed() bool {
	e := w.req.Header["Expect"]
	if len(e) == 0 || e[0] == "" || hasToken(e, "100-continue") {
		return false
	}
	w.header.Set("Connection", "close")
	w.WriteHeader(http.StatusExpectationFailed)
	return true
}

func (w *response) Header() http.Header { return w.header }

// WriteHeader sends a 1xx at once; a final status is kept, with the
// handler's fields as they are now, for the head.
func (w *response) WriteHeader(code int) {
	switch {
	case w.c.hijacked:
		w.c.s.logf("http: response.WriteHeader on hijacked connection")
		return
	case w.wroteHeader:
		w.c.s.logf("http: superfluous response.WriteHeader call")
		return
	case code < 100 || code > 999:
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code < 101 || code > 199 {
		w.canContinue = false
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.informational(code)
		return
	}
	w.wroteHeader = true
	w.status = code
	if cl := w.header.Get("Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.clen = v
		} else {
			w.c.s.logf("http: invalid Content-Length of %q", cl)
			w.header.Del("Content-Length")
		}
	}
	if len(w.relay) > 0 {
		w.noteRelayed()
	}
	w.te = w.header.Get("Transfer-Encoding")
	if w.clen >= 0 && w.te != "" && w.te != "identity" {
		w.c.s.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", w.te, w.clen)
		w.clen = -1
	}
	w.writeFields()
}

// informational writes a 1xx head with the handler's fields but the
// body's framing, as net/http does.
func (w *response) informational(code int) {
	h := w.c.wr.head[:0]
	h = appendStatusLine(h, w.is11, code)
	h, _ = w.appendFields(h, informationalDrop, nil)
	h = append(h, "\r\n"...)
	w.c.wr.head = h
	_ = w.c.wr.writeDirect(h)
}

// informationalDrop are the fields a 1xx goes without.
func informationalDrop(k string) bool { return k == "Content-Length" || k == "Transfer-Encoding" }

// writeFields writes the status line and the handler's fields into the
// head, but those net/http leaves out of this response.
func (w *response) writeFields() {
	h := appendStatusLine(w.c.wr.head[:0], w.is11, w.status)
	_, hasDate := w.header["Date"]
	_, hasType := w.header["Content-Type"]
	w.hasDate = w.hasDate || hasDate
	w.hasType = w.hasType || hasType
	w.hasCE = w.hasCE || w.header.Get("Content-Encoding") != ""
	for _, v := range w.header["Trailer"] {
		foreachElement(v, w.declareTrailer)
	}
	h, w.connAt = w.appendFields(h, w.dropField, &w.conn)
	h = w.appendRelayed(h)
	w.c.wr.head = h
}

// dropField reports whether the handler's field k stays out of the head.
func (w *response) dropField(k string) bool {
	if strings.HasPrefix(k, http.TrailerPrefix) {
		return true
	}
	switch k {
	case "Content-Length":
		return w.clen < 0 || !bodyAllowed(w.status)
	case "Transfer-Encoding":
		// Dropped but for a coding other than chunked or identity with
		// a body and no Content-Length (kept, and chunked added, as
		// net/http does).
		return w.isHead || !bodyAllowed(w.status) || w.clen >= 0 || !w.is11 || w.te == "" || w.te == "chunked" || w.te == "identity"
	case "Content-Type":
		return w.status == http.StatusNotModified
	}
	return false
}

func (w *response) declareTrailer(k string) {
	k = http.CanonicalHeaderKey(k)
	if httpguts.ValidTrailerHeader(k) {
		w.trailers = append(w.trailers, k)
	}
}

// appendFields appends the fields of w.header in sorted order, as
// net/http's Header.Write writes them (an invalid name is dropped, CR and
// LF in a value become spaces, a value is trimmed), but those drop names.
// With conn, the Connection field's values are stored there instead and
// where they go is returned.
func (w *response) appendFields(h []byte, drop func(string) bool, conn *[]string) ([]byte, int) {
	keys := w.c.wr.keys[:0]
	for k := range w.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.c.wr.keys = keys
	connAt := len(h)
	for _, k := range keys {
		if conn != nil && k == "Connection" {
			connAt = len(h)
			w.hasConn = true
			*conn = append(*conn, w.header[k]...)
			continue
		}
		if drop(k) || !httpguts.ValidHeaderFieldName(k) {
			if conn != nil && k < "Connection" {
				connAt = len(h)
			}
			continue
		}
		for _, v := range w.header[k] {
			h = appendField(h, k, v)
		}
		if k < "Connection" {
			connAt = len(h)
		}
	}
	return h, connAt
}

// appendField appends "k: v\r\n" with v as net/http writes it.
func appendField(h []byte, k, v string) []byte {
	h = append(h, k...)
	h = append(h, ": "...)
	if hasNULCRLF(v) {
		v = strings.NewReplacer("\n", " ", "\r", " ").Replace(v)
	}
	h = append(h, textproto.TrimString(v)...)
	return append(h, "\r\n"...)
}

func appendStatusLine(h []byte, is11 bool, code int) []byte {
	if is11 {
		h = append(h, "HTTP/1.1 "...)
	} else {
		h = append(h, "HTTP/1.0 "...)
	}
	if text := http.StatusText(code); text != "" {
		h = strconv.AppendInt(h, int64(code), 10)
		h = append(h, ' ')
		h = append(h, text...)
		return append(h, "\r\n"...)
	}
	code3 := strconv.Itoa(code)
	for len(code3) < 3 {
		code3 = "0" + code3
	}
	return append(h, code3+" status code "+strconv.Itoa(code)+"\r\n"...)
}

// foreachElement calls fn for each non-empty element of a
// comma-separated value.
func foreachElement(v string, fn func(string)) {
	for f := range strings.SplitSeq(v, ",") {
		if f = textproto.TrimString(f); f != "" {
			fn(f)
		}
	}
}

func bodyAllowed(status int) bool {
	return (status < 100 || status > 199) && status != http.StatusNoContent && status != http.StatusNotModified
}

func (w *response) Write(p []byte) (int, error) {
	if w.c.hijacked {
		return 0, http.ErrHijacked
	}
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !bodyAllowed(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.clen >= 0 && w.written > w.clen {
		return 0, http.ErrContentLength
	}
	wr := &w.c.wr
	if !w.headSent {
		if wr.fits(len(p)) {
			wr.buffer(p)
			return len(p), nil
		}
		first := p
		if wr.pending() > 0 {
			first = wr.body()
		}
		w.sendHead(first)
	}
	if w.isHead {
		return len(p), nil
	}
	if err := wr.writeBody(p, w.chunking); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *response) WriteString(s string) (int, error) {
	// A string short enough for the buffer is not copied twice.
	if !w.headSent && w.wroteHeader && bodyAllowed(w.status) && w.c.wr.fits(len(s)) &&
		(w.clen < 0 || w.written+int64(len(s)) <= w.clen) && !w.c.hijacked {
		w.written += int64(len(s))
		w.c.wr.bufferString(s)
		return len(s), nil
	}
	return w.Write([]byte(s))
}

// sendHead completes the head, with first the first bytes of the body
// (sniffed for a Content-Type), and puts it before what is buffered.
func (w *response) sendHead(first []byte) {
	w.headSent = true
	keepAlive := !w.c.s.inShutdown.Load()
	connection, dropConn := w.framing(first, keepAlive)
	h := w.c.wr.head
	if w.hasConn && !dropConn {
		h = w.insertConnection(h)
	}
	var ct, te string
	if bodyAllowed(w.status) && !w.hasCE && !w.hasType && w.te == "" && len(first) > 0 {
		ct = http.DetectContentType(first)
	}
	if w.chunking {
		te = "chunked"
	}
	if !w.hasDate {
		h = append(h, "Date: "...)
		h = w.c.s.date.append(h, time.Now())
		h = append(h, "\r\n"...)
	}
	if w.autoLength {
		h = append(h, "Content-Length: "...)
		h = strconv.AppendInt(h, w.clen, 10)
		h = append(h, "\r\n"...)
	}
	for i, v := range [...]string{ct, connection, te} {
		if v != "" {
			h = appendField(h, extraFields[i], v)
		}
	}
	h = append(h, "\r\n"...)
	w.c.wr.head = h
	drop := w.isHead || !bodyAllowed(w.status)
	if !w.chunking || drop || w.c.wr.pending() == 0 {
		w.c.wr.placeHead(h, drop)
		return
	}
	// What is buffered goes out as the first chunk.
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	first = (*bp)[:copy(*bp, w.c.wr.body())]
	w.c.wr.placeHead(h, true)
	_ = w.c.wr.writeChunks(first)
}

// extraFields are the fields the server adds after Date and
// Content-Length, in net/http's order.
var extraFields = [...]string{"Content-Type", "Connection", "Transfer-Encoding"}
