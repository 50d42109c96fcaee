package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// ACME DNS-01 through dnsd (issue 24, the mirror's side): three real
// mirrors with tls.acme get their certificates from Debian's Pebble, a
// real ACME CA, which validates each name by asking the real dnsd for
// _acme-challenge TXT; dnsd serves what each mirror published over the
// signed admin API. Nothing leaves loopback.

const acmeSecret = "e2e-acme-group-secret"

// acmeDNSDYAML is dnsd with the example.test zone and the group of the
// three mirrors, static members so that each may publish for the group's
// name and its own host.
const acmeDNSDYAML = `listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: www.example.test.
    ttl: {min: 5, max: 10}
    secret: ` + acmeSecret + `
    allow_private: true
    members:
      - {name: m1, host: m1.mirrors.example.test., addresses: [127.0.4.1], capacity: 100}
      - {name: m2, host: m2.mirrors.example.test., addresses: [127.0.4.2], capacity: 100}
      - {name: m3, host: m3.mirrors.example.test., addresses: [127.0.4.3], capacity: 100}
`

// pebbleProc is a running Pebble: its ACME directory, its management
// interface and the pool of its issuing root.
type pebbleProc struct {
	*proc
	Directory string // https://HOST:PORT/dir
	Roots     *x509.CertPool
	RootFile  string // the issuing root, PEM, for curl
}

// startPebble runs Debian's pebble on free loopback ports with an HTTPS
// certificate of ca (for 127.0.0.1), validating DNS-01 by asking only the
// DNS server at dnsAddr; it returns once the directory answers and the
// issuing root is fetched (from the management interface, GET /roots/0).
func startPebble(t *testing.T, dir string, ca *probetest.CA, dnsAddr string) *pebbleProc {
	t.Helper()
	return startPebbleOn(t, dir, ca, dnsAddr, 5002, 5001)
}

// startPebbleOn is startPebble validating HTTP-01 on httpPort and
// TLS-ALPN-01 on tlsPort of the addresses that the DNS server gives
// (every validation real: PEBBLE_VA_ALWAYS_VALID unset).
func startPebbleOn(t *testing.T, dir string, ca *probetest.CA, dnsAddr string, httpPort, tlsPort int) *pebbleProc {
	t.Helper()
	crt, key := ca.LeafFor(t, dir, "pebble")
	var err error
	for range 3 { // a free port may be taken before pebble binds it
		listen, mgmt := probetest.FreeAddr(t, "tcp"), probetest.FreeAddr(t, "tcp")
		conf, _ := json.Marshal(map[string]any{"pebble": map[string]any{
			"listenAddress": listen, "managementListenAddress": mgmt, "certificate": crt, "privateKey": key,
			"httpPort": httpPort, "tlsPort": tlsPort, "ocspResponderURL": "", "externalAccountBindingRequired": false,
		}})
		cfg := writeFile(t, dir, "pebble.json", string(conf))
		var p *proc
		p, err = launch(t, "env", []string{"-u", "PEBBLE_VA_ALWAYS_VALID", "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0",
			"pebble", "-config", cfg, "-dnsserver", dnsAddr, "-strict=false"},
			func(line string) bool { return strings.Contains(line, "Listening on") })
		if err != nil {
			continue
		}
		pp := &pebbleProc{proc: p, Directory: "https://" + listen + "/dir", RootFile: filepath.Join(dir, "pebble-root.pem")}
		pp.fetchRoot(t, ca, mgmt)
		return pp
	}
	t.Fatalf("pebble: %v", err)
	return nil
}

// fetchRoot waits until the directory answers, then reads the issuing
// root from the management interface at mgmt.
func (p *pebbleProc) fetchRoot(t *testing.T, ca *probetest.CA, mgmt string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}}}
	var root []byte
	probetest.Until(t, 20*time.Second, func() string {
		for _, u := range []string{p.Directory, "https://" + mgmt + "/roots/0"} {
			resp, err := c.Get(u)
			if err != nil {
				return err.Error()
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Sprintf("%s: %s", u, resp.Status)
			}
			root = body
		}
		return ""
	})
	p.Roots = x509.NewCertPool()
	if !p.Roots.AppendCertsFromPEM(root) {
		t.Fatalf("pebble's /roots/0 is no PEM certificate: %q", root)
	}
	if err := os.WriteFile(p.RootFile, root, 0o600); err != nil {
		t.Fatal(err)
	}
}

