package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// Tests that run against both engines and assert the same outcome where
// bytes can not be compared: timeouts, slow clients, streaming, request
// contexts and shutdown. Deadlines are generous: a busy 2-core machine
// must pass them.

// TestEngineHarness proves that TestEngineConformance's transcripts tell
// answers apart: a few of them are compared with hand-built ones, and a
// server whose handlers differ slightly from the reference's must give
// different transcripts.
func TestEngineHarness(t *testing.T) {
	h := &engineHandlers{file: engineFile(t)}
	o := ServerOptions{Handler: h.mux(), MaxHeaderBytes: engineMaxHeaderBytes, MaxBodyBytes: engineMaxBodyBytes}
	const text = "HTTP/1.1 200 OK\r\nDate: <date>\r\nContent-Length: 13\r\nContent-Type: text/plain; charset=utf-8\r\n"
	const probed = "\n--- connection kept open; the probe's answer (then closed):\n" + text + "Connection: close\r\n\r\nhello, world\n"
	want := map[string]string{
		"sniffed text":                text + "\r\nhello, world\n" + probed,
		"missing Host: 400":           "HTTP/1.1 400 Bad Request: missing required Host header\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request: missing required Host header\n--- connection closed",
		"panic: closed, nothing sent": "\n--- step 0: read GET: closed\nconnection closed",
		"HTTP/1.0 keep-alive": "HTTP/1.0 200 OK\r\nDate: <date>\r\nContent-Length: 13\r\nContent-Type: text/plain; charset=utf-8\r\n" +
			"Connection: keep-alive\r\n\r\nhello, world\n" + probed,
		"flush then write": "HTTP/1.1 200 OK\r\nDate: <date>\r\nContent-Type: text/plain; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"6\r\nfirst\n\r\n7\r\nsecond\n\r\n0\r\n\r\n" + probed,
	}
	cases := map[string]rawCase{}
	for _, c := range engineCases() {
		cases[c.name] = c
	}
	for _, en := range engines {
		addr := startEngine(t, en, o)
		for name, w := range want {
			t.Run(en.name+"/"+name, func(t *testing.T) {
				c, ok := cases[name]
				if !ok {
					t.Fatalf("no case %q", name)
				}
				if got := converse(t, addr, c); got != w {
					t.Errorf("transcript %q,\nwant %q", got, w)
				}
			})
		}
	}

	// Sabotage: each wrapper changes what the handlers answer in a way a
	// faulty engine could; every one must be seen in some cases.
	sabotage := []struct {
		name string
		wrap func(http.Handler) http.Handler
	}{
		{"an extra header field", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Extra", "1")
				h.ServeHTTP(w, r)
			})
		}},
		{"a flush after the handler (chunked, not Content-Length)", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h.ServeHTTP(w, r)
				http.NewResponseController(w).Flush()
			})
		}},
		{"Connection: close", func(h http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
				h.ServeHTTP(w, r)
			})
		}},
	}
	ref := startEngine(t, engines[0], o)
	for _, sb := range sabotage {
		t.Run("sabotage/"+sb.name, func(t *testing.T) {
			so := o
			so.Handler = sb.wrap(o.Handler)
			bad := startEngine(t, engines[1], so)
			for _, name := range []string{"sniffed text", "HTTP/1.0 keep-alive", "pipelined"} {
				if converse(t, ref, cases[name]) == converse(t, bad, cases[name]) {
					t.Errorf("case %q: the sabotaged server's transcript is the reference's", name)
				}
			}
		})
	}
}

// outcomeConn dials addr with a deadline of 20 s.
func outcomeConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedWithin reads c, a connection or a reader of one, until the server
// closes it and returns what it read; it fails the test if the connection
// is still open at its deadline.
func closedWithin(t *testing.T, c io.Reader) string {
	t.Helper()
	var got strings.Builder
	_, err := io.Copy(&got, c)
	if errClass(err) == "timeout" {
		s := got.String()
		t.Fatalf("connection still open; got %d bytes: %q", len(s), s[:min(len(s), 200)])
	}
	return got.String()
}

