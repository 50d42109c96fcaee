package e2e

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// The shipped connection timeouts: what the daemons use when a config
// sets none (docs/reference). dnsd's and the mirror's admin listeners
// share theirs; the mirror's public listener has timeouts.read_header.
const (
	shippedAdminReadHeader  = 5 * time.Second
	shippedMirrorReadHeader = 5 * time.Second
)

// TestConnTimeouts runs slow clients against the real daemons' listeners.
//
// Slowloris: a client that drips a request's headers, a byte every 100 ms,
// is cut off after the shipped header timeout (no config sets it), on
// dnsd's admin listener and on both of the mirror's; not before it (it
// would then be some other limit) and not much after.
//
// Idle: a keep-alive connection left idle is closed after the idle
// timeout. That one is bounded by the test (timeouts.idle: 1s on the
// mirror's public listener) because the shipped values, 60 s on the admin
// listeners and 120 s on the public one, would add two minutes to the
// package; what it checks is that the key reaches the listener, and the
// shipped value is the documented default.
func TestConnTimeouts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startMembersDNSD(t, dir)
	const idle = time.Second
	m := startMirror(t, dir, "fra9", d.Admin, "e2e-group-secret", "timeouts: {idle: 1s}\n")

	t.Run("slowloris", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name, addr string
			timeout    time.Duration
		}{
			{"dnsd admin", d.Admin, shippedAdminReadHeader},
			{"mirror admin", m.Admin, shippedAdminReadHeader},
			{"mirror public", m.HTTP, shippedMirrorReadHeader},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				c := dialLoopback(t, tc.addr)
				if _, err := io.WriteString(c, "GET /hello.txt HTTP/1.1\r\nHost: www.example.test\r\n"); err != nil {
					t.Fatal(err)
				}
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					tick := time.NewTicker(100 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := c.Write([]byte("X")); err != nil {
								return
							}
						}
					}
				}()
				closed, after := closedWithin(c, tc.timeout+5*time.Second)
				if !closed || after < tc.timeout-500*time.Millisecond {
					t.Errorf("dripping client: closed %v after %v, want closed after the shipped header timeout %v", closed, after.Round(time.Millisecond), tc.timeout)
				}
				t.Logf("cut off after %v (header timeout %v)", after.Round(time.Millisecond), tc.timeout)
			})
		}
	})

	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		c := dialLoopback(t, m.HTTP)
		if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "GET /hello.txt HTTP/1.1\r\nHost: www.example.test\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4096)
		n, err := c.Read(buf)
		if err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200 ") {
			t.Fatalf("first request on the connection: %q, %v; want a 200", buf[:n], err)
		}
		if err := c.SetDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		closed, after := closedWithin(c, idle+5*time.Second)
		if !closed || after < idle-200*time.Millisecond {
			t.Errorf("idle connection: closed %v after %v, want closed after the idle timeout %v", closed, after.Round(time.Millisecond), idle)
		}
	})
}

// dialLoopback connects to addr over TCP, closed when the test ends.
func dialLoopback(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reports whether the server closes c (read EOF or reset)
// before d passes, and how long it took; what the server writes before
// (a 408, the rest of a response) is read and dropped.
func closedWithin(c net.Conn, d time.Duration) (bool, time.Duration) {
	start := time.Now()
	if err := c.SetReadDeadline(start.Add(d)); err != nil {
		return false, 0
	}
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout()), time.Since(start)
}