// acmeMirrorTLS is the tls block of a mirror that gets its certificate
// from pebble.
func acmeMirrorTLS(p *pebbleProc, ca *probetest.CA, dir, name string) string {
	return fmt.Sprintf("tls:\n  listen: [\"127.0.0.1:0\"]\n  acme: {directory: %q, email: ops@example.test, ca_file: %q, dir: %q}\n",
		p.Directory, ca.File, filepath.Join(dir, name+"-acme"))
}

// TestACMEMirrors: three mirrors get a certificate each for the group's
// name and their host from Pebble through dnsd within 60 s; a Go client
// and curl, trusting only Pebble's root, fetch a file over HTTPS under
// both names; no challenge is left in dnsd; a restart serves the stored
// certificate at once; and a renewal (m1 renews as if its certificate
// lived 12 s) swaps the certificate for new connections while a
// keep-alive connection goes on.
func TestACMEMirrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "dnsd.yaml", acmeDNSDYAML)
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "example.test.zone", string(zone))
	d := startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))
	ca := probetest.NewCA(t, dir, "ca")
	p := startPebble(t, dir, ca, d.Addr)

	start := time.Now()
	ms := make([]*mirrorProc, 3)
	for i := range ms {
		name := fmt.Sprintf("m%d", i+1)
		extra := acmeMirrorTLS(p, ca, dir, name)
		if i == 0 {
			ms[i] = runMirror(t, writeACMEMirror(t, dir, name, d.Admin, extra), name, "-acme-test-lifetime", "12s")
			continue
		}
		ms[i] = startMirror(t, dir, name, d.Admin, acmeSecret, extra)
	}
	for i, m := range ms {
		waitACMECert(t, p, m, fmt.Sprintf("m%d", i+1), 60*time.Second-time.Since(start))
	}
	t.Logf("three mirrors have their certificates %v after they were started", time.Since(start).Round(time.Millisecond))
	for i, m := range ms {
		name := fmt.Sprintf("m%d", i+1)
		for _, host := range []string{"www.example.test", name + ".mirrors.example.test"} {
			acmeGet(t, p, m, host, "hello from "+name+"\n")
			acmeCurl(t, p, m, host, "hello from "+name+"\n")
		}
		if n, err := metric(m.Admin, "transmirror_mirror_acme_orders_total", `result="issued"`); err != nil || n < 1 {
			t.Errorf("%s: acme_orders_total{result=issued} = %v, %v", name, n, err)
		}
		if n, err := metric(m.Admin, "transmirror_mirror_tls_certificate_expiry_timestamp_seconds", `name="www.example.test"`); err != nil || n < float64(time.Now().Unix()) {
			t.Errorf("%s: tls_certificate_expiry_timestamp_seconds{name=www.example.test} = %v, %v", name, n, err)
		}
	}
	t.Run("renewal", func(t *testing.T) { testACMERenewal(t, p, ms[0]) })
	t.Run("restart serves the stored certificate", func(t *testing.T) {
		testACMERestart(t, p, ms[2], dir, d.Admin, acmeMirrorTLS(p, ca, dir, "m3"))
	})
	ms[0].Stop() // m1 renews all the time: stopped, it removes what it published
	list, err := api.NewClient("http://"+d.Admin, api.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := list.Challenges(context.Background()); err != nil || len(l.Challenges) != 0 {
		t.Errorf("challenges left in dnsd: %+v, %v", l.Challenges, err)
	}
}

