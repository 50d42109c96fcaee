package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scripted is a back end on 127.0.0.1 that answers the n-th request on
// every connection with answers[n] (the last one over and over), then
// closes the connection when close is set.
type scripted struct {
	ln      net.Listener
	answers []string
	close   bool
	accepts chan struct{}
}

func newScripted(t *testing.T, closeAfter bool, answers ...string) *scripted {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &scripted{ln: ln, answers: answers, close: closeAfter, accepts: make(chan struct{}, 100)}
	t.Cleanup(func() { ln.Close() })
	go s.serve()
	return s
}

func (s *scripted) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.accepts <- struct{}{}
		go s.conn(c)
	}
}

func (s *scripted) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		if skipHead(br) != nil {
			return
		}
		if _, err := io.WriteString(c, s.answers[min(n, len(s.answers)-1)]); err != nil || s.close {
			return
		}
	}
}

// skipHead reads a request head, up to its empty line.
func skipHead(br *bufio.Reader) error {
	for {
		line, err := br.ReadString('\n')
		if err != nil || line == "\r\n" {
			return err
		}
	}
}

func get(t *testing.T, p *Pool, head bool) (*Conn, *Response, string, error) {
	t.Helper()
	c, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do([]byte("GET / HTTP/1.1\r\nHost: b\r\n\r\n"), head, 5*time.Second)
	if err != nil {
		c.Close()
		return nil, nil, "", err
	}
	var body bytes.Buffer
	_, err = c.Body().WriteTo(&body)
	return c, resp, body.String(), err
}

func TestConnFraming(t *testing.T) {
	tests := []struct {
		name, answer string
		closeAfter   bool
		head         bool
		body         string
		reused       bool // the next request reuses the connection
		err          error
	}{
		{"length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, false, "hello", true, nil},
		{"large length", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 100000), false, false, strings.Repeat("x", 100000), true, nil},
		{"HEAD has no body", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false, true, "", true, nil},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", false, false, "hello world", true, nil},
		{"chunked with trailers", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5\r\nhello\r\n0\r\nX-Sum: 1\r\nX-More: 2\r\n\r\n", false, false, "hello", true, nil},
		{"until the end", "HTTP/1.0 200 OK\r\n\r\nall of it", true, false, "all of it", false, nil},
		{"304 has no body", "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", false, false, "", true, nil},
		{"cut short", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", true, false, "hello", false, ErrBodyTruncated},
		{"large, cut short (through ReadFrom)", "HTTP/1.1 200 OK\r\nContent-Length: 300000\r\n\r\n" + strings.Repeat("y", 150000), true, false, strings.Repeat("y", 150000), false, ErrBodyTruncated},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", true, false, "ok", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScripted(t, tt.closeAfter, tt.answer)
			p := NewPool(s.ln.Addr().String(), PoolOptions{})
			defer p.Close()
			c, _, body, err := get(t, p, tt.head)
			if !errors.Is(err, tt.err) || body != tt.body {
				t.Fatalf("body %.40q, %v; want %.40q, %v", body, err, tt.body, tt.err)
			}
			c.Release()
			if got := p.Idle() == 1; got != tt.reused {
				t.Errorf("kept idle: %v, want %v", got, tt.reused)
			}
		})
	}
}

func TestPoolReuse(t *testing.T) {
	s := newScripted(t, false, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	p := NewPool(s.ln.Addr().String(), PoolOptions{})
	defer p.Close()
	for i := range 5 {
		c, _, body, err := get(t, p, false)
		if err != nil || body != "ok" || c.Reused != (i > 0) {
			t.Fatalf("request %d: %q, %v, reused %v", i, body, err, c.Reused)
		}
		c.Release()
	}
	if n := len(s.accepts); n != 1 {
		t.Errorf("%d connections for 5 requests, want 1", n)
	}
}

// TestStaleConnection: a back end that closed an idle connection gives
// ErrNoResponse, which a caller retries on a new one.
func TestStaleConnection(t *testing.T) {
	s := newScripted(t, true, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	p := NewPool(s.ln.Addr().String(), PoolOptions{})
	defer p.Close()
	c, _, _, err := get(t, p, false)
	if err != nil {
		t.Fatal(err)
	}
	c.resp.Close = false // as if it had said keep-alive
	c.Release()
	_, _, _, err = get(t, p, false)
	if !errors.Is(err, ErrNoResponse) {
		t.Fatalf("on the closed connection: %v, want ErrNoResponse", err)
	}
}

func TestAbort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accepts and never answers
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			_, _ = io.Copy(io.Discard, c)
		}
	}()
	p := NewPool(ln.Addr().String(), PoolOptions{})
	c, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, c.Abort)
	if _, err := c.Do([]byte("GET / HTTP/1.1\r\nHost: b\r\n\r\n"), false, time.Minute); err == nil {
		t.Fatal("Do returned without an answer")
	}
	c.Release()
	if p.Idle() != 0 {
		t.Error("an aborted connection was kept")
	}
}

