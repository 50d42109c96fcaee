package serve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The differential conformance test of the HTTP/1.x engines: two Servers
// with the same handlers, one on net/http's server (the default), one on
// the default engine, get the same raw bytes over TCP, and must answer
// with the same bytes and leave the connection in the same state.

// engine is one of the two HTTP/1.x engines of a Server.
type engine struct {
	name    string
	netHTTP bool
}

var engines = []engine{{"net/http", true}, {"default", false}}

// Limits of the servers under test, small so that cases can pass them.
const (
	engineMaxHeaderBytes = 8 << 10
	engineMaxBodyBytes   = 16 << 10
	engineFileSize       = 3 << 20
)

// engineFile writes the file that /file serves: engineFileSize bytes of a
// pattern, with a fixed modification time.
func engineFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "file.bin")
	b := make([]byte, engineFileSize)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, dataMtime, dataMtime); err != nil {
		t.Fatal(err)
	}
	return p
}

// engineHandlers is the handler set that exercises a response writer.
// started, when not nil, gets the path of every request to /stream and
// /slow as it starts; release lets /stream finish; cancelled gets the
// request context's error of /slow.
type engineHandlers struct {
	file      string
	started   chan string
	release   chan struct{}
	cancelled chan error
}

func (e *engineHandlers) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello, world\n") })
	m.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "<!DOCTYPE html><p>hi</p>") })
	m.HandleFunc("/empty", func(http.ResponseWriter, *http.Request) {})
	m.HandleFunc("/len", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "12345")
	})
	m.HandleFunc("/short", func(w http.ResponseWriter, r *http.Request) { // declares more than it writes
		w.Header().Set("Content-Length", "10")
		io.WriteString(w, "12345")
	})
	m.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(bytes.Repeat([]byte("0123456789abcdef"), 4<<10)) // 64 KiB
	})
	m.HandleFunc("/flush", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		io.WriteString(w, "second\n")
	})
	m.HandleFunc("/status/{code}", e.status)
	m.HandleFunc("/early", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload; as=style")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "after hints\n")
	})
	m.HandleFunc("/error", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "it broke", http.StatusInternalServerError)
	})
	m.HandleFunc("GET /only-get", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "got\n") })
	m.HandleFunc("/panic", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "never sent")
		panic("engine test: handler panics")
	})
	m.HandleFunc("/abort", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part of it\n")
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	})
	m.HandleFunc("/hijack", hijack)
	m.HandleFunc("/echo", echo)
	m.HandleFunc("/request", describeRequest)
	m.HandleFunc("/trailer", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "body with trailers\n")
		w.Header().Set("X-Sum", "42")
		w.Header().Set(http.TrailerPrefix+"X-Late", "undeclared")
	})
	m.HandleFunc("/file", e.serveFile)
	m.HandleFunc("/stream", e.stream)
	m.HandleFunc("/slow", e.slow)
	return m
}

func (e *engineHandlers) status(w http.ResponseWriter, r *http.Request) {
	code, err := strconv.Atoi(r.PathValue("code"))
	if err != nil || code < 100 || code > 999 {
		http.Error(w, "bad code", http.StatusBadRequest)
		return
	}
	w.Header().Set("X-Code", strconv.Itoa(code))
	w.WriteHeader(code)
	io.WriteString(w, "body of a "+strconv.Itoa(code)+"\n") // refused for 1xx, 204 and 304
}

// hijack takes the connection and answers on it by itself.
func hijack(w http.ResponseWriter, r *http.Request) {
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "no hijack: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer c.Close()
	rw.WriteString("HTTP/1.1 200 OK\r\nX-Hijacked: yes\r\nContent-Length: 9\r\nConnection: close\r\n\r\nhijacked\n")
	rw.Flush()
}

// echo reads the request body and tells its length and trailers.
func echo(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &mb):
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		// The error's text is the engine's own: not echoed.
		http.Error(w, "body unreadable", http.StatusBadRequest)
		return
	}
	fmt.Fprintf(w, "read %d bytes, content length %d, transfer encoding %q, trailer %s\n",
		len(b), r.ContentLength, r.TransferEncoding, sortedHeader(r.Trailer))
}