// writeACMEMirror writes the config startMirror writes, for runMirror
// with flags.
func writeACMEMirror(t *testing.T, dir, name, dnsdAdmin, extra string) string {
	t.Helper()
	root := filepath.Join(dir, name+"-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "hello.txt", "hello from "+name+"\n")
	return writeFile(t, dir, name+".yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: %s
host: %s.mirrors.example.test
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 200ms}
root: %s
run_queue: none
%s`, name, name, dnsdAdmin, acmeSecret, root, extra))
}

// acmeHandshake is the leaf m serves for the SNI name host, verified
// against Pebble's root.
func acmeHandshake(p *pebbleProc, m *mirrorProc, host string) (*x509.Certificate, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", m.HTTPS, &tls.Config{RootCAs: p.Roots, ServerName: host})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

// waitACMECert waits until m serves a certificate of Pebble's for the
// group's name and its host name (one certificate with both).
func waitACMECert(t *testing.T, p *pebbleProc, m *mirrorProc, name string, within time.Duration) {
	t.Helper()
	probetest.Until(t, within, func() string {
		var serials []string
		for _, host := range []string{"www.example.test", name + ".mirrors.example.test"} {
			leaf, err := acmeHandshake(p, m, host)
			if err != nil {
				return fmt.Sprintf("%s for %s: %v", name, host, err)
			}
			serials = append(serials, leaf.SerialNumber.String())
		}
		if serials[0] != serials[1] {
			return fmt.Sprintf("%s: two certificates %v, want one for both names", name, serials)
		}
		return ""
	})
}

// acmeClient reaches m's HTTPS listener for any name, trusting only
// Pebble's root, keeping its connections alive.
func acmeClient(p *pebbleProc, m *mirrorProc) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: p.Roots},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, m.HTTPS)
		},
	}}
}

// acmeGet gets /hello.txt from m under host with Go's client.
func acmeGet(t *testing.T, p *pebbleProc, m *mirrorProc, host, want string) {
	t.Helper()
	c := acmeClient(p, m)
	defer c.CloseIdleConnections()
	if serial, _, body := acmeFetch(t, c, host); body != want {
		t.Errorf("GET https://%s/hello.txt (certificate %s): %q, want %q", host, serial, body, want)
	}
}

// acmeFetch gets /hello.txt under host with c: the serial of the
// connection's certificate, whether the connection was reused, the body.
func acmeFetch(t *testing.T, c *http.Client, host string) (serial *big.Int, reused bool, body string) {
	t.Helper()
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), http.MethodGet, "https://"+host+"/hello.txt", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET https://%s/hello.txt: %v", host, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET https://%s/hello.txt: %s, %v", host, resp.Status, err)
	}
	return resp.TLS.PeerCertificates[0].SerialNumber, reused, string(b)
}

// acmeCurl gets /hello.txt from m under host with curl --cacert
// (Pebble's root).
func acmeCurl(t *testing.T, p *pebbleProc, m *mirrorProc, host, want string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(m.HTTPS)
	out, err := exec.Command("curl", "-sS", "--max-time", "10", "--cacert", p.RootFile,
		"--resolve", host+":"+port+":127.0.0.1", "https://"+host+":"+port+"/hello.txt").CombinedOutput()
	if err != nil || string(out) != want {
		t.Errorf("curl https://%s: %v, %q; want %q", host, err, out, want)
	}
}

// testACMERenewal: m renews (its certificate is taken as living 12 s):
// a connection kept open across the renewal goes on with the old
// certificate, a new connection gets the new one.
func testACMERenewal(t *testing.T, p *pebbleProc, m *mirrorProc) {
	kept := acmeClient(p, m)
	defer kept.CloseIdleConnections()
	old, _, _ := acmeFetch(t, kept, "www.example.test")
	start := time.Now()
	probetest.Until(t, 30*time.Second, func() string {
		leaf, err := acmeHandshake(p, m, "www.example.test")
		if err != nil {
			return err.Error()
		}
		if leaf.SerialNumber.Cmp(old) == 0 {
			return "still the certificate " + old.String()
		}
		return ""
	})
	t.Logf("renewed: a new connection got a new certificate %v after the old one was seen", time.Since(start).Round(time.Millisecond))
	serial, reused, body := acmeFetch(t, kept, "www.example.test")
	if !reused || serial.Cmp(old) != 0 || body != "hello from m1\n" {
		t.Errorf("on the kept connection after the renewal: reused %v, certificate %s (old %s), %q", reused, serial, old, body)
	}
	if n, err := metric(m.Admin, "transmirror_mirror_acme_orders_total", `result="issued"`); err != nil || n < 2 {
		t.Errorf("acme_orders_total{result=issued} = %v, %v; want ≥ 2", n, err)
	}
}

// testACMERestart stops m and starts it again: it serves its stored
// certificate at once, with no new order.
func testACMERestart(t *testing.T, p *pebbleProc, m *mirrorProc, dir, dnsdAdmin, extra string) {
	before, err := acmeHandshake(p, m, "www.example.test")
	if err != nil {
		t.Fatal(err)
	}
	m.Stop()
	for _, f := range []string{"account.key", "certificate.pem"} {
		if fi, err := os.Stat(filepath.Join(dir, "m3-acme", f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode())
		}
	}
	m2 := startMirror(t, dir, "m3", dnsdAdmin, acmeSecret, extra)
	after, err := acmeHandshake(p, m2, "www.example.test")
	if err != nil {
		t.Fatalf("after the restart: %v; want the stored certificate at once", err)
	}
	if after.SerialNumber.Cmp(before.SerialNumber) != 0 {
		t.Errorf("after the restart: certificate %s, want the stored %s", after.SerialNumber, before.SerialNumber)
	}
	if n, err := metric(m2.Admin, "transmirror_mirror_acme_orders_total", `result="issued"`); err != nil || n != 0 {
		t.Errorf("acme_orders_total{result=issued} after the restart = %v, %v; want 0", n, err)
	}
}
