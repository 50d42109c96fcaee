package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// mirrorTLSYAML is a mirror with HTTPS beside plain HTTP: the group
// name's certificate and the member host name's.
const mirrorTLSYAML = `listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: t1
host: t1.mirrors.example.test
root: root
tls:
  listen: ["127.0.0.1:0"]
  certificates:
    - {cert_file: www.crt, key_file: www.key}
    - {cert_file: host.crt, key_file: host.key}
`

// TestMirrorTLS starts the real mirror with tls.listen and two
// certificates of a test CA: curl gets a file by the group name and by
// the host name, each verified against its own certificate; Go's client
// negotiates HTTP/2; a SIGHUP after the files are swapped serves the new
// certificate to new connections while a keep-alive connection goes on,
// and a pair that does not load fails the reload and keeps the old ones.
func TestMirrorTLS(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("0123456789abcdef", 256) // 4 KiB
	writeFile(t, filepath.Join(dir, "root"), "file", body)
	ca := probetest.NewCA(t, dir, "ca")
	ca.LeafFor(t, dir, "www", "www.example.test")
	ca.LeafFor(t, dir, "host", "t1.mirrors.example.test")
	m := runMirror(t, writeFile(t, dir, "mirror.yaml", mirrorTLSYAML), "mirror")
	if m.HTTPS == "" {
		t.Fatalf("no https listening line:\n%s", m.Logs())
	}
	_, port, _ := net.SplitHostPort(m.HTTPS)

	for _, tt := range []struct{ name, cn string }{
		{"www.example.test", "www"}, {"t1.mirrors.example.test", "host"},
	} {
		t.Run("curl "+tt.name, func(t *testing.T) {
			out, err := exec.Command("curl", "-sS", "--max-time", "10", "--cacert", ca.File,
				"--resolve", tt.name+":"+port+":127.0.0.1", "-w", "\n%{http_code} %{certs}",
				"https://"+tt.name+":"+port+"/file").CombinedOutput()
			if err != nil {
				t.Fatalf("curl: %v\n%s", err, out)
			}
			got, info, _ := strings.Cut(string(out), "\n")
			if got != body || !strings.HasPrefix(info, "200 ") || !strings.Contains(info, "Subject:CN = "+tt.cn+"\n") {
				t.Fatalf("curl got %d bytes, %q", len(got), info[:min(len(info), 200)])
			}
		})
	}
	t.Run("h2", func(t *testing.T) {
		c := tlsClient(ca, m.HTTPS)
		defer c.CloseIdleConnections()
		resp, err := c.Get("https://www.example.test/file")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 || string(got) != body || resp.TLS.PeerCertificates[0].Subject.CommonName != "www" {
			t.Fatalf("%s %s, %d bytes", resp.Proto, resp.Status, len(got))
		}
	})
	t.Run("reload", func(t *testing.T) { testMirrorTLSReload(t, m, ca, dir) })
}

// testMirrorTLSReload swaps the group name's certificate and sends
// SIGHUP while a keep-alive connection is open, then breaks a pair.
func testMirrorTLSReload(t *testing.T, m *mirrorProc, ca *probetest.CA, dir string) {
	kept := tlsClient(ca, m.HTTPS)
	defer kept.CloseIdleConnections()
	if cn, reused := getOver(t, kept); cn != "www" || reused {
		t.Fatalf("first request: certificate %q, reused %v", cn, reused)
	}
	crt, key := ca.LeafFor(t, t.TempDir(), "www2", "www.example.test")
	for from, to := range map[string]string{crt: "www.crt", key: "www.key"} {
		if err := os.Rename(from, filepath.Join(dir, to)); err != nil {
			t.Fatal(err)
		}
	}
	sighup(t, m, "msg=reloaded")
	if cn, reused := getOver(t, kept); cn != "www" || !reused {
		t.Errorf("on the kept connection: certificate %q, reused %v; want the old one, reused", cn, reused)
	}
	if cn, _ := getOver(t, tlsClient(ca, m.HTTPS)); cn != "www2" {
		t.Errorf("a new connection got %q, want www2", cn)
	}

	writeFile(t, dir, "host.key", "not a key\n")
	sighup(t, m, "reload failed")
	if last := lastLine(m.Logs(), "reload failed"); !strings.Contains(last, "host.key") {
		t.Errorf("the failed reload does not name host.key: %s", last)
	}
	if cn, _ := getOver(t, tlsClient(ca, m.HTTPS)); cn != "www2" {
		t.Errorf("after a failed reload a new connection got %q, want www2", cn)
	}
	if cn := handshakeName(t, ca, m.HTTPS, "t1.mirrors.example.test"); cn != "host" {
		t.Errorf("after a failed reload the host name got %q, want host", cn)
	}
}

// sighup sends SIGHUP to m and waits for one more log line with what.
func sighup(t *testing.T, m *mirrorProc, what string) {
	t.Helper()
	before := strings.Count(m.Logs(), what)
	m.Signal(syscall.SIGHUP)
	probetest.Until(t, 10*time.Second, func() string {
		if strings.Count(m.Logs(), what) == before {
			return "no new " + what + " log line"
		}
		return ""
	})
}

func lastLine(logs, with string) string {
	var last string
	for l := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(l, with) {
			last = l
		}
	}
	return last
}

// tlsClient is an HTTP client that reaches www.example.test at addr,
// trusting only ca, keeping its connections alive, HTTP/2 when offered.
func tlsClient(ca *probetest.CA, addr string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: ca.Pool},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// getOver gets /file with c and returns the common name of the server's
// certificate and whether the connection was reused.
func getOver(t *testing.T, c *http.Client) (cn string, reused bool) {
	t.Helper()
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, "https://www.example.test/file", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /file: %s, %v", resp.Status, err)
	}
	return resp.TLS.PeerCertificates[0].Subject.CommonName, reused
}

// handshakeName is the common name of the certificate served at addr for
// the SNI name, verified against ca.
func handshakeName(t *testing.T, ca *probetest.CA, addr, name string) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: name})
	if err != nil {
		t.Fatalf("handshake for %s: %v", name, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}