// describeRequest writes what the handler sees of the request (no body).
func describeRequest(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "method %q\nrequest URI %q\nURL %q\nhost %q\nproto %q %d.%d\ncontent length %d\ntransfer encoding %q\nclose %v\nheader %s\n",
		r.Method, r.RequestURI, r.URL.String(), r.Host, r.Proto, r.ProtoMajor, r.ProtoMinor,
		r.ContentLength, r.TransferEncoding, r.Close, sortedHeader(r.Header))
}

func sortedHeader(h http.Header) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q;", k, h[k])
	}
	return b.String()
}

func (e *engineHandlers) serveFile(w http.ResponseWriter, r *http.Request) {
	f, err := os.Open(e.file)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "file.bin", dataMtime, f)
}

// stream writes a first chunk, flushes, and waits for release before it
// writes the rest: the first chunk must reach the client in between.
func (e *engineHandlers) stream(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "first chunk\n")
	http.NewResponseController(w).Flush()
	if e.started != nil {
		e.started <- r.URL.Path
	}
	select {
	case <-e.release:
	case <-r.Context().Done():
	case <-time.After(10 * time.Second): // never holds a server's shutdown for long
	}
	io.WriteString(w, "second chunk\n")
}

// slow waits for the request context to end and reports its error.
func (e *engineHandlers) slow(w http.ResponseWriter, r *http.Request) {
	if e.started != nil {
		e.started <- r.URL.Path
	}
	select {
	case <-r.Context().Done():
		if e.cancelled != nil {
			e.cancelled <- r.Context().Err()
		}
	case <-time.After(10 * time.Second):
		if e.cancelled != nil {
			e.cancelled <- errors.New("request context not done after 10 s")
		}
	}
}

// startEngine serves h with a Server of engine en on 127.0.0.1:0 until the
// test ends, and returns its address.
func startEngine(t testing.TB, en engine, o ServerOptions) string {
	t.Helper()
	o.NetHTTP = en.netHTTP
	return strings.TrimPrefix(startServer(t, o), "http://")
}

// step is one write of a raw case and the responses read after it.
type step struct {
	send string
	// read names the method of each response read after send (interim
	// 1xx responses count as one each): "GET GET HEAD". A HEAD response
	// has no body.
	read string
}

// rawCase is one conversation with a server.
type rawCase struct {
	name  string
	steps []step
}

// req is a case of one write and one response to a GET.
func req(name, send string) rawCase { return rawCase{name, []step{{send, "GET"}}} }

// probeRequest is sent once a case's steps are done and the connection seems
// open: an answer to it proves the connection was kept open, and shows
// that the server still parses requests where the case left it.
const probeRequest = "GET /text HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n"

// Normalizations of a transcript, each with its reason; nothing else is
// normalized:
//   - the value of the Date header field: the clock moves between the two
//     servers' answers (its presence and place are still compared);
//   - the boundary of a multipart/byteranges response: http.ServeContent
//     picks a random one (mime/multipart), per response.
var (
	dateField = regexp.MustCompile(`(?m)^Date: [^\r\n]*\r$`)
	boundary  = regexp.MustCompile(`multipart/byteranges; boundary=([0-9a-f]+)`)
)

func normalize(b []byte) []byte {
	b = dateField.ReplaceAll(b, []byte("Date: <date>\r"))
	for _, m := range boundary.FindAllSubmatch(b, -1) {
		b = bytes.ReplaceAll(b, m[1], []byte("<boundary>"))
	}
	return b
}

