package h1

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// connState is where a connection is, for Shutdown.
type connState int64

const (
	stateNew connState = iota
	stateActive
	stateIdle
)

// serverConn is one client connection of a Server.
type serverConn struct {
	s        *Server
	rwc      net.Conn
	remote   string
	tlsState *tls.ConnectionState
	cr       connReader
	br       *bufio.Reader
	state    atomic.Int64
	since    atomic.Int64 // when it became new, in Unix seconds

	w          response    // the response in progress, reused
	header     http.Header // its header map, reused
	wr         connWriter
	lastMethod string
	hijacked   bool
}

// Buffer sizes: request heads are read through headReadBuffer, and a
// response's head and first body bytes are gathered in a buffer of
// writeBufferSize.
const (
	headReadBuffer  = 4 << 10
	writeBufferSize = 16 << 10
)

var (
	readerPool sync.Pool // *bufio.Reader
	writerPool sync.Pool // *[]byte of writeBufferSize
)

// serve runs the connection's requests one after the other.
func (c *serverConn) serve(ctx context.Context) {
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.s.logf("http: panic serving %v: %v\n%s", c.remote, v, buf)
		}
		c.close()
	}()
	if !c.handshake() {
		return
	}
	c.cr.init(c.rwc)
	c.br = getReader(&c.cr)
	c.wr.init(c)
	c.header = make(http.Header)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if d := c.s.ReadHeaderTimeout; d > 0 {
		c.setReadDeadline(d)
	}
	for c.serveOne(ctx) && c.waitNext() {
	}
}

// close releases the connection unless a handler hijacked it.
func (c *serverConn) close() {
	c.s.forget(c)
	if c.hijacked {
		return
	}
	c.cr.stopWatch()
	c.cr.stopTimer()
	c.rwc.Close()
	if c.br != nil {
		putReader(c.br)
		c.br = nil
	}
	c.wr.release()
}

// handshake runs a TLS connection's handshake within ReadHeaderTimeout
// (ReadTimeout, WriteTimeout when shorter) and hands one that negotiated
// another protocol than HTTP/1 to NextProto, as net/http does; false:
// the connection is not HTTP/1's.
func (c *serverConn) handshake() bool {
	tc, ok := c.rwc.(*tls.Conn)
	if !ok {
		return true
	}
	if d := c.tlsTimeout(); d > 0 {
		dl := time.Now().Add(d)
		_ = c.rwc.SetReadDeadline(dl)
		_ = c.rwc.SetWriteDeadline(dl)
	}
	if err := tc.HandshakeContext(context.Background()); err != nil {
		c.handshakeFailed(err)
		return false
	}
	_ = c.rwc.SetReadDeadline(time.Time{})
	_ = c.rwc.SetWriteDeadline(time.Time{})
	st := tc.ConnectionState()
	c.tlsState = &st
	switch p := st.NegotiatedProtocol; p {
	case "", "http/1.1", "http/1.0":
		return true
	default:
		if fn := c.s.NextProto[p]; fn != nil {
			c.s.forget(c)
			c.hijacked = true // the connection is fn's
			fn(tc)
		}
		return false
	}
}

func (c *serverConn) tlsTimeout() time.Duration {
	d := c.s.ReadHeaderTimeout
	if d <= 0 {
		d = c.s.ReadTimeout
	}
	if w := c.s.WriteTimeout; w > 0 && (d <= 0 || w < d) {
		d = w
	}
	return d
}

