package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/probetest"
)

var httpsAddrRE = regexp.MustCompile(`msg="https listening" addr=(\S+)`)

// startHTTPS runs the daemon with yaml (goodYAML's keys or a front
// end's) and tls.listen on 127.0.0.1:0 with the group name's and the host
// name's certificates of a test CA, and returns the HTTPS and the admin
// addresses, the CA and the config's directory.
func startHTTPS(t *testing.T, yaml string) (addr, admin string, ca *probetest.CA, dir string) {
	t.Helper()
	config := writeConfig(t, yaml+`tls:
  listen: ["127.0.0.1:0"]
  certificates:
    - {cert_file: www.crt, key_file: www.key}
    - {cert_file: host.crt, key_file: host.key}
`)
	dir = filepath.Dir(config)
	ca = probetest.NewCA(t, dir, "ca")
	ca.LeafFor(t, dir, "www", "www.example.test")
	ca.LeafFor(t, dir, "host", "a.mirrors.example.test")
	_, admin, logs := startServe(t, config)
	m := httpsAddrRE.FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no https listening line:\n%s", logs.String())
	}
	return m[1], admin, ca, dir
}

// TestPublicHTTPS: tls.listen serves the files over HTTPS (HTTP/2 by
// ALPN, the certificate by SNI, the first without SNI), with the same
// per-client cap as the plain listeners.
func TestPublicHTTPS(t *testing.T) {
	addr, admin, ca, _ := startHTTPS(t, goodYAML+"limits: {max_conns_per_client: 4}\n")
	t.Run("file over h2", func(t *testing.T) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "www.example.test"}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + "/hello.txt")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(body) != "hello\n" || resp.ProtoMajor != 2 {
			t.Fatalf("%s %s %q", resp.Proto, resp.Status, body)
		}
	})
	for _, tt := range []struct{ sni, want string }{
		{"www.example.test", "www"}, {"a.mirrors.example.test", "host"}, {"", "www"},
	} {
		t.Run("SNI "+tt.sni, func(t *testing.T) {
			if got := servedTo(t, ca, addr, tt.sni); got != tt.want {
				t.Errorf("served %q, want %q", got, tt.want)
			}
		})
	}
	// The cap's subtest runs last: the server lets go of a client's closed
	// connections a moment after their close, so that a subtest after it
	// could find the client still at its cap (and its connection refused).
	t.Run("per-client cap", func(t *testing.T) { testHTTPSCap(t, addr, admin, ca) })
}

// testHTTPSCap holds limits.max_conns_per_client (4) TLS connections to
// addr: a fifth is refused and counted; once they close, one is served.
func testHTTPSCap(t *testing.T, addr, admin string, ca *probetest.CA) {
	var held []net.Conn
	dial := func() error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: "www.example.test"})
		if err == nil {
			held = append(held, c)
		}
		return err
	}
	for i := range 4 {
		if err := dial(); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
	}
	if dial() == nil {
		t.Fatal("a fifth connection of one client was served")
	}
	if m := getText(t, "http://"+admin+"/metrics"); !strings.Contains(m, `transmirror_mirror_http_refused_connections_total{listener="public"} 1`) {
		t.Errorf("the refused connection is not counted")
	}
	for _, c := range held {
		c.Close()
	}
	probetest.Until(t, 5*time.Second, func() string {
		if err := dial(); err != nil {
			return "the closed connections still count: " + err.Error()
		}
		held[len(held)-1].Close()
		return ""
	})
}

// TestPublicHTTPSMetrics: a handshake that fails is counted; the metrics
// and the status show each certificate's expiry.
func TestPublicHTTPSMetrics(t *testing.T) {
	addr, admin, _, _ := startHTTPS(t, goodYAML)
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	io.Copy(io.Discard, c) // the server answers plain HTTP 400 and closes
	c.Close()
	probetest.Until(t, 5*time.Second, func() string {
		if strings.Contains(getText(t, "http://"+admin+"/metrics"), "transmirror_mirror_tls_handshake_errors_total 1") {
			return ""
		}
		return "the failed handshake is not counted"
	})
	metrics := getText(t, "http://"+admin+"/metrics")
	for _, name := range []string{"www.example.test", "a.mirrors.example.test"} {
		if !strings.Contains(metrics, `transmirror_mirror_tls_certificate_expiry_timestamp_seconds{name="`+name+`"}`) {
			t.Errorf("no expiry of %s in\n%s", name, metrics)
		}
	}
	if status := getText(t, "http://"+admin+"/v1/status"); !strings.Contains(status, `"tls":[{"names":["www.example.test"],"not_after":`) {
		t.Errorf("status without the certificates: %s", status)
	}
}