// converse runs c against the server at addr and returns the transcript:
// every byte the server sent (normalized), each read's outcome, and the
// connection's fate with the answer to the probe.
func converse(t *testing.T, addr string, c rawCase) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	br := bufio.NewReader(io.TeeReader(conn, &got))
	var log strings.Builder
	closed := false
	for i, s := range c.steps {
		if _, err := io.WriteString(conn, s.send); err != nil {
			fmt.Fprintf(&log, "step %d: write: %s\n", i, errClass(err))
			closed = true
			break
		}
		for _, method := range strings.Fields(s.read) {
			if err := readResponse(br, method); err != nil {
				fmt.Fprintf(&log, "step %d: read %s: %s\n", i, method, errClass(err))
				closed = true
				break
			}
		}
		if closed {
			break
		}
	}
	if closed {
		return string(normalize(got.Bytes())) + "\n--- " + log.String() + "connection closed"
	}
	pre := got.Len() - br.Buffered() // what came before the probe's answer
	answer, end := probeConn(conn, br)
	fate := "connection closed"
	switch {
	case len(answer) > 0:
		fate = "connection kept open; the probe's answer (then " + end + "):\n" + string(normalize(answer))
	case end != "closed":
		fate = "no answer to the probe: " + end
	}
	return string(normalize(got.Bytes()[:pre])) + "\n--- " + log.String() + fate
}

// readResponse reads one response to a request of method, with its body.
func readResponse(br *bufio.Reader, method string) error {
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}

// probeConn sends the probe and returns all the server sends after it
// until it closes the connection (the probe asks it to), with how the
// reading ended: nothing and "closed" when the connection was closed.
func probeConn(conn net.Conn, br *bufio.Reader) ([]byte, string) {
	if _, err := io.WriteString(conn, probeRequest); err != nil {
		return nil, errClass(err)
	}
	var answer bytes.Buffer
	_, err := io.Copy(&answer, br)
	if err == nil {
		err = io.EOF
	}
	return answer.Bytes(), errClass(err)
}

// errClass is a read or write error as a transcript records it. nil, io.EOF,
// io.ErrUnexpectedEOF and a reset are all "closed": whether a client sees
// the server's FIN or an RST first depends on timing.
func errClass(err error) string {
	var ne net.Error
	switch {
	case err == nil: // io.Copy's end at EOF
		return "closed"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "closed"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	}
	return err.Error()
}

// diffAt describes where a and b first differ, with some context.
func diffAt(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-200)
	return fmt.Sprintf("first difference at byte %d of %d/%d:\nnet/http: %q\ndefault:  %q",
		i, len(a), len(b), a[lo:min(len(a), i+200)], b[lo:min(len(b), i+200)])
}

// host is the Host line of most cases.
const host = "Host: test\r\n"

func get(target string, extra ...string) string {
	return "GET " + target + " HTTP/1.1\r\n" + host + strings.Join(extra, "") + "\r\n"
}

