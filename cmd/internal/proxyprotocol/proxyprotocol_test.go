package proxyprotocol

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// counts records the results counted.
type counts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counts) count(r string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = make(map[string]int)
	}
	c.n[r]++
}

func (c *counts) get(r string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[r]
}

// listen wraps a loopback listener that trusts trusted, and returns it
// with the channel of the connections it accepts.
func listen(t *testing.T, trusted string, timeout time.Duration, c *counts) (net.Listener, chan net.Conn) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Wrap(Options{Trusted: []netip.Prefix{netip.MustParsePrefix(trusted)}, HeaderTimeout: timeout, Count: c.count})(raw)
	accepted := make(chan net.Conn, 16)
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range accepted {
			c.Close()
		}
	})
	return ln, accepted
}

// v2 returns a v2 header of cmd from src.
func v2(cmd proxyproto.ProtocolVersionAndCommand, src string) []byte {
	h := proxyproto.HeaderProxyFromAddrs(2, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src)), &net.TCPAddr{IP: net.IPv4(198, 51, 100, 1), Port: 443})
	h.Command = cmd
	b, err := h.Format()
	if err != nil {
		panic(err)
	}
	return b
}

const request = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

// TestListener: what a trusted and an untrusted peer's first bytes make
// of their connection: served with which address and which bytes, or
// closed, and what is counted.
func TestListener(t *testing.T) {
	tests := []struct {
		name    string
		trusted string // the prefix trusted; 127.0.0.1 is the peer
		send    []byte
		remote  string // the served connection's remote host; "" = closed
		rest    string // what the server reads first
		result  string // counted
	}{
		{"v1 tcp4", "127.0.0.1/32", []byte("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n" + request), "192.0.2.1:56324", request, Accepted},
		{"v1 tcp6", "127.0.0.0/8", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 4000 443\r\n" + request), "[2001:db8::1]:4000", request, Accepted},
		{"v2 tcp4", "127.0.0.1/32", append(v2(proxyproto.PROXY, "203.0.113.7:1234"), request...), "203.0.113.7:1234", request, Accepted},
		{"v2 mapped", "127.0.0.1/32", append(v2(proxyproto.PROXY, "[::ffff:203.0.113.7]:1234"), request...), "203.0.113.7:1234", request, Accepted},
		{"v2 local", "127.0.0.1/32", append(v2(proxyproto.LOCAL, "203.0.113.7:1234"), request...), "127.0.0.1", request, Local},
		{"v1 unknown", "127.0.0.1/32", []byte("PROXY UNKNOWN\r\n" + request), "127.0.0.1", request, Local},
		{"missing", "127.0.0.1/32", []byte(request), "", "", Missing},
		{"closed at once", "127.0.0.1/32", nil, "", "", Missing},
		{"malformed v1", "127.0.0.1/32", []byte("PROXY TCP4 nonsense\r\n" + request), "", "", Malformed},
		{"half a v1 header", "127.0.0.1/32", []byte("PROXY TCP4 192.0.2.1 "), "", "", Malformed}, // not in one read: the library's choice against slow loris
		{"malformed v2", "127.0.0.1/32", append(v2(proxyproto.PROXY, "203.0.113.7:1234")[:12], 0x99, 0x11, 0, 12), "", "", Malformed},
		{"untrusted header", "192.0.2.0/24", []byte("PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n" + request), "127.0.0.1", "PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n" + request, Untrusted},
		{"untrusted v2", "192.0.2.0/24", append(v2(proxyproto.PROXY, "203.0.113.7:1234"), request...), "127.0.0.1", string(append(v2(proxyproto.PROXY, "203.0.113.7:1234"), request...)), Untrusted},
		{"untrusted plain", "192.0.2.0/24", []byte(request), "127.0.0.1", request, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs counts
			ln, accepted := listen(t, tt.trusted, 5*time.Second, &cs)
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tt.send); err != nil {
				t.Fatal(err)
			}
			if tt.send == nil {
				c.(*net.TCPConn).CloseWrite()
			}
			if tt.remote == "" {
				expectClosed(t, c, accepted)
			} else {
				expectServed(t, accepted, tt.remote, tt.rest)
			}
			for _, r := range Results {
				want := 0
				if r == tt.result {
					want = 1
				}
				if got := cs.get(r); got != want {
					t.Errorf("counted %s %d times, want %d", r, got, want)
				}
			}
		})
	}
}

// expectClosed fails unless the server closes c without serving it.
func expectClosed(t *testing.T, c net.Conn, accepted chan net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	if n != 0 || err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read %d, %v: want the connection closed", n, err)
	}
	select {
	case sc := <-accepted:
		t.Fatalf("served %v", sc.RemoteAddr())
	default:
	}
}

// expectServed fails unless a connection is accepted whose remote address
// is (or whose host is) remote and whose first bytes are rest.
func expectServed(t *testing.T, accepted chan net.Conn, remote, rest string) {
	t.Helper()
	var sc net.Conn
	select {
	case sc = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("not accepted within 5s")
	}
	defer sc.Close()
	got := sc.RemoteAddr().String()
	if host, _, _ := net.SplitHostPort(got); got != remote && host != remote {
		t.Errorf("remote %s, want %s", got, remote)
	}
	sc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, len(rest))
	if _, err := io.ReadFull(sc, b); err != nil || string(b) != rest {
		t.Errorf("read %q, %v; want %q", b, err, rest)
	}
}

// TestSlowPeer: a trusted peer that sends half a signature, or nothing, is
// closed at the header timeout and counted, while a peer after it is
// served at once: its Accept does not wait for the slow one.
func TestSlowPeer(t *testing.T) {
	for _, tt := range []struct {
		name string
		send string
	}{
		{"half a v2 signature", "\r\n\r\n"},
		{"silent", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var cs counts
			const timeout = 2 * time.Second
			ln, accepted := listen(t, "127.0.0.1/32", timeout, &cs)
			slow, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer slow.Close()
			io.WriteString(slow, tt.send)
			start := time.Now()
			fast, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer fast.Close()
			io.WriteString(fast, "PROXY TCP4 192.0.2.9 198.51.100.1 1000 80\r\n"+request)
			expectServed(t, accepted, "192.0.2.9:1000", request)
			if d := time.Since(start); d >= timeout {
				t.Errorf("the second peer waited %v, behind the slow one", d)
			}
			expectClosed(t, slow, accepted)
			if got := cs.get(Timeout); got != 1 {
				t.Errorf("counted %d timeouts, want 1", got)
			}
		})
	}
}

// TestClose: Accept returns net.ErrClosed once the listener is closed,
// and a header that arrives after that closes its connection.
func TestClose(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Wrap(Options{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})(raw)
	errc := make(chan error, 1)
	go func() {
		_, err := ln.Accept()
		errc <- err
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: %v", err)
	}
	io.WriteString(c, "PROXY TCP4 192.0.2.1 198.51.100.1 1 2\r\n")
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Error("served after Close")
	}
}

// TestNoTrusted: without trusted peers the listener is not wrapped.
func TestNoTrusted(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if ln := Wrap(Options{})(raw); ln != raw {
		t.Errorf("wrapped: %T", ln)
	}
}

// TestInnerClosed: when the inner listener is closed beneath it, Accept
// returns net.ErrClosed, every time.
func TestInnerClosed(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Wrap(Options{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})(raw)
	raw.Close()
	for i := range 3 {
		if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Accept %d: %v, want net.ErrClosed", i, err)
		}
	}
}