// TestPublicHTTPSReload: a reload swaps the certificates; a bad pair
// fails it, naming the file, and keeps the old ones.
func TestPublicHTTPSReload(t *testing.T) {
	addr, admin, ca, dir := startHTTPS(t, goodYAML)
	reload := func() (int, string) {
		resp, err := http.Post("http://"+admin+"/-/reload", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	crt, key := ca.LeafFor(t, t.TempDir(), "www2", "www.example.test")
	rename(t, crt, filepath.Join(dir, "www.crt"))
	rename(t, key, filepath.Join(dir, "www.key"))
	if code, body := reload(); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	if got := servedTo(t, ca, addr, "www.example.test"); got != "www2" {
		t.Errorf("served %q after the reload, want www2", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "host.key"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := reload(); code != http.StatusBadRequest || !strings.Contains(body, "host.key") {
		t.Errorf("reload with a bad key: %d %s", code, body)
	}
	if got := servedTo(t, ca, addr, "a.mirrors.example.test"); got != "host" {
		t.Errorf("served %q after a failed reload, want host", got)
	}
}

// TestFrontEndHTTPS: a site front end whose public listener is HTTPS
// terminates TLS and proxies to its plain back end, telling it the
// scheme (X-Forwarded-Proto: https, from r.TLS).
func TestFrontEndHTTPS(t *testing.T) {
	be := webtest.NewBackend(t, "be", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Header.Get("X-Forwarded-Proto"))
	})
	addr, _, ca, _ := startHTTPS(t, fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: a
host: a.mirrors.example.test
site: {health: {interval: 10ms, rise: 1, fall: 1}}
backends: [{name: be, url: %q}]
`, be.URL))
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: "www.example.test"}}}
	probetest.Until(t, 5*time.Second, func() string {
		resp, err := c.Get("https://" + addr + "/file")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || string(b) != "https" {
			return fmt.Sprintf("%s %q, want 200 https", resp.Status, b)
		}
		return ""
	})
}

// servedTo returns the common name of the certificate served at addr to
// a client sending SNI name ("": none; certstest's leaves are for
// 127.0.0.1 too), verified against ca.
func servedTo(t *testing.T, ca *probetest.CA, addr, name string) string {
	t.Helper()
	if name == "" {
		name = "127.0.0.1" // Go's client sends no SNI for an IP address
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: name})
	if err != nil {
		t.Fatalf("TLS handshake for %q: %v", name, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestDispatcherHTTPS: a request that comes in over TLS (the listener of
// tls.listen: crypto/tls's under the mirror's server) has r.TLS, so
// redirect.scheme auto sends it to an https Location (to a that says it
// serves https); plain stays http.
func TestDispatcherHTTPS(t *testing.T) {
	d := newFakeDNSD(t, "a")
	// a serves http and https, as its reports say: an https request may
	// be sent to it (redirects keep the scheme).
	d.reports["a"] = []probe.Report{{Group: testGroup, Member: "a", Time: time.Now(), Capacity: 1,
		Schemes: []string{probe.SchemeHTTP, probe.SchemeHTTPS}}}
	m := startMirror(t, d, "d", "dispatcher: true\n", deps{})
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	cs, err := certs.LoadAll([]certs.Files{pair(ca.LeafFor(t, dir, "www", testGroup))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.public.Serve(ctx, tls.NewListener(ln, certs.NewSet(cs).ServerConfig())) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	probetest.Until(t, 5*time.Second, func() string {
		if s := m.view.Snapshot(); s == nil || s.Candidates() != 1 {
			return "group view: no candidate yet"
		}
		return ""
	})
	_, tlsPort, _ := net.SplitHostPort(ln.Addr().String())
	_, plainPort, _ := net.SplitHostPort(m.addr)
	c := &http.Client{
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool, ServerName: testGroup}},
	}
	for _, tt := range []struct{ url, want string }{
		{"https://" + ln.Addr().String() + "/f", "https://a.mirrors.test:" + tlsPort + "/f"},
		{"http://" + m.addr + "/f", "http://a.mirrors.test:" + plainPort + "/f"},
	} {
		req, err := http.NewRequest(http.MethodGet, tt.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = testGroup + ":" + tlsPort
		if strings.HasPrefix(tt.url, "http:") {
			req.Host = testGroup + ":" + plainPort
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || loc != tt.want {
			t.Errorf("GET %s: %s, Location %q; want 302 to %s", tt.url, resp.Status, loc, tt.want)
		}
	}
}

func pair(cert, key string) certs.Files { return certs.Files{CertFile: cert, KeyFile: key} }