// TestEngineReadHeaderTimeout: a client that sends its headers too
// slowly (a slowloris) is disconnected, without a response or with a
// bare 400, not before the timeout; on a kept connection too, after a
// request whose head came whole (the idle timeout, a minute, is not what
// ends it).
func TestEngineReadHeaderTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	tests := []struct {
		name string
		drip bool // keep sending one header byte at a time
		kept bool // after a request on the same connection
	}{
		{"headers dripped", true, false},
		{"headers stalled", false, false},
		{"headers dripped on a kept connection", true, true},
		{"headers stalled on a kept connection", false, true},
	}
	for _, en := range engines {
		addr := startEngine(t, en, ServerOptions{Handler: (&engineHandlers{}).mux(), ReadHeaderTimeout: timeout, IdleTimeout: time.Minute})
		for _, tt := range tests {
			t.Run(en.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				// Before the server can start its timer: at the dial, or
				// (kept) at the first response.
				start := time.Now()
				c := outcomeConn(t, addr)
				if tt.kept {
					keptRequest(t, c)
				}
				if _, err := io.WriteString(c, "GET /text HTTP/1.1\r\nHost: test\r\nX-Slow: "); err != nil {
					t.Fatal(err)
				}
				stop := make(chan struct{})
				defer close(stop)
				if tt.drip {
					go drip(c, stop)
				}
				got := closedWithin(t, c)
				if got != "" && !strings.HasPrefix(got, "HTTP/1.1 400 ") {
					t.Errorf("got %q, want nothing or a 400", got)
				}
				if el := time.Since(start); el < timeout {
					t.Errorf("closed after %v, before the timeout %v", el, timeout)
				}
			})
		}
	}
}

// keptRequest sends a whole request on c and reads its response, byte
// by byte: nothing of what follows is read ahead.
func keptRequest(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := io.WriteString(c, get("/text")); err != nil {
		t.Fatal(err)
	}
	if err := readResponse(bufio.NewReaderSize(oneByte{c}, 16), "GET"); err != nil {
		t.Fatal(err)
	}
}

// oneByte reads one byte at a time.
type oneByte struct{ r io.Reader }

func (o oneByte) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 1)]) }

// drip writes a byte to c every 20 ms until stop is closed or a write fails.
func drip(c net.Conn, stop <-chan struct{}) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
		}
	}
}

// TestEngineIdleTimeout: a keep-alive connection idle after its response
// is closed after the idle timeout, without a byte more.
func TestEngineIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	for _, en := range engines {
		t.Run(en.name, func(t *testing.T) {
			t.Parallel()
			addr := startEngine(t, en, ServerOptions{Handler: (&engineHandlers{}).mux(), IdleTimeout: idle})
			c := outcomeConn(t, addr)
			br := bufio.NewReader(c)
			for i := range 2 { // the timer starts again after each request
				if _, err := io.WriteString(c, get("/text")); err != nil {
					t.Fatal(err)
				}
				if err := readResponse(br, "GET"); err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
			}
			from := time.Now()
			if rest := closedWithin(t, br); rest != "" {
				t.Errorf("got %q on an idle connection", rest)
			}
			if el := time.Since(from); el < idle/2 {
				t.Errorf("closed after %v idle, want about %v", el, idle)
			}
		})
	}
}

// stalledReader dials addr with a receive buffer of 64 KiB (with 4 KiB,
// a connection closed by net/http took more than 20 s to drain the data
// still queued in the server's kernel), sends request and
// reads nothing: the server's writes soon block.
func stalledReader(t *testing.T, addr, request string) net.Conn {
	t.Helper()
	c := outcomeConn(t, addr)
	if err := c.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEngineSendTimeout: a client that stops reading is cut off by
// ServerOptions.SendTimeout, both when the handler writes (Write) and
// when it sends a file (http.ServeContent, io.ReaderFrom); and a handler
// that sets its own write deadline through http.ResponseController gets
// an error once it passes.
func TestEngineSendTimeout(t *testing.T) {
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse.bin") // more than loopback's buffers hold
	if f, err := os.Create(sparse); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if err := os.Truncate(sparse, 256<<20); err != nil {
		t.Fatal(err)
	}
	type ended struct {
		path string
		err  error
	}
	for _, en := range engines {
		t.Run(en.name, func(t *testing.T) {
			t.Parallel()
			done := make(chan ended, 4)
			m := http.NewServeMux()
			m.HandleFunc("/write", func(w http.ResponseWriter, r *http.Request) {
				done <- ended{r.URL.Path, writeLots(w)}
			})
			m.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
				f, err := os.Open(sparse)
				if err != nil {
					done <- ended{r.URL.Path, err}
					return
				}
				defer f.Close()
				cw := &errWriter{ResponseWriter: w}
				http.ServeContent(cw, r, "sparse.bin", dataMtime, f)
				done <- ended{r.URL.Path, cw.err}
			})
			m.HandleFunc("/deadline", func(w http.ResponseWriter, r *http.Request) {
				if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
					done <- ended{r.URL.Path, fmt.Errorf("SetWriteDeadline: %w", err)}
					return
				}
				done <- ended{r.URL.Path, writeLots(w)}
			})
			// /deadline is served without the send timeout, which would
			// set deadlines of its own.
			timed := startEngine(t, en, ServerOptions{Handler: m, SendTimeout: 300 * time.Millisecond})
			untimed := startEngine(t, en, ServerOptions{Handler: m})
			for _, path := range []string{"/write", "/file", "/deadline"} {
				addr := timed
				if path == "/deadline" {
					addr = untimed
				}
				c := stalledReader(t, addr, get(path))
				select {
				case e := <-done:
					if e.path != path || !errors.Is(e.err, os.ErrDeadlineExceeded) {
						t.Errorf("%s: handler of %s ended with %v, want a deadline exceeded", path, e.path, e.err)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("%s: handler still writing after 20 s", path)
				}
				closedWithin(t, c) // what the buffers held, then the end
			}
		})
	}
}