// handshakeFailed logs a failed handshake as net/http does, and answers
// a plain HTTP request on the TLS port with its 400.
func (c *serverConn) handshakeFailed(err error) {
	var re tls.RecordHeaderError
	reason := err.Error()
	if errors.As(err, &re) && re.Conn != nil && looksLikeHTTP(re.RecordHeader) {
		_, _ = io.WriteString(re.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
		re.Conn.Close()
		reason = "client sent an HTTP request to an HTTPS server"
	}
	c.s.logf("http: TLS handshake error from %s: %v", c.remote, reason)
}

func looksLikeHTTP(hdr [5]byte) bool {
	switch string(hdr[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "OPTIO":
		return true
	}
	return false
}

// waitNext waits, within IdleTimeout, for the next request's first
// bytes.
//
// The read deadlines are set once per event, not three times per
// request: the idle deadline is armed again only when the one in force
// was armed IdleTimeout/16 ago or more (a connection is closed after
// between 15/16 of it and all of it idle); a head that came whole with
// its first bytes needs no header deadline, and a request without a body
// no read deadline (readRequest): nothing more is read of it but by the
// leave watch, which lifts the deadline.
func (c *serverConn) waitNext() bool {
	c.state.Store(int64(stateIdle))
	if c.s.inShutdown.Load() {
		return false
	}
	if c.br.Buffered() == 0 {
		c.armIdle()
		if _, err := c.br.Peek(4); err != nil {
			return false
		}
	}
	if b, _ := c.br.Peek(c.br.Buffered()); !wholeHead(b) {
		c.setReadDeadline(c.s.ReadHeaderTimeout)
	}
	return true
}

// armIdle sets the idle deadline, unless the one in force is recent.
func (c *serverConn) armIdle() {
	d := c.s.IdleTimeout
	if d <= 0 {
		c.setReadDeadline(0)
		return
	}
	now := time.Now()
	if at := c.cr.idleAt.Load(); at != 0 && now.UnixNano()-at < int64(d/16) {
		return
	}
	_ = c.rwc.SetReadDeadline(now.Add(d))
	c.cr.idleAt.Store(now.UnixNano())
}

// setReadDeadline sets the read deadline d from now (0: none).
func (c *serverConn) setReadDeadline(d time.Duration) {
	c.cr.idleAt.Store(0)
	if d > 0 {
		_ = c.rwc.SetReadDeadline(time.Now().Add(d))
	} else {
		_ = c.rwc.SetReadDeadline(time.Time{})
	}
}

// wholeHead reports whether b starts with a whole request head: a
// request line, then fields up to an empty line (CRLF or a bare LF).
// Empty lines before the request line say no (http.ReadRequest would
// read on).
func wholeHead(b []byte) bool {
	if len(b) < 16 || b[0] == '\r' || b[0] == '\n' {
		return false
	}
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false
		}
		b = b[i+1:]
		if len(b) > 0 && b[0] == '\n' || len(b) > 1 && b[0] == '\r' && b[1] == '\n' {
			return true
		}
	}
}

// serveOne reads one request and answers it; false: the connection is
// done.
func (c *serverConn) serveOne(ctx context.Context) bool {
	req, err := c.readRequest()
	c.state.Store(int64(stateActive))
	if c.s.inShutdown.Load() {
		return false
	}
	if err != nil {
		c.requestFailed(err)
		return false
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req = req.WithContext(rctx)
	w := c.startResponse(req, cancel)
	if w.expectFailed() {
		return w.finish()
	}
	c.s.Handler.ServeHTTP(w, req)
	if c.hijacked {
		return false
	}
	return w.finish()
}

// errTooLarge is a request head past MaxHeaderBytes.
var errTooLarge = errors.New("h1: request head too large")

// statusError is a request that gets a status of its own.
type statusError struct {
	code int
	text string
}

func (e statusError) Error() string { return http.StatusText(e.code) + ": " + e.text }

// readRequest reads and checks a request head as net/http's server does.
func (c *serverConn) readRequest() (*http.Request, error) {
	limit := c.s.maxHeaderBytes() + 4096 // bufio's slack, as net/http's
	c.cr.setLimit(limit)
	if c.lastMethod == http.MethodPost {
		// RFC 9112 2.2: the CRLF some clients send after a POST's body.
		peek, _ := c.br.Peek(4)
		_, _ = c.br.Discard(leadingCRLF(peek))
	}
	c.cr.record(c.br)
	req, err := http.ReadRequest(c.br)
	raw := c.cr.recorded()
	if err != nil {
		if c.cr.hitLimit() {
			return nil, errTooLarge
		}
		return nil, err
	}
	c.cr.setLimit(-1)
	if req.ProtoMajor != 1 && !(req.ProtoMajor == 2 && req.ProtoMinor == 0 && req.Method == "PRI" && req.RequestURI == "*") {
		return nil, statusError{http.StatusHTTPVersionNotSupported, "unsupported protocol version"}
	}
	c.lastMethod = req.Method
	if err := checkHead(req, raw); err != nil {
		return nil, err
	}
	delete(req.Header, "Host")
	req.RemoteAddr = c.remote
	req.TLS = c.tlsState
	if req.ContentLength != 0 || len(req.TransferEncoding) > 0 {
		c.setReadDeadline(c.s.ReadTimeout) // for the body
	}
	return req, nil
}

func leadingCRLF(b []byte) int {
	n := 0
	for _, x := range b {
		if x != '\r' && x != '\n' {
			break
		}
		n++
	}
	return n
}

// checkHead is net/http's server's check of a request's Host and
// fields. http.ReadRequest has taken the Host fields out of the header
// (but for two or more, an error): the request's Host is the field's
// unless the target is in absolute-form or the field is missing or
// empty, and then the raw head says which.
func checkHead(req *http.Request, raw []byte) error {
	host, haveHost := req.Host, req.Host != ""
	if req.URL.Host != "" || req.Host == "" {
		host, haveHost = rawHost(raw)
	}
	h2Upgrade := req.Method == "PRI" && len(req.Header) == 0 && req.URL.Path == "*" && req.Proto == "HTTP/2.0"
	if req.ProtoAtLeast(1, 1) && !haveHost && !h2Upgrade && req.Method != http.MethodConnect {
		return statusError{http.StatusBadRequest, "missing required Host header"}
	}
	if haveHost && !httpguts.ValidHostHeader(host) {
		return statusError{http.StatusBadRequest, "malformed Host header"}
	}
	for k, vv := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return statusError{http.StatusBadRequest, "invalid header name"}
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return statusError{http.StatusBadRequest, "invalid header value"}
			}
		}
	}
	return nil
}

