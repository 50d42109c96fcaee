package daemon

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/cmd/internal/proxyprotocol"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestListenWrap: ListenOptions.Wrap sits beneath the cap and TLS: a
// PROXY header comes before the TLS handshake, the handler sees the
// client it carries, and the cap counts that client, not the balancer.
func TestListenWrap(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	leaf, err := certs.Load(ca.Leaf(t, dir, "one"))
	if err != nil {
		t.Fatal(err)
	}
	refused := prometheus.NewCounter(prometheus.CounterOpts{Name: "refused_total", Help: "h"})
	ln, err := Listen("127.0.0.1:0", ListenOptions{
		MaxConnsPerClient: 1, Refused: refused, TLS: certs.New(leaf),
		Wrap: proxyprotocol.Wrap(proxyprotocol.Options{Trusted: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.RemoteAddr)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	// get opens a connection carrying src, and returns what the handler
	// saw as the client (an error: the connection was closed).
	get := func(t *testing.T, src string) (string, error) {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "PROXY TCP4 "+src+" 192.0.2.99 "+"4000 443\r\n")
		tc := tls.Client(c, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
		if _, err := io.WriteString(tc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	t.Run("the handler sees the carried client", func(t *testing.T) {
		if got, err := get(t, "192.0.2.1"); got != "192.0.2.1:4000" || err != nil {
			t.Errorf("handler saw %q, %v; want 192.0.2.1:4000", got, err)
		}
		if got, err := get(t, "198.51.100.1"); got != "198.51.100.1:4000" || err != nil {
			t.Errorf("another client: handler saw %q, %v (the cap counted the balancer?)", got, err)
		}
	})
	t.Run("the cap counts the carried client", func(t *testing.T) {
		if _, err := get(t, "203.0.113.1"); err != nil {
			t.Fatal(err)
		}
		if got, err := get(t, "203.0.113.1"); err == nil {
			t.Errorf("second connection of one client served (%q)", got)
		}
		if got := testutil.ToFloat64(refused); got != 1 {
			t.Errorf("refused %v, want 1", got)
		}
	})
}
