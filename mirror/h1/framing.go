package h1

import (
	"io"
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// maxPostHandlerReadBytes is the most of an unread request body that is
// read after the handler to keep the connection, as net/http's.
const maxPostHandlerReadBytes = 256 << 10

// framing decides, as net/http's chunkWriter.writeHeader does, the
// body's framing (a Content-Length of the whole body, first, when the
// handler is done; else chunked or until the close) and whether the
// connection closes after the response; it returns the Connection field
// the server adds ("" for none) and whether the handler's is dropped.
func (w *response) framing(first []byte, keepAlive bool) (connection string, dropConn bool) {
	trailers := len(w.trailers) > 0 || w.prefixTrailers()
	if w.handlerDone && !trailers && w.te == "" && bodyAllowed(w.status) && w.clen < 0 && (!w.isHead || len(first) > 0) {
		w.clen, w.autoLength = int64(len(first)), true
	}
	connFirst := ""
	if len(w.conn) > 0 {
		connFirst = w.conn[0]
	}
	if w.wants10KeepAlive && keepAlive && w.clen >= 0 && !w.autoLength && connFirst == "keep-alive" {
		w.closeAfter = false
	}
	if w.wants10KeepAlive && (w.isHead || w.clen >= 0 || !bodyAllowed(w.status)) {
		if !w.hasConn {
			connection = "keep-alive"
		}
	} else if !w.is11 || w.wantsClose {
		w.closeAfter = true
	}
	if connFirst == "close" || !keepAlive {
		w.closeAfter = true
	}
	if w.body != nil && w.body.expect && !w.body.sawEOF {
		w.closeAfter = true
	}
	if w.req.ContentLength != 0 && !w.closeAfter && w.discardBody() {
		w.closeAfter, w.tooBig, dropConn, connection = true, true, true, "close"
	}
	w.chunkingFor()
	if w.closeAfter && (!keepAlive || !hasToken(w.conn, "close")) && !w.protocolSwitch() {
		dropConn = true
		if w.is11 {
			connection = "close"
		}
	}
	return connection, dropConn
}

// chunkingFor decides chunking once the Content-Length is known.
func (w *response) chunkingFor() {
	switch {
	case w.isHead || !bodyAllowed(w.status) || w.clen >= 0:
	case !w.is11 || w.te == "identity":
		w.closeAfter = true
	default:
		w.chunking = true
	}
}

func (w *response) protocolSwitch() bool {
	return w.status == http.StatusSwitchingProtocols && w.header.Get("Upgrade") != "" &&
		httpguts.HeaderValuesContainsToken(w.conn, "Upgrade")
}

func (w *response) prefixTrailers() bool {
	for k := range w.header {
		if len(k) > len(http.TrailerPrefix) && k[:len(http.TrailerPrefix)] == http.TrailerPrefix {
			return true
		}
	}
	return false
}

// discardBody reads what the handler left of the request body, at most
// maxPostHandlerReadBytes; true: there was more (the connection closes,
// as net/http's).
func (w *response) discardBody() (tooBig bool) {
	b := w.body
	if b == nil || b.sawEOF {
		return false
	}
	if b.closed {
		w.closeAfter = true // closed before its end, as net/http's
		return false
	}
	if w.req.ContentLength-b.read >= maxPostHandlerReadBytes {
		return true // not worth reading, as net/http's
	}
	_, err := io.CopyN(io.Discard, b.rc, maxPostHandlerReadBytes+1)
	switch err {
	case nil:
		return true
	case io.EOF:
		b.sawEOF = true
	default:
		w.closeAfter = true
	}
	return false
}

// insertConnection puts the handler's Connection field at its place
// among the sorted fields.
func (w *response) insertConnection(h []byte) []byte {
	var f []byte
	for _, v := range w.conn {
		f = appendField(f, "Connection", v)
	}
	h = append(h, f...)
	copy(h[w.connAt+len(f):], h[w.connAt:len(h)-len(f)])
	copy(h[w.connAt:], f)
	return h
}

// finalTrailers are the trailers the handler declared or set with
// http.TrailerPrefix, as net/http's.
func (w *response) finalTrailers() http.Header {
	var t http.Header
	for k, vv := range w.header {
		if len(k) > len(http.TrailerPrefix) && k[:len(http.TrailerPrefix)] == http.TrailerPrefix {
			if t == nil {
				t = make(http.Header)
			}
			t[k[len(http.TrailerPrefix):]] = vv
		}
	}
	for _, k := range w.trailers {
		if t == nil {
			t = make(http.Header)
		}
		for _, v := range w.header[k] {
			t.Add(k, v)
		}
	}
	return t
}

// reqBody is the request body the handler reads: 100 Continue on the
// first read when the client expects it, the leave watch armed at its
// end, Server.MaxBodyBytes enforced as http.MaxBytesReader does, and
// Close leaving the rest to the server.
type reqBody struct {
	rc     io.ReadCloser
	w      *response
	read   int64
	limit  int64 // <= 0: none
	err    error // the limit's, once hit
	sawEOF bool
	closed bool
	expect bool // the client waits for 100 Continue
}

func (b *reqBody) Read(p []byte) (int, error) {
	switch {
	case b.closed:
		return 0, http.ErrBodyReadAfterClose
	case b.err != nil:
		return 0, b.err
	case len(p) == 0:
		return 0, nil
	}
	w := b.w
	if w.canContinue {
		w.canContinue = false
		_ = w.c.wr.writeDirect([]byte("HTTP/1.1 100 Continue\r\n\r\n"))
	}
	if left := b.limit - b.read; b.limit > 0 && int64(len(p)) > left {
		p = p[:left+1] // one more byte says whether it goes past
	}
	n, err := b.rc.Read(p)
	b.read += int64(n)
	if b.limit > 0 && b.read > b.limit {
		return n - int(b.read-b.limit), b.overLimit()
	}
	if err == io.EOF && !b.sawEOF {
		b.sawEOF = true
		if !w.handlerDone {
			w.c.cr.watch(w.cancel)
		}
	}
	return n, err
}

// overLimit closes the connection after the response, as net/http's
// server does when its http.MaxBytesReader hits the limit.
func (b *reqBody) overLimit() error {
	w := b.w
	w.closeAfter, w.tooBig = true, true
	if !w.wroteHeader {
		w.header.Set("Connection", "close")
	}
	b.err = &http.MaxBytesError{Limit: b.limit}
	return b.err
}

func (b *reqBody) Close() error {
	b.closed = true
	return nil
}