// failingWriter fails its writes (write), or its ReadFrom only, as a
// client that left; it has a ReadFrom, as net/http's response writer has.
type failingWriter struct{ write bool }

func (f failingWriter) Write(p []byte) (int, error) {
	if f.write {
		return 0, syscall.EPIPE
	}
	return len(p), nil
}

func (failingWriter) ReadFrom(io.Reader) (int64, error) { return 0, syscall.EPIPE }

// TestClientWriteFails: a body the client does not take fails with a
// WriteError, not as the back end's fault, on the buffered and on the
// ReadFrom path alike.
func TestClientWriteFails(t *testing.T) {
	for _, tt := range []struct {
		name string
		size int
		w    failingWriter
	}{{"buffered", 5, failingWriter{write: true}}, {"ReadFrom with the socket", 300000, failingWriter{}}} {
		t.Run(tt.name, func(t *testing.T) {
			s := newScripted(t, false, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", tt.size, strings.Repeat("z", tt.size)))
			p := NewPool(s.ln.Addr().String(), PoolOptions{})
			defer p.Close()
			c, err := p.Get(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Do([]byte("GET / HTTP/1.1\r\nHost: b\r\n\r\n"), false, 5*time.Second); err != nil {
				t.Fatal(err)
			}
			_, err = c.Body().WriteTo(tt.w)
			var we *WriteError
			if !errors.As(err, &we) {
				t.Errorf("error %v (%T), want a *WriteError", err, err)
			}
		})
	}
}

// TestChunkedTrailersReuse: the trailers after a chunked body are read
// off, so that the next response on the connection parses.
func TestChunkedTrailersReuse(t *testing.T) {
	s := newScripted(t, false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n")
	p := NewPool(s.ln.Addr().String(), PoolOptions{})
	defer p.Close()
	for i := range 3 {
		c, _, body, err := get(t, p, false)
		if err != nil || body != "ok" || c.Reused != (i > 0) {
			t.Fatalf("request %d: %q, %v, reused %v", i, body, err, c.Reused)
		}
		c.Release()
	}
}

// stalling is a back end that answers each request on a connection with
// the script's next step: a head, then after a pause the body (a slow
// body), or nothing (a stalled head).
func stalling(t *testing.T, steps ...func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for _, step := range steps {
			if skipHead(br) != nil {
				return
			}
			step(c)
		}
		io.Copy(io.Discard, c)
	}()
	return ln.Addr().String()
}

// TestHeadDeadline: Do's timeout bounds the wait for a response head,
// armed once per timeout/16 on a connection, but never a body that
// comes after it, on a new or a reused connection.
func TestHeadDeadline(t *testing.T) {
	const timeout = 300 * time.Millisecond
	slowBody := func(c net.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
		time.Sleep(2 * timeout)
		io.WriteString(c, "hello")
	}
	quick := func(c net.Conn) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok") }
	stall := func(net.Conn) {}
	addr := stalling(t, slowBody, quick, slowBody, stall)
	p := NewPool(addr, PoolOptions{})
	defer p.Close()
	do := func(name, want string) {
		t.Helper()
		c, err := p.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do([]byte("GET / HTTP/1.1\r\nHost: b\r\n\r\n"), false, timeout)
		if want == "" {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Errorf("%s: Do: %v, want a timeout", name, err)
			}
			c.Close()
			return
		}
		if err != nil {
			t.Fatalf("%s: Do: %v", name, err)
		}
		var body bytes.Buffer
		if _, err := c.Body().WriteTo(&body); err != nil || body.String() != want || resp.Status != 200 {
			t.Fatalf("%s: %d %q, %v; want 200 %q", name, resp.Status, body.String(), err, want)
		}
		c.Release()
	}
	do("a slow body on a new connection", "hello")
	do("a quick response", "ok")
	do("a slow body on a reused connection", "hello")
	start := time.Now()
	do("a stalled head", "")
	if el := time.Since(start); el < timeout*15/16 {
		t.Errorf("a stalled head timed out after %v, want at least %v", el, timeout*15/16)
	}
}