// rawHost finds the Host field in a raw request head (its one line:
// http.ReadRequest refused two), as textproto reads it.
func rawHost(raw []byte) (string, bool) {
	first := true
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			return "", false
		}
		line := bytes.TrimSuffix(raw[:i], []byte("\r"))
		raw = raw[i+1:]
		if first {
			if len(line) == 0 {
				continue // empty lines before the request line
			}
			first = false
			continue
		}
		if len(line) == 0 {
			return "", false
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && string(bytes.ToLower(k)) == "host" {
			return textproto.TrimString(string(v)), true
		}
	}
	return "", false
}

// requestFailed answers a request that could not be read as net/http's
// server does (nothing for a connection that ended or timed out).
func (c *serverConn) requestFailed(err error) {
	const errorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"
	var se statusError
	switch {
	case errors.Is(err, errTooLarge):
		const publicErr = "431 Request Header Fields Too Large"
		_, _ = io.WriteString(c.rwc, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
		c.closeWriteAndWait()
	case isUnsupportedTE(err):
		code := http.StatusNotImplemented
		_, _ = fmt.Fprintf(c.rwc, "HTTP/1.1 %d %s%sUnsupported transfer encoding", code, http.StatusText(code), errorHeaders)
	case isCommonNetReadError(err):
	case errors.As(err, &se):
		_, _ = fmt.Fprintf(c.rwc, "HTTP/1.1 %d %s: %s%s%d %s: %s", se.code, http.StatusText(se.code), se.text, errorHeaders, se.code, http.StatusText(se.code), se.text)
	default:
		const publicErr = "400 Bad Request"
		_, _ = io.WriteString(c.rwc, "HTTP/1.1 "+publicErr+errorHeaders+publicErr)
	}
}

func isUnsupportedTE(err error) bool {
	return strings.HasPrefix(err.Error(), "unsupported transfer encoding")
}

func isCommonNetReadError(err error) bool {
	if err == io.EOF || errors.Is(err, net.ErrClosed) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read"
}

// closeWriteAndWait shuts the connection's write side and gives the
// client a moment to read what it got before the close resets it, as
// net/http does.
func (c *serverConn) closeWriteAndWait() {
	if cw, ok := c.rwc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	time.Sleep(500 * time.Millisecond)
}

func getReader(r io.Reader) *bufio.Reader {
	if br, ok := readerPool.Get().(*bufio.Reader); ok {
		br.Reset(r)
		return br
	}
	return bufio.NewReaderSize(r, headReadBuffer)
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readerPool.Put(br)
}
