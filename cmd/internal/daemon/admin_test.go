package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/probe/probetest"
)

func TestAdminAddr(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{":8053", "127.0.0.1:8053"},
		{":0", "127.0.0.1:0"},
		{"0.0.0.0:8053", "0.0.0.0:8053"},
		{"[::]:8053", "[::]:8053"},
		{"[::1]:8053", "[::1]:8053"},
		{"192.0.2.53:8053", "192.0.2.53:8053"},
		{"localhost:8053", "localhost:8053"},
		{"8053", "8053"}, // not HOST:PORT: Listen says so
	} {
		if got := AdminAddr(tt.in); got != tt.want {
			t.Errorf("AdminAddr(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// serveAdmin serves a handler that answers "ok" through ListenAdmin and
// NewAdminServer with o until the test ends; tune changes the server's
// settings first. It returns the listener's address and the logs.
func serveAdmin(t *testing.T, addr string, o ListenOptions, tune func(*http.Server)) (string, *strings.Builder) {
	t.Helper()
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	ln, err := ListenAdmin(addr, o, logger)
	if err != nil {
		t.Fatal(err)
	}
	hs := NewAdminServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		io.WriteString(w, "ok")
	}), 0, slog.New(slog.DiscardHandler))
	if tune != nil {
		tune(hs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeHTTP("test: admin", ln, hs, time.Second)(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String(), &logs
}

func TestNewAdminServer(t *testing.T) {
	hs := NewAdminServer(http.NotFoundHandler(), 8<<10, slog.New(slog.DiscardHandler))
	for name, d := range map[string]time.Duration{
		"read_header": hs.ReadHeaderTimeout, "read": hs.ReadTimeout, "write": hs.WriteTimeout, "idle": hs.IdleTimeout,
	} {
		if d <= 0 {
			t.Errorf("%s timeout %v, want > 0", name, d)
		}
	}
	if hs.MaxHeaderBytes != 8<<10 {
		t.Errorf("MaxHeaderBytes %d", hs.MaxHeaderBytes)
	}
	addr, _ := serveAdmin(t, "127.0.0.1:0", ListenOptions{}, nil)
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Post("http://"+addr+"/", "text/plain", strings.NewReader(strings.Repeat("x", AdminMaxBody+1)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("body over AdminMaxBody: %s, want 413", resp.Status)
	}
}

// TestAdminTLS: with a key pair the admin listener speaks HTTPS only; a
// new pair stored is what the next handshake gets.
func TestAdminTLS(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	one, err := certs.Load(ca.Leaf(t, dir, "one"))
	if err != nil {
		t.Fatal(err)
	}
	kp := certs.New(one)
	addr, logs := serveAdmin(t, "127.0.0.1:0", ListenOptions{TLS: kp}, nil)
	if !strings.Contains(logs.String(), "tls=true") {
		t.Errorf("log %q lacks tls=true", logs.String())
	}

	resp, err := ca.Client().Get("https://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		t.Fatalf("HTTPS: %s %q", resp.Status, body)
	}
	if resp.TLS == nil || resp.TLS.Version < 0x0303 {
		t.Errorf("TLS state %+v, want TLS 1.2 or later", resp.TLS)
	}

	// Plain HTTP gets Go's 400 for HTTP on an HTTPS port, never the handler.
	resp, err = (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/")
	if err == nil {
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || string(body) == "ok" {
			t.Errorf("plain HTTP: %s %q, want it refused", resp.Status, body)
		}
	}

	two, err := certs.Load(ca.Leaf(t, dir, "two"))
	if err != nil {
		t.Fatal(err)
	}
	if got := ca.Served(t, addr); got != "one" {
		t.Fatalf("served %q before the swap", got)
	}
	kp.Store(two)
	if got := ca.Served(t, addr); got != "two" {
		t.Errorf("served %q after the swap, want two", got)
	}
}

// TestAdminLimits: the admin listener closes a client's connection beyond
// max_conns_per_client and counts it while another client is served; a
// client that drips its headers is cut off after the header timeout; an
// idle keep-alive connection is closed after the idle timeout.
func TestAdminLimits(t *testing.T) {
	reg := prometheus.NewRegistry()
	refused, err := Refused("test", reg)
	if err != nil {
		t.Fatal(err)
	}
	const max = 2
	addr, _ := serveAdmin(t, "127.0.0.1:0", ListenOptions{MaxConnsPerClient: max, Refused: refused.WithLabelValues(ListenerAdmin)},
		func(hs *http.Server) {
			hs.ReadHeaderTimeout = 200 * time.Millisecond
			hs.IdleTimeout = 200 * time.Millisecond
		})
	dial := func(from string) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// get sends one keep-alive request on c and reports whether it was
	// answered.
	get := func(c net.Conn) bool {
		t.Helper()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
			return false
		}
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		return err == nil && strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200 ")
	}
	// closedWithin reports whether the server closes c (read EOF or
	// reset) before d passes, and how long it took.
	closedWithin := func(c net.Conn, d time.Duration) (bool, time.Duration) {
		start := time.Now()
		c.SetReadDeadline(start.Add(d))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout()), time.Since(start)
	}

	t.Run("per-client cap", func(t *testing.T) {
		var held []net.Conn
		for range max {
			c := dial("127.0.0.1")
			if !get(c) {
				t.Fatal("a connection under the cap was not served")
			}
			held = append(held, c)
		}
		over := dial("127.0.0.1")
		if get(over) {
			t.Fatal("connection over the cap served")
		}
		if got := testutil.ToFloat64(refused.WithLabelValues(ListenerAdmin)); got != 1 {
			t.Errorf("refused = %v, want 1", got)
		}
		if !get(dial("127.0.0.2")) {
			t.Error("another client refused")
		}
		for _, c := range held {
			c.Close()
		}
	})
	t.Run("slowloris", func(t *testing.T) {
		c := dial("127.0.0.3")
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: test\r\n")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			tick := time.NewTicker(20 * time.Millisecond)
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
		if closed, after := closedWithin(c, 10*time.Second); !closed || after < 100*time.Millisecond {
			t.Errorf("dripping client: closed %v after %v, want closed after the 200ms header timeout", closed, after)
		}
	})
	t.Run("idle", func(t *testing.T) {
		c := dial("127.0.0.4")
		if !get(c) {
			t.Fatal("not served")
		}
		if closed, after := closedWithin(c, 10*time.Second); !closed || after < 100*time.Millisecond {
			t.Errorf("idle connection: closed %v after %v, want closed after the 200ms idle timeout", closed, after)
		}
	})
}