// engineCases are the conversations of TestEngineConformance.
func engineCases() []rawCase {
	longURL := func(n int) string { return "/request?q=" + strings.Repeat("x", n) }
	chunked := "POST /echo HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n"
	cases := []rawCase{
		// Response writer: framing, sniffing, statuses.
		req("sniffed text", get("/text")),
		req("sniffed html", get("/html")),
		req("empty body", get("/empty")),
		req("declared Content-Length", get("/len")),
		req("fewer bytes than declared", get("/short")),
		req("64 KiB chunked", get("/big")),
		req("flush then write", get("/flush")),
		req("http.Error 500", get("/error")),
		req("mux 404", get("/nope")),
		req("mux 405 with Allow", "POST /only-get HTTP/1.1\r\n"+host+"Content-Length: 0\r\n\r\n"),
		req("200", get("/status/200")),
		req("201", get("/status/201")),
		req("204 refuses a body", get("/status/204")),
		req("304 refuses a body", get("/status/304")),
		req("404 from handler", get("/status/404")),
		req("599 unknown code", get("/status/599")),
		// net/http writes a 101 without a hijack as a final response
		// without a body and goes on reading requests on the connection.
		req("101 without hijack", get("/status/101")),
		{"103 early hints then 200", []step{{get("/early"), "GET GET"}}},
		req("trailers", get("/trailer")),
		req("trailers to HTTP/1.0 are dropped", "GET /trailer HTTP/1.0\r\n\r\n"),
		req("panic: closed, nothing sent", get("/panic")),
		req("ErrAbortHandler after a flushed part", get("/abort")),
		req("hijack", get("/hijack")),
		{"HEAD sniffed text", []step{{"HEAD /text HTTP/1.1\r\n" + host + "\r\n", "HEAD"}}},
		{"HEAD 64 KiB", []step{{"HEAD /big HTTP/1.1\r\n" + host + "\r\n", "HEAD"}}},
		{"HEAD file", []step{{"HEAD /file HTTP/1.1\r\n" + host + "\r\n", "HEAD"}}},
		{"HEAD 204", []step{{"HEAD /status/204 HTTP/1.1\r\n" + host + "\r\n", "HEAD"}}},

		// Files through http.ServeContent (io.ReaderFrom).
		req("3 MiB file", get("/file")),
		req("range", get("/file", "Range: bytes=100-199\r\n")),
		req("suffix range", get("/file", "Range: bytes=-100\r\n")),
		req("two ranges (multipart)", get("/file", "Range: bytes=0-9,1000-1009\r\n")),
		req("unsatisfiable range", get("/file", "Range: bytes=9999999-\r\n")),
		req("If-Modified-Since: 304", get("/file", "If-Modified-Since: "+dataMtime.Format(http.TimeFormat)+"\r\n")),
		req("If-Range mismatch: whole file", get("/file", "Range: bytes=0-9\r\nIf-Range: Mon, 01 Jan 2001 00:00:00 GMT\r\n")),

		// Keep-alive and Connection.
		req("HTTP/1.0 closes", "GET /text HTTP/1.0\r\n\r\n"),
		req("HTTP/1.0 keep-alive", "GET /text HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
		req("HTTP/1.0 keep-alive, no length: closes", "GET /big HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
		req("HTTP/1.0 keep-alive, empty", "GET /empty HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"),
		req("Connection: close", get("/text", "Connection: close\r\n")),
		req("Connection: close among options", get("/text", "Connection: foo, Close\r\n")),
		req("HTTP/1.1 keep-alive", get("/text", "Connection: keep-alive\r\n")),
		{"pipelined", []step{{get("/text") + get("/len") + "HEAD /big HTTP/1.1\r\n" + host + "\r\n" + get("/flush"), "GET GET HEAD GET"}}},
		{"pipelined after a Connection: close", []step{{get("/text", "Connection: close\r\n") + get("/len"), "GET"}}},
		{"two requests in turn", []step{{get("/html"), "GET"}, {get("/big"), "GET"}}},

		// Request bodies.
		req("Content-Length body", "POST /echo HTTP/1.1\r\n"+host+"Content-Length: 5\r\n\r\nhello"),
		req("chunked body", chunked+"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
		req("chunked body with extension and trailer", chunked+"5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n"),
		req("chunked body, bad size", chunked+"zz\r\nhello\r\n0\r\n\r\n"),
		req("chunked body, bare LF", chunked+"5\nhello\n0\n\n"),
		req("body over MaxBodyBytes: 413", "POST /echo HTTP/1.1\r\n"+host+"Content-Length: 20000\r\n\r\n"+strings.Repeat("b", 20000)),
		{"unread small body is skipped", []step{{"POST /text HTTP/1.1\r\n" + host + "Content-Length: 5\r\n\r\nhello" + get("/len"), "GET GET"}}},
		req("unread body over 256 KiB: close", "POST /text HTTP/1.1\r\n"+host+"Content-Length: 300000\r\n\r\nhello"),
		req("Content-Length twice, same", "POST /echo HTTP/1.1\r\n"+host+"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
		req("Content-Length twice, different", "POST /echo HTTP/1.1\r\n"+host+"Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
		req("Content-Length not a number", "POST /echo HTTP/1.1\r\n"+host+"Content-Length: 5x\r\n\r\nhello"),
		req("chunked and Content-Length", "POST /echo HTTP/1.1\r\n"+host+"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
		req("unsupported transfer encoding: 501", "POST /echo HTTP/1.1\r\n"+host+"Transfer-Encoding: gzip\r\n\r\n"),
		req("identity transfer encoding", "POST /echo HTTP/1.1\r\n"+host+"Transfer-Encoding: identity\r\n\r\n"),
		req("chunked, chunked", "POST /echo HTTP/1.1\r\n"+host+"Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"),
		{"Expect: 100-continue", []step{
			{"POST /echo HTTP/1.1\r\n" + host + "Content-Length: 5\r\nExpect: 100-continue\r\n\r\n", "POST"},
			{"hello", "POST"},
		}},
		{"Expect: 100-continue, body sent at once", []step{{"POST /echo HTTP/1.1\r\n" + host + "Content-Length: 5\r\nExpect: 100-continue\r\n\r\nhello", "POST POST"}}},
		req("Expect: 100-continue, body unread", "POST /text HTTP/1.1\r\n"+host+"Content-Length: 5\r\nExpect: 100-continue\r\n\r\n"),
		req("Expect: 100-continue on HTTP/1.0", "POST /echo HTTP/1.0\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\nhello"),
		req("unknown Expect: 417", get("/text", "Expect: coffee\r\n")),

		// Odd but legal syntax.
		req("absolute-form target", "GET http://example.org/request?a=1 HTTP/1.1\r\nHost: other.example\r\n\r\n"),
		req("absolute-form without path", "GET http://example.org HTTP/1.1\r\nHost: example.org\r\n\r\n"),
		req("bare LF line endings", "GET /request HTTP/1.1\nHost: test\nX-A: 1\n\n"),
		{"bare LF, pipelined", []step{{"GET /text HTTP/1.1\nHost: test\n\nGET /len HTTP/1.1\nHost: test\n\n", "GET GET"}}},
		req("multiple lines of one field", get("/request", "X-Multi: a\r\nX-Multi: b, c\r\nx-multi: d\r\n")),
		req("odd whitespace in values", get("/request", "X-Space:   padded  \r\nX-Tab:\tv\t\r\nX-Empty:\r\n")),
		req("long URL under MaxHeaderBytes", get(longURL(6<<10))),
		// Far over (net/http allows 4 KiB over MaxHeaderBytes).
		req("long URL over MaxHeaderBytes: 431", get(longURL(16<<10))),
		req("long header over MaxHeaderBytes: 431", get("/request", "X-Pad: "+strings.Repeat("p", 16<<10)+"\r\n")),
		req("HTTP/1.2 is HTTP/1.x", "GET /request HTTP/1.2\r\n"+host+"\r\n"),
		req("OPTIONS *", "OPTIONS * HTTP/1.1\r\n"+host+"\r\n"),
		req("CONNECT: 405", "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n"),
		req("lower-case method", "get /request HTTP/1.1\r\n"+host+"\r\n"),
		req("escaped path", get("/request%2Fx?q=%41")),
		{"leading CRLF after a POST", []step{{"POST /echo HTTP/1.1\r\n" + host + "Content-Length: 2\r\n\r\nhi\r\n" + get("/text"), "POST GET"}}},

		// Malformed requests: net/http's canned answers.
		req("leading empty line: 400", "\r\n"+get("/text")),
		req("missing Host: 400", "GET /text HTTP/1.1\r\n\r\n"),
		req("HTTP/1.0 without Host", "GET /request HTTP/1.0\r\n\r\n"),
		req("two Host fields: 400", get("/text", "Host: other\r\n")),
		req("bad Host port: 400", "GET /text HTTP/1.1\r\nHost: test:99999\r\n\r\n"),
		req("HTTP/2.0: 505", "GET /text HTTP/2.0\r\n"+host+"\r\n"),
		req("HTTP/3.0: 505", "GET /text HTTP/3.0\r\n"+host+"\r\n"),
		req("malformed version: 400", "GET /text HTTP/1.10\r\n"+host+"\r\n"),
		req("HTTP/0.9 request line: 400", "GET /text\r\n\r\n"),
		req("garbage: 400", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n"),
		req("space before colon: 400", "GET /text HTTP/1.1\r\nHost : test\r\n\r\n"),
		req("obs-fold", get("/request", "X-Fold: a\r\n b\r\n")),
		req("control byte in a name: 400", get("/text", "X\x01: y\r\n")),
		req("NUL in a value: 400", get("/text", "X-V: a\x00b\r\n")),
		req("no colon: 400", get("/text", "NoColon\r\n")),
		req("target not origin-form: 400", "GET text HTTP/1.1\r\n"+host+"\r\n"),
		req("space in target: 400", "GET /te xt HTTP/1.1\r\n"+host+"\r\n"),
	}
	return cases
}

// TestEngineConformance: both engines give the same bytes and the same
// connection fate for every case.
// framingOnly are the cases where h1 frames the same body otherwise
// than net/http: h1 gathers up to 16 KiB before it decides (net/http
// 2 KiB), so a 12 KiB body gets a Content-Length where net/http chunks
// it, and its chunks are cut elsewhere. Their transcripts are compared
// deframed: each response's status, fields but Content-Length and
// Transfer-Encoding, and decoded body.
var framingOnly = map[string]bool{
	"long URL under MaxHeaderBytes": true,
	"64 KiB chunked":                true,
	"two requests in turn":          true,
}

// deframe rewrites the responses of a transcript with their bodies
// decoded and their framing fields dropped; the reads' outcomes and the
// connection's fate stay as they are.
func deframe(t *testing.T, transcript string) string {
	t.Helper()
	sent, rest, _ := strings.Cut(transcript, "\n--- ")
	br := bufio.NewReader(strings.NewReader(sent))
	var out strings.Builder
	for {
		if _, err := br.Peek(1); err == io.EOF {
			break
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
		if err != nil {
			t.Fatalf("deframe: %v in\n%s", err, sent)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("deframe: body: %v", err)
		}
		resp.Header.Del("Content-Length")
		resp.Header.Del("Transfer-Encoding")
		fmt.Fprintf(&out, "%s %s\n%s\n%s\n", resp.Proto, resp.Status, sortedHeader(resp.Header), body)
	}
	return out.String() + "\n--- " + rest
}

func TestEngineConformance(t *testing.T) {
	h := &engineHandlers{file: engineFile(t)}
	o := ServerOptions{Handler: h.mux(), MaxHeaderBytes: engineMaxHeaderBytes, MaxBodyBytes: engineMaxBodyBytes}
	ref := startEngine(t, engines[0], o)
	dut := startEngine(t, engines[1], o)
	for _, c := range engineCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want, got := converse(t, ref, c), converse(t, dut, c)
			if framingOnly[c.name] {
				want, got = deframe(t, want), deframe(t, got)
			}
			if got != want {
				t.Errorf("the engines differ; %s", diffAt(want, got))
				if len(want)+len(got) < 8<<10 {
					t.Logf("net/http:\n%s\ndefault:\n%s", want, got)
				}
			}
		})
	}
}

// TestDeframe: deframing keeps every difference but the framing's.
func TestDeframe(t *testing.T) {
	const head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
	const end = "\n--- connection closed"
	chunked := head + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n" + end
	sized := head + "Content-Length: 5\r\n\r\nabcde" + end
	tests := []struct {
		name  string
		other string
		same  bool
	}{
		{"other framing", sized, true},
		{"other body", head + "Content-Length: 5\r\n\r\nabcdf" + end, false},
		{"other field", "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\nabcde" + end, false},
		{"other status", "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nabcde" + end, false},
		{"other fate", head + "Content-Length: 5\r\n\r\nabcde\n--- connection kept open", false},
		{"one more response", sized[:len(sized)-len(end)] + sized, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if same := deframe(t, chunked) == deframe(t, tt.other); same != tt.same {
				t.Errorf("deframed alike: %v, want %v", same, tt.same)
			}
		})
	}
}