// writeLots writes up to 1 GiB in 64 KiB writes and returns the error
// that stopped it.
func writeLots(w http.ResponseWriter) error {
	w.Header().Set("Content-Type", "application/octet-stream")
	buf := make([]byte, 64<<10)
	for range 1 << 14 {
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return errors.New("1 GiB written to a client that reads nothing")
}

// errWriter keeps the first error of a Write or ReadFrom of a response.
type errWriter struct {
	http.ResponseWriter
	err error
}

func (w *errWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.note(err)
	return n, err
}

func (w *errWriter) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(w.ResponseWriter, r) // the writer's own ReadFrom when it has one
	w.note(err)
	return n, err
}

func (w *errWriter) note(err error) {
	if w.err == nil {
		w.err = err
	}
}

func (w *errWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestEngineStreaming: a flushed chunk reaches the client while the
// handler still runs.
func TestEngineStreaming(t *testing.T) {
	for _, en := range engines {
		t.Run(en.name, func(t *testing.T) {
			t.Parallel()
			h := &engineHandlers{started: make(chan string, 1), release: make(chan struct{})}
			addr := startEngine(t, en, ServerOptions{Handler: h.mux()})
			c := outcomeConn(t, addr)
			if _, err := io.WriteString(c, get("/stream", "Connection: close\r\n")); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if err != nil || line != "first chunk\n" {
				t.Fatalf("first chunk %q, %v", line, err)
			}
			// The handler can not have returned: it waits for this.
			close(h.release)
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != "second chunk\n" {
				t.Fatalf("after the release %q, %v", rest, err)
			}
		})
	}
}

// TestEngineRequestContext: the request context is cancelled when the
// client goes away during the handler.
func TestEngineRequestContext(t *testing.T) {
	for _, en := range engines {
		t.Run(en.name, func(t *testing.T) {
			t.Parallel()
			h := &engineHandlers{started: make(chan string, 1), cancelled: make(chan error, 1)}
			addr := startEngine(t, en, ServerOptions{Handler: h.mux()})
			c := outcomeConn(t, addr)
			if _, err := io.WriteString(c, get("/slow")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not start")
			}
			c.Close()
			var err error
			probetest.Until(t, 5*time.Second, func() string {
				select {
				case err = <-h.cancelled:
					return ""
				default:
					return "the request context cancelled after the client left"
				}
			})
			if !errors.Is(err, context.Canceled) {
				t.Errorf("request context ended with %v, want context.Canceled", err)
			}
		})
	}
}

// TestEngineGracefulShutdown: at shutdown an idle keep-alive connection
// is closed, new connections are refused, and the request in flight
// completes, after which Serve returns nil.
func TestEngineGracefulShutdown(t *testing.T) {
	for _, en := range engines {
		t.Run(en.name, func(t *testing.T) {
			t.Parallel()
			h := &engineHandlers{started: make(chan string, 1), release: make(chan struct{})}
			srv, err := NewServer(ServerOptions{Handler: h.mux(), NetHTTP: en.netHTTP})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, ln) }()

			idle := outcomeConn(t, addr)
			ibr := bufio.NewReader(idle)
			if _, err := io.WriteString(idle, get("/text")); err != nil {
				t.Fatal(err)
			}
			if err := readResponse(ibr, "GET"); err != nil {
				t.Fatal(err)
			}
			busy := outcomeConn(t, addr)
			if _, err := io.WriteString(busy, get("/stream", "Connection: close\r\n")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-h.started:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not start")
			}

			cancel()
			if rest := closedWithin(t, ibr); rest != "" {
				t.Errorf("idle connection got %q at shutdown", rest)
			}
			probetest.Until(t, 10*time.Second, func() string {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return ""
				}
				c.Close()
				return "new connections refused: one was accepted"
			})
			select {
			case err := <-served:
				t.Fatalf("Serve returned with a request in flight: %v", err)
			default:
			}
			close(h.release)
			got := closedWithin(t, busy)
			if !strings.HasSuffix(got, "first chunk\n\r\nd\r\nsecond chunk\n\r\n0\r\n\r\n") {
				t.Errorf("in-flight response %q, want it whole", got)
			}
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("Serve did not return")
			}
		})
	}
}
