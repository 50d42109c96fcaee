package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestRedirectKeepsSchemeAndFamily starts dnsd, two real members and a
// real dispatcher on 127.0.0.1 and [::1] (and TLS on 127.0.0.1): v4only
// (IPv4 addresses alone, plain http) and dual (IPv4 and IPv6, with a TLS
// listener: it serves http and https, and says so in its reports). curl
// asks the dispatcher over TLS, and over IPv4 and IPv6 with and without a
// trusted X-Forwarded-Proto: https: an https request lands on dual with
// an https Location, never on v4only; an IPv6 client lands on dual; only
// a plain IPv4 request may go to either.
func TestRedirectKeepsSchemeAndFamily(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl is needed (make deps installs it): %v", err)
	}
	dir := t.TempDir()
	admins := map[string]string{"v4only": probetest.FreeAddr(t, "tcp"), "dual": probetest.FreeAddr(t, "tcp")}
	d := startDNSD(t, true, "-config", offersDNSD(t, dir,
		offersMember{name: "v4only", addresses: []string{"127.0.9.1"}, admin: admins["v4only"]},
		offersMember{name: "dual", addresses: []string{"127.0.9.2", "2001:db8::9"}, admin: admins["dual"]}))
	ca := probetest.NewCA(t, dir, "ca")
	dualCert, dualKey := ca.LeafFor(t, dir, "dual", "dual.mirrors.example.test", faultGroup)
	dispCert, dispKey := ca.LeafFor(t, dir, "d", faultGroup)
	dualTLS := fmt.Sprintf("tls: {listen: [\"127.0.0.1:0\"], certificates: [{cert_file: %q, key_file: %q}]}\n", dualCert, dualKey)
	for name, extra := range map[string]string{"v4only": "", "dual": dualTLS} {
		root := filepath.Join(dir, name+"-root")
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		runMirror(t, writeFile(t, dir, name+".yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: %s
group: %s
member: %s
host: %s.mirrors.example.test
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 200ms}
root: %s
capacity: 1000
%s`, admins[name], faultGroup, name, name, d.Admin, faultSecret, root, extra)), name)
	}
	_, port, _ := net.SplitHostPort(probetest.FreeAddr(t, "tcp"))
	cfg := fmt.Sprintf(`listen: ["127.0.0.1:%s", "[::1]:%s"]
admin: 127.0.0.1:0
group: %s
member: d
host: d.mirrors.example.test
dispatcher: true
trusted_proxies: [127.0.0.1, "::1"]
tls: {listen: ["127.0.0.1:0"], certificates: [{cert_file: %q, key_file: %q}]}
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 200ms}
`, port, port, faultGroup, dispCert, dispKey, d.Admin, faultSecret)
	disp := runMirror(t, writeFile(t, dir, "d.yaml", cfg), "d")
	v4, v6 := "http://127.0.0.1:"+port, "http://[::1]:"+port
	https := []string{"Host: www.example.test", "X-Forwarded-Proto: https"}
	plain := []string{"Host: www.example.test"}
	// Both members in the view with their reports' schemes: an https
	// request finds dual.
	probetest.Until(t, 20*time.Second, func() string {
		if code, loc := curlHead(t, v4+"/pub/x.iso", https); code != http.StatusFound {
			return fmt.Sprintf("https over IPv4: %d %q, want a 302 once the view has dual's report", code, loc)
		}
		return ""
	})
	tests := []struct {
		name    string
		base    string
		headers []string
		scheme  string
		allowed []string
	}{
		{"http over IPv4: either", v4, plain, "http", []string{"v4only", "dual"}},
		{"http over IPv6: dual alone", v6, plain, "http", []string{"dual"}},
		{"https over IPv4: dual alone", v4, https, "https", []string{"dual"}},
		{"https over IPv6: dual alone", v6, https, "https", []string{"dual"}},
	}
	t.Run("over TLS itself: dual alone, https", func(t *testing.T) {
		_, tlsPort, _ := net.SplitHostPort(disp.HTTPS)
		for range 10 {
			out, err := exec.Command("curl", "-sS", "--noproxy", "*", "--max-time", "10", "--cacert", ca.File, "-o", "/dev/null",
				"--resolve", faultGroup+":"+tlsPort+":127.0.0.1", "-w", "%{http_code} %{redirect_url}",
				"https://"+faultGroup+":"+tlsPort+"/pub/x.iso").CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), "302 https://dual.mirrors.example.test:"+tlsPort+"/pub/x.iso") {
				t.Fatalf("curl over TLS: %v: %q, want a 302 to https://dual", err, out)
			}
		}
	})
	t.Run("groupctl explain shows the filter", func(t *testing.T) {
		for client, want := range map[string]string{
			"198.51.100.7": "an IPv4 client's http request may go to v4only dual; its https request to dual\n         v4only not for https: no https in its reports",
			"2001:db8::7":  "an IPv6 client's http request may go to dual; its https request to dual\n         v4only not for http, https: no IPv6 address, no https in its reports",
		} {
			out, err := groupctl(t, d.Admin, "", "explain", faultGroup, "-client", client)
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("groupctl explain -client %s: %v\n%s\nwant it to say %q", client, err, out, want)
			}
		}
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]int{}
			for range 20 {
				code, loc := curlHead(t, tt.base+"/pub/x.iso", tt.headers)
				u, err := url.Parse(loc)
				if code != http.StatusFound || err != nil {
					t.Fatalf("%d %q, want a 302", code, loc)
				}
				name := strings.TrimSuffix(u.Hostname(), ".mirrors.example.test")
				if u.Scheme != tt.scheme || !slices.Contains(tt.allowed, name) {
					t.Fatalf("Location %q: want %s:// to one of %v", loc, tt.scheme, tt.allowed)
				}
				got[name]++
			}
			t.Logf("%s: %v", tt.name, got)
		})
	}
}

// offersMember is one member of offersDNSD's group.
type offersMember struct {
	name      string
	addresses []string // dnsd's addresses of it: the families it offers
	admin     string   // its admin host:port, which dnsd probes
}

// offersDNSD writes dnsd's config for the tests of the scheme and the
// family of a redirect (TestRedirectKeepsSchemeAndFamily,
// TestMemberRedirectKeepsSchemeAndFamily): the group with members, each
// probed on its admin listener.
func offersDNSD(t *testing.T, dir string, members ...offersMember) string {
	t.Helper()
	writeFile(t, dir, "example.test.zone", readFileT(t, filepath.Join("testdata", "example.test.zone")))
	var lines strings.Builder
	for _, m := range members {
		addrs := make([]string, len(m.addresses))
		for i, a := range m.addresses {
			addrs[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&lines, "      - {name: %s, host: %s.mirrors.example.test., addresses: [%s], capacity: 1000, probe: \"http://%s/v1/load\"}\n",
			m.name, m.name, strings.Join(addrs, ", "), m.admin)
	}
	return writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e: redirects keep the scheme and the family
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: 1, max: 1}
    policy: {name: weighted}
    secret: %s
    members:
%s`, faultGroup, faultSecret, lines.String()))
}
