package e2e

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// ACME HTTP-01 and TLS-ALPN-01 (the alternatives to DNS-01): two real
// mirrors without dnsd get a certificate for their host name each from
// Debian's Pebble, which resolves the names through the real dnsd (a zone
// of theirs) and validates on the mirrors' real listeners: HTTP-01 on h1's
// plain listener, TLS-ALPN-01 on h2's HTTPS listener. Nothing leaves
// loopback.

// acmeAltZone is example.test with the two mirrors' host names, each on
// an address of its own (Pebble connects to the address DNS gives).
const acmeAltZone = `$ORIGIN example.test.
$TTL 300
@          IN SOA ns1 hostmaster 2026120201 3600 600 604800 60
           IN NS  ns1
ns1        IN A   127.0.0.1
h1.mirrors IN A   127.0.5.1
h2.mirrors IN A   127.0.5.2
`

// freePortOn is a TCP port that was free on ip a moment ago.
func freePortOn(t *testing.T, ip string) int {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// acmeAltMirror starts a mirror named name with no dnsd, its plain and
// HTTPS listeners as given, getting its certificate from p by challenge.
func acmeAltMirror(t *testing.T, p *pebbleProc, ca *probetest.CA, dir, name, listen, tlsListen, challenge string) (*mirrorProc, error) {
	t.Helper()
	root := filepath.Join(dir, name+"-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "hello.txt", "hello from "+name+"\n")
	cfg := writeFile(t, dir, name+".yaml", fmt.Sprintf(`listen: [%q]
admin: 127.0.0.1:0
group: www.example.test
member: %s
host: %s.mirrors.example.test
root: %s
tls:
  listen: [%q]
  acme: {directory: %q, ca_file: %q, dir: %q, challenge: %s}
`, listen, name, name, root, tlsListen, p.Directory, ca.File, filepath.Join(dir, name+"-acme"), challenge))
	return launchMirror(t, cfg, name)
}

// startACMEAlt starts pebble validating HTTP-01 on 127.0.5.1:P1 and
// TLS-ALPN-01 on 127.0.5.2:P2, then h1 (http-01, plain on 127.0.5.1:P1)
// and h2 (tls-alpn-01, HTTPS on 127.0.5.2:P2), on other ports when one
// was taken meanwhile.
func startACMEAlt(t *testing.T, dir string, ca *probetest.CA, dnsAddr string) (*pebbleProc, *mirrorProc, *mirrorProc) {
	t.Helper()
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		httpPort, tlsPort := freePortOn(t, "127.0.5.1"), freePortOn(t, "127.0.5.2")
		p := startPebbleOn(t, dir, ca, dnsAddr, httpPort, tlsPort)
		var h1, h2 *mirrorProc
		h1, err = acmeAltMirror(t, p, ca, dir, "h1", "127.0.5.1:"+strconv.Itoa(httpPort), "127.0.0.1:0", "http-01")
		if err == nil {
			h2, err = acmeAltMirror(t, p, ca, dir, "h2", "127.0.0.1:0", "127.0.5.2:"+strconv.Itoa(tlsPort), "tls-alpn-01")
			if err == nil {
				return p, h1, h2
			}
			h1.Stop()
		}
		p.Stop()
		t.Logf("attempt %d: %v; trying other ports", attempt, err)
	}
	t.Fatal(err)
	return nil, nil, nil
}

// TestACMEHTTP01TLSALPN01: h1 (http-01) and h2 (tls-alpn-01) start
// without a certificate and get one each for their host name alone
// within 60 s; a Go client trusting only Pebble's root fetches a file
// under that name; the group name is not covered (the documented limit);
// the orders are counted by challenge type; h2 no longer answers
// acme-tls/1 once its authorization ended.
func TestACMEHTTP01TLSALPN01(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "example.test.zone", acmeAltZone)
	writeFile(t, dir, "dnsd.yaml", "listen: [\"127.0.0.1:0\"]\nzones:\n  - origin: example.test.\n    file: example.test.zone\n")
	d := startDNSD(t, false, "-config", filepath.Join(dir, "dnsd.yaml"))
	ca := probetest.NewCA(t, dir, "ca")
	start := time.Now()
	p, h1, h2 := startACMEAlt(t, dir, ca, d.Addr)
	for _, tt := range []struct {
		name, challenge string
		m               *mirrorProc
	}{{"h1", "http-01", h1}, {"h2", "tls-alpn-01", h2}} {
		host := tt.name + ".mirrors.example.test"
		probetest.Until(t, 60*time.Second-time.Since(start), func() string {
			if _, err := acmeHandshake(p, tt.m, host); err != nil {
				return fmt.Sprintf("%s (%s): %v", tt.name, tt.challenge, err)
			}
			return ""
		})
		t.Logf("%s has its certificate by %s %v after the start", tt.name, tt.challenge, time.Since(start).Round(time.Millisecond))
		leaf, _ := acmeHandshake(p, tt.m, host)
		if !slices.Equal(leaf.DNSNames, []string{host}) {
			t.Errorf("%s: certificate for %q, want %q alone", tt.name, leaf.DNSNames, host)
		}
		acmeGet(t, p, tt.m, host, "hello from "+tt.name+"\n")
		if _, err := acmeHandshake(p, tt.m, "www.example.test"); err == nil {
			t.Errorf("%s: the group name verifies, want the host name only", tt.name)
		}
		if n, err := metric(tt.m.Admin, "transmirror_mirror_acme_orders_total", `result="issued"`, `challenge="`+tt.challenge+`"`); err != nil || n != 1 {
			t.Errorf("%s: acme_orders_total{result=issued,challenge=%s} = %v, %v; want 1", tt.name, tt.challenge, n, err)
		}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", h2.HTTPS,
		&tls.Config{ServerName: "h2.mirrors.example.test", NextProtos: []string{"acme-tls/1"}, InsecureSkipVerify: true})
	if err == nil {
		c.Close()
		t.Error("h2 still answers acme-tls/1 after its authorization")
	}
}
