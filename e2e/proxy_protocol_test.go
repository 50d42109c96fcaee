package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// ppClient is a connection to the mirror as a balancer opens it: from
// the loopback address from, starting with header (nil: none).
type ppClient struct {
	c  net.Conn
	br *bufio.Reader
}

// ppDial dials addr from from and writes header.
func ppDial(t *testing.T, from, addr string, header []byte) *ppClient {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(header); err != nil {
		t.Fatal(err)
	}
	return &ppClient{c: c, br: bufio.NewReader(c)}
}

// get sends a GET of the group's file and returns the response's status
// and Location; err when the mirror closed the connection instead.
func (p *ppClient) get() (int, string, error) {
	if _, err := io.WriteString(p.c, "GET /file.bin HTTP/1.1\r\nHost: www.example.test\r\n\r\n"); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(p.br, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// ppV1 and ppV2 are PROXY headers that carry the client src (ip:port).
func ppV1(src string) []byte { return ppHeader(1, src) }
func ppV2(src string) []byte { return ppHeader(2, src) }

func ppHeader(version byte, src string) []byte {
	s := net.TCPAddrFromAddrPort(netip.MustParseAddrPort(src))
	d := &net.TCPAddr{IP: s.IP, Port: 80} // same family; the mirror ignores it
	b, err := proxyproto.HeaderProxyFromAddrs(version, s, d).Format()
	if err != nil {
		panic(err)
	}
	return b
}

// ppLocal is a v2 LOCAL header (a balancer's health check).
func ppLocal() []byte {
	h := proxyproto.HeaderProxyFromAddrs(2, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80})
	h.Command = proxyproto.LOCAL
	b, err := h.Format()
	if err != nil {
		panic(err)
	}
	return b
}

// ppGeoView is a group of two members far apart: fra in Europe, nyc in
// North America.
func ppGeoView() api.GroupView {
	at := func(name string, lat, lon float64, country, continent string) api.MemberView {
		m := secViewMember(name)
		m.Location = api.LocationView{Lat: &lat, Lon: &lon, Country: country, Continent: continent}
		return m
	}
	return api.GroupView{
		Name: "www.example.test.", Policy: "geo-load", Watermarks: api.Watermarks{Low: 0.7, High: 0.9},
		Members: []api.MemberView{at("fra", 50.11, 8.68, "DE", "EU"), at("nyc", 40.71, -74.01, "US", "NA")},
	}
}

// startPPDispatcher starts a real dispatcher behind a "balancer" at
// 127.0.0.1 (proxy_protocol) with the test GeoIP database and a cap of
// one connection per client, on ppGeoView.
func startPPDispatcher(t *testing.T) *mirrorProc {
	t.Helper()
	vs := startViewSource(t)
	vs.set(t, ppGeoView())
	dir := t.TempDir()
	mmdb, err := os.ReadFile(filepath.Join("..", "scheduler", "geo", "testdata", "regions.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "regions.mmdb", string(mmdb))
	return runMirror(t, writeFile(t, dir, "d.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: d
host: d.example.test
dispatcher: true
dnsd: {url: "http://%s", secret: "e2e-proxy-protocol", push_interval: 1s, view_interval: 200ms}
geo: {mmdb: regions.mmdb}
proxy_protocol: [127.0.0.1/32]
limits: {max_conns_per_client: 1}
`, vs.addr)), "d")
}

// TestProxyProtocol (issue 24): the real mirror behind a TCP balancer
// that sends the PROXY protocol (v1, v2) acts on the client the header
// carries: a dispatcher sends a European client to fra and a North
// American one to nyc, and the per-client cap counts each carried client
// (two connections of one client hit a cap of one, another client's
// does not). A header from a peer that is not trusted (127.0.0.2) is not
// believed (400); the trusted balancer without a header is closed; each
// is counted.
func TestProxyProtocol(t *testing.T) {
	dm := startPPDispatcher(t)
	// Wait for the view: each try a new client (its own /64 in Europe).
	try := 0
	probetest.Until(t, 15*time.Second, func() string {
		try++
		code, loc, err := ppDial(t, "127.0.0.1", dm.HTTP, ppV1(fmt.Sprintf("[2001:db8:1:%x::1]:4000", try))).get()
		if err != nil || code != http.StatusFound || !strings.Contains(loc, "//fra.") {
			return fmt.Sprintf("v1 TCP6 from Europe: %d %q %v, want 302 to fra", code, loc, err)
		}
		return ""
	})
	redirects := []struct {
		name, from string
		header     []byte
		want       string // in Location
	}{
		{"v1 from Europe", "127.0.0.1", ppV1("198.51.100.10:50000"), "//fra."},
		{"v2 from North America", "127.0.0.1", ppV2("203.0.113.10:50000"), "//nyc."},
		{"v2 from Europe", "127.0.0.1", ppV2("198.51.100.11:50000"), "//fra."},
	}
	for _, tt := range redirects {
		t.Run(tt.name, func(t *testing.T) {
			code, loc, err := ppDial(t, tt.from, dm.HTTP, tt.header).get()
			if err != nil || code != http.StatusFound || !strings.Contains(loc, tt.want) {
				t.Errorf("%d %q %v, want 302 to %s", code, loc, err, tt.want)
			}
		})
	}
	t.Run("untrusted header not believed", func(t *testing.T) {
		code, loc, err := ppDial(t, "127.0.0.2", dm.HTTP, ppV1("203.0.113.11:50000")).get()
		if err != nil || code != http.StatusBadRequest {
			t.Errorf("%d %q %v, want 400", code, loc, err)
		}
	})
	t.Run("local keeps the balancer", func(t *testing.T) {
		if code, loc, err := ppDial(t, "127.0.0.1", dm.HTTP, ppLocal()).get(); err != nil || code != http.StatusFound {
			t.Errorf("%d %q %v, want 302", code, loc, err)
		}
	})
	t.Run("cap counts carried clients", func(t *testing.T) {
		for _, h := range [][]byte{ppV1("198.51.100.20:1"), ppV2("203.0.113.20:1")} {
			if code, _, err := ppDial(t, "127.0.0.1", dm.HTTP, h).get(); err != nil || code != http.StatusFound {
				t.Fatalf("%d %v, want 302 (a client's first connection)", code, err)
			}
		}
		if code, _, err := ppDial(t, "127.0.0.1", dm.HTTP, ppV2("198.51.100.20:2")).get(); err == nil {
			t.Errorf("the second connection of 198.51.100.20 answered %d, want it closed by the cap of 1", code)
		}
	})
	t.Run("balancer without a header closed", func(t *testing.T) {
		if code, _, err := ppDial(t, "127.0.0.1", dm.HTTP, nil).get(); err == nil {
			t.Errorf("answered %d, want the connection closed", code)
		}
	})
	checkPPMetrics(t, dm.Admin)
}

// checkPPMetrics checks what TestProxyProtocol's connections counted.
func checkPPMetrics(t *testing.T, admin string) {
	t.Helper()
	text := scrape(t, admin)
	const name = "transmirror_mirror_proxy_protocol_connections_total"
	for result, want := range map[string]float64{"untrusted": 1, "local": 1, "missing": 1, "malformed": 0, "timeout": 0} {
		if got := metricSum(text, name, `result="`+result+`"`); got != want {
			t.Errorf("%s{result=%q} = %v, want %v", name, result, got, want)
		}
	}
	if got := metricSum(text, name, `result="accepted"`); got < 6 {
		t.Errorf("%s{result=\"accepted\"} = %v, want at least 6", name, got)
	}
	if got := metricSum(text, "transmirror_mirror_http_refused_connections_total", `listener="public"`); got != 1 {
		t.Errorf("refused public connections %v, want 1", got)
	}
}
