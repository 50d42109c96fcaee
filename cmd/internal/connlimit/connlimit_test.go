package connlimit

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serve accepts on l until it is closed, writes "A" on every accepted
// connection and keeps it open until the test ends.
func serve(t *testing.T, l *Listener) chan net.Conn {
	t.Helper()
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			c.Write([]byte("A"))
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for c := range accepted {
			c.Close()
		}
	})
	return accepted
}

// dial connects to addr from the loopback address from and reports
// whether the server accepted the connection (it wrote "A") or closed it.
func dial(t *testing.T, from, addr string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 1)
	_, err = io.ReadFull(c, b)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("from %s: neither accepted nor closed within 5s", from)
	}
	return c, err == nil && b[0] == 'A'
}

// TestPerClientCap: the N+1th connection from one address is closed at
// once and counted while another address is served; closing one of the
// N makes room again.
func TestPerClientCap(t *testing.T) {
	const max = 3
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	l := New(inner, max, func() { refused.Add(1) })
	accepted := serve(t, l)
	addr := inner.Addr().String()
	client := netip.MustParseAddr("127.0.0.1")

	var held []net.Conn // the server's ends
	for i := range max {
		if _, ok := dial(t, "127.0.0.1", addr); !ok {
			t.Fatalf("connection %d of %d refused", i+1, max)
		}
		held = append(held, <-accepted)
	}
	// A connection handed off to another process needs its descriptor.
	if sc, ok := held[0].(syscall.Conn); !ok {
		t.Error("accepted connection is not a syscall.Conn")
	} else if _, err := sc.SyscallConn(); err != nil {
		t.Errorf("SyscallConn: %v", err)
	}
	if got := l.Open(client); got != max {
		t.Errorf("Open = %d, want %d", got, max)
	}
	if _, ok := dial(t, "127.0.0.1", addr); ok {
		t.Fatalf("connection %d from one client accepted, want it closed", max+1)
	}
	if got := refused.Load(); got != 1 {
		t.Errorf("refused = %d, want 1", got)
	}
	if _, ok := dial(t, "127.0.0.2", addr); !ok {
		t.Fatal("another client refused while the first is at its cap")
	}
	<-accepted

	// The server closes one of the client's connections (twice: the
	// place is freed once): there is room for one more, not two.
	held[0].Close()
	held[0].Close()
	if got := l.Open(client); got != max-1 {
		t.Errorf("Open after a close = %d, want %d", got, max-1)
	}
	if _, ok := dial(t, "127.0.0.1", addr); !ok {
		t.Fatal("refused after a connection was closed")
	}
	<-accepted
	if _, ok := dial(t, "127.0.0.1", addr); ok {
		t.Fatal("accepted over the cap again")
	}
	if got := refused.Load(); got != 2 {
		t.Errorf("refused = %d, want 2", got)
	}
}

// TestNoLimit: max 0 returns the inner connections as they are.
func TestNoLimit(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, 0, nil)
	accepted := serve(t, l)
	for range 5 {
		if _, ok := dial(t, "127.0.0.1", inner.Addr().String()); !ok {
			t.Fatal("refused without a limit")
		}
		if c := <-accepted; c.(*net.TCPConn) == nil {
			t.Fatal("not a TCP conn")
		}
	}
}

// TestClientOf: an IPv4 address is its own client; an IPv6 address counts
// for its /64, so that one host can not get around the cap by dialling
// from each of its addresses.
func TestClientOf(t *testing.T) {
	cases := []struct{ name, ip, want string }{
		{"IPv4", "192.0.2.7", "192.0.2.7"},
		{"IPv4-mapped IPv6 is IPv4", "::ffff:192.0.2.7", "192.0.2.7"},
		{"IPv6: its /64", "2001:db8:1:2:aaaa:bbbb:cccc:dddd", "2001:db8:1:2::"},
		{"another address of the same /64", "2001:db8:1:2::1", "2001:db8:1:2::"},
		{"the next /64 is another client", "2001:db8:1:3::1", "2001:db8:1:3::"},
		{"a zone is not part of the client", "fe80::1%eth0", "fe80::"},
		{"IPv6 loopback", "::1", "::"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := clientOf(netip.MustParseAddr(tc.ip)); got != netip.MustParseAddr(tc.want) {
				t.Errorf("clientOf(%s) = %s, want %s", tc.ip, got, tc.want)
			}
		})
	}
}

// readFromConn is a net.Conn whose ReadFrom is recorded.
type readFromConn struct {
	net.Conn
	called bool
}

func (c *readFromConn) ReadFrom(r io.Reader) (int64, error) {
	c.called = true
	return io.Copy(io.Discard, r)
}

// plainConn is a net.Conn without ReadFrom.
type plainConn struct {
	net.Conn
	got bytes.Buffer
}

func (c *plainConn) Write(p []byte) (int, error) { return c.got.Write(p) }

// TestReadFromPassesThrough: a capped connection gives the inner one's
// ReadFrom a socket's bytes (splice) and copies the rest, also when the
// inner one has none.
func TestReadFromPassesThrough(t *testing.T) {
	t.Run("a socket to the inner ReadFrom", func(t *testing.T) {
		inner := &readFromConn{}
		c := &conn{Conn: inner, release: func() {}}
		a, b := net.Pipe()
		go func() { b.Write([]byte("body")); b.Close() }()
		if n, err := c.ReadFrom(&io.LimitedReader{R: a, N: 4}); err != nil || n != 4 || !inner.called {
			t.Errorf("ReadFrom: %d, %v; inner ReadFrom called %v", n, err, inner.called)
		}
	})
	t.Run("anything else copied", func(t *testing.T) {
		inner := &readFromConn{Conn: &plainConn{}}
		c := &conn{Conn: inner, release: func() {}, bufs: &sync.Pool{}}
		if n, err := c.ReadFrom(strings.NewReader("body")); err != nil || n != 4 || inner.called {
			t.Errorf("ReadFrom: %d, %v; inner ReadFrom called %v", n, err, inner.called)
		}
	})
	t.Run("no inner ReadFrom", func(t *testing.T) {
		inner := &plainConn{}
		c := &conn{Conn: inner, release: func() {}}
		if n, err := c.ReadFrom(strings.NewReader("body")); err != nil || n != 4 || inner.got.String() != "body" {
			t.Errorf("ReadFrom: %d, %v; wrote %q", n, err, inner.got.String())
		}
	})
	t.Run("a TCP connection accepted by the cap", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := New(ln, 4, nil)
		defer l.Close()
		go func() {
			if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
				defer c.Close()
				io.Copy(io.Discard, c)
			}
		}()
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, ok := c.(io.ReaderFrom); !ok {
			t.Fatalf("%T has no ReadFrom", c)
		}
	})
}
