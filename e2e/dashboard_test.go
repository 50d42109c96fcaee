package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/probe/probetest"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "also write docs/dashboard.png from the dashboard browser test")

// dashToken is the admin token of the dashboard stack's dnsd.
const dashToken = "e2e-admin-token-0123456789abcdef"

// dashMirror is one real mirror of the dashboard stack.
type dashMirror struct {
	*proc
	Name  string
	HTTP  string // public host:port
	Admin string // admin host:port (/v1/load, /metrics)
}

// dashStack is a real dnsd with three real mirrors in three regions that
// it probes (pull, /v1/load on each mirror's admin port).
type dashStack struct {
	DNSD    *dnsdProc
	Mirrors []*dashMirror
}

var dashHTTPRE = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// dashMembers are the stack's members: name, location, capacity,
// bandwidth (in both configs; "" for none), address.
var dashMembers = []struct {
	name, country, continent string
	lat, lon                 float64
	capacity                 int
	bandwidth                string
	addr                     string
}{
	{"fra1", "DE", "EU", 50.11, 8.68, 400, "1Gbit/s", "127.0.1.1"},
	{"nyc1", "US", "NA", 40.71, -74.01, 600, "", "127.0.2.1"},
	{"sin1", "SG", "AS", 1.35, 103.82, 900, "", "127.0.3.1"},
}

// startDashStack starts three real mirrors (with mirrorExtra appended to
// each one's config), then a real dnsd (with an admin token, fast health
// checks and a static networks table for three client regions) that probes
// them.
func startDashStack(t *testing.T, mirrorExtra string) *dashStack {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "index.html", "<!doctype html><title>mirror</title>hello\n")
	s := &dashStack{}
	var members strings.Builder
	ca := probetest.NewCA(t, dir, "ca")
	for _, m := range dashMembers {
		cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test.
member: %s
host: %s.mirrors.example.test
root: root
capacity: %d
location: {lat: %g, lon: %g, country: %s, continent: %s}
`, m.name, m.name, m.capacity, m.lat, m.lon, m.country, m.continent) + mirrorExtra
		if m.name == "fra1" { // https with a certificate of a day: the dashboard's HTTPS column
			crt, key := ca.LeafFor(t, dir, "fra1", "www.example.test", "fra1.mirrors.example.test")
			cfg += fmt.Sprintf("tls: {listen: [\"127.0.0.1:0\"], certificates: [{cert_file: %q, key_file: %q}]}\n", crt, key)
		}
		bandwidth := ""
		if m.bandwidth != "" {
			cfg += "bandwidth: " + m.bandwidth + "\n"
			bandwidth = ", bandwidth: " + m.bandwidth
		}
		path := writeFile(t, dir, m.name+".yaml", cfg)
		dm := &dashMirror{Name: m.name}
		dm.proc = start(t, bin("mirror"), []string{"-config", path}, func(line string) bool {
			if x := dashHTTPRE.FindStringSubmatch(line); x != nil && dm.HTTP == "" {
				dm.HTTP = x[1]
			}
			if x := adminAddrRE.FindStringSubmatch(line); x != nil {
				dm.Admin = x[1]
			}
			return strings.Contains(line, `msg="mirror started"`)
		})
		if dm.HTTP == "" || dm.Admin == "" {
			t.Fatalf("mirror %s did not report its addresses:\n%s", m.name, dm.Logs())
		}
		s.Mirrors = append(s.Mirrors, dm)
		fmt.Fprintf(&members, "      - {name: %s, host: %s.mirrors.example.test., addresses: [%s], capacity: %d%s, probe: \"http://%s/v1/load\", location: {lat: %g, lon: %g, country: %s, continent: %s}}\n",
			m.name, m.name, m.addr, m.capacity, bandwidth, dm.Admin, m.lat, m.lon, m.country, m.continent)
	}
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "example.test.zone", string(zone))
	writeFile(t, dir, "dnsd.yaml", `listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
admin_token: `+dashToken+`
health: {interval: 200ms, timeout: 150ms, jitter: 20ms, rise: 1, fall: 2}
zones:
  - origin: example.test.
    file: example.test.zone
geo:
  default: {lat: 40.71, lon: -74.01, country: US, continent: NA}
  networks:
    - {prefix: 198.51.100.0/24, location: {lat: 48.86, lon: 2.35, country: FR, continent: EU}}
    - {prefix: 203.0.113.0/24, location: {lat: 37.77, lon: -122.42, country: US, continent: NA}}
    - {prefix: 192.0.2.0/24, location: {lat: 35.68, lon: 139.69, country: JP, continent: AS}}
groups:
  - name: www.example.test.
    ttl: {min: 20, max: 60}
    answers: 1
    policy: {name: geo-load}
    secret: e2e-secret
    members:
`+members.String())
	s.DNSD = startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))
	return s
}

// traffic sends DNS queries from the three client regions (ECS) and HTTP
// requests to every mirror still running, every 50ms, until the test ends.
func (s *dashStack) traffic(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	subnets := []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("192.0.2.0/24"),
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &dns.Client{Net: "udp", Timeout: time.Second}
		hc := &http.Client{Timeout: 2 * time.Second}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			m := new(dns.Msg)
			m.SetQuestion("www.example.test.", dns.TypeA)
			p := subnets[i%len(subnets)]
			o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
			o.SetUDPSize(1232)
			o.Option = append(o.Option, &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1,
				SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()})
			m.Extra = append(m.Extra, o)
			_, _, _ = c.ExchangeContext(ctx, m, s.DNSD.Addr)
			for k, mr := range s.Mirrors {
				if mr.Exited() || i%(k+1) != 0 { // uneven load
					continue
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+mr.HTTP+"/index.html", nil)
				req.Host = mr.Name + ".mirrors.example.test"
				if resp, err := hc.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
	}()
}

// chromiumPath finds Debian's chromium, or fails the test saying how to
// install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found in PATH: the dashboard test drives a headless Chromium; install it with `apt-get install -y chromium` (make deps)")
	return ""
}

// newBrowser starts a headless Chromium that can reach nothing but
// loopback, with a fresh profile, and returns its tab's context.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(1560, 1180),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"), // no name resolves: only loopback is reachable
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("mute-audio", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", chromiumPath(t), err)
	}
	return ctx
}

// evalBool evaluates a JavaScript expression in the page, bounded.
func evalBool(ctx context.Context, expr string) (bool, error) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(c, chromedp.Evaluate[bool](expr))
}

// evalAny runs a JavaScript statement in the page, bounded.
func evalAny(ctx context.Context, expr string) error {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := chromedp.Run(c, chromedp.Evaluate[any](expr))
	return err
}

// waitDOM polls the page until expr is true or the deadline passes.
func waitDOM(t *testing.T, ctx context.Context, within time.Duration, what, expr string) {
	t.Helper()
	probetest.Until(t, within, func() string {
		ok, err := evalBool(ctx, expr)
		switch {
		case err != nil:
			return what + ": " + err.Error()
		case !ok:
			return what
		}
		return ""
	})
}

func rowState(member, state string) string {
	return fmt.Sprintf(`!!document.querySelector('tr[data-member="%s"][data-state="%s"] [data-role="state"]') && document.querySelector('tr[data-member="%s"] [data-role="state"]').textContent === "%s"`,
		member, state, member, state)
}

// TestDashboardBrowser opens the dashboard of a real dnsd that probes three
// real mirrors in a real headless Chromium: the members table and the map
// show the right states, a stopped mirror turns "down" without a reload, a
// drain through the page (with the admin token) turns "draining".
func TestDashboardBrowser(t *testing.T) {
	ctx := newBrowser(t)
	s := startDashStack(t, "")
	s.traffic(t)
	url := "http://" + s.DNSD.Admin + "/"
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("navigate %s: %v", url, err)
	}
	// A marker that a reload would lose.
	if err := evalAny(ctx, `window.__noReload = 42`); err != nil {
		t.Fatal(err)
	}
	t.Run("members up", func(t *testing.T) {
		for _, m := range dashMembers {
			waitDOM(t, ctx, 20*time.Second, m.name+" row up", rowState(m.name, "up"))
		}
		waitDOM(t, ctx, 5*time.Second, "3 rows", `document.querySelectorAll('table.members tbody tr').length === 3`)
		waitDOM(t, ctx, 5*time.Second, "requests per second shown", `[...document.querySelectorAll('table.members tbody tr td.num')].some(td => /^[0-9.]+$/.test(td.textContent) && parseFloat(td.textContent) > 0)`)
		waitDOM(t, ctx, 5*time.Second, "live", `document.querySelector('#conn').dataset.state === "live"`)
	})
	t.Run("bytes per second and bandwidth", func(t *testing.T) {
		waitDOM(t, ctx, 5*time.Second, "fra1's bytes/s against its 1Gbit/s", `document.querySelector('tr[data-member="fra1"] [data-role="bytes"]').textContent.endsWith(" of 1.0 Gbit/s")`)
		waitDOM(t, ctx, 5*time.Second, "fra1's load and bandwidth utilization", `/^load [0-9]+% · bw [0-9]+%$/.test(document.querySelector('tr[data-member="fra1"] [data-role="util-parts"]').textContent)`)
		waitDOM(t, ctx, 5*time.Second, "nyc1 without a bandwidth", `!document.querySelector('tr[data-member="nyc1"] [data-role="util-parts"]') && /[0-9] [kMGT]?B\/s$/.test(document.querySelector('tr[data-member="nyc1"] [data-role="bytes"]').textContent)`)
	})
	t.Run("most requested, rescued, https", func(t *testing.T) {
		// The traffic GETs /index.html of every mirror on its own host name.
		waitDOM(t, ctx, 10*time.Second, "/index.html first among the most requested",
			`(() => { const r = document.querySelector('table.top tbody tr[data-rank="1"]'); return !!r && r.dataset.path === "/index.html" && parseFloat(r.querySelector('[data-role="count"]').textContent) > 0 })()`)
		for _, m := range dashMembers {
			waitDOM(t, ctx, 5*time.Second, m.name+" rescued none", fmt.Sprintf(`document.querySelector('tr[data-member="%s"] [data-role="rescued"]').textContent === "0"`, m.name))
		}
		waitDOM(t, ctx, time.Second, "rescued column", `[...document.querySelectorAll('table.members th')].some(th => th.textContent === "Rescued")`)
		waitDOM(t, ctx, 5*time.Second, "fra1's certificate expiring within a day, marked", `(() => { const c = document.querySelector('tr[data-member="fra1"] [data-role="https"]'); return /^2[0-3]h [0-9]+m$/.test(c.textContent) && c.classList.contains("hot") })()`)
		waitDOM(t, ctx, time.Second, "nyc1 without https", `document.querySelector('tr[data-member="nyc1"] [data-role="https"]').textContent === "–"`)
		// An ACME order under way: nyc1's live challenge at dnsd, beside its HTTPS cell.
		if out, err := groupctl(t, s.DNSD.Admin, "e2e-secret", "acme", "publish", "www.example.test", "nyc1", "nyc1.mirrors.example.test", strings.Repeat("v", 42)+"A"); err != nil {
			t.Fatalf("groupctl acme publish: %v\n%s", err, out)
		}
		waitDOM(t, ctx, 5*time.Second, "nyc1's live ACME challenge", `(() => { const c = document.querySelector('tr[data-member="nyc1"] [data-role="acme"]'); return !!c && c.textContent === "ACME ×1" })()`)
		waitDOM(t, ctx, time.Second, "fra1 without one", `!document.querySelector('tr[data-member="fra1"] [data-role="acme"]')`)
	})
	t.Run("map", func(t *testing.T) {
		waitDOM(t, ctx, 5*time.Second, "land drawn", `document.querySelector('svg.map path.land').getAttribute('d').length > 10000`)
		for _, m := range dashMembers {
			waitDOM(t, ctx, 5*time.Second, m.name+" dot up", fmt.Sprintf(`!!document.querySelector('svg.map circle.member-dot.up[data-member="%s"][data-state="up"]')`, m.name))
		}
		waitDOM(t, ctx, 10*time.Second, "flows from the client regions", `document.querySelectorAll('svg.map path.flow').length >= 3`)
	})
	t.Run("sortable", func(t *testing.T) {
		order := `[...document.querySelectorAll('table.members tbody tr')].map(r => r.dataset.member).join(",")`
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`table.members th[data-key="name"]`))); err != nil {
			t.Fatal(err)
		}
		waitDOM(t, ctx, 5*time.Second, "sorted by name, descending", order+` === "sin1,nyc1,fra1"`)
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`table.members th[data-key="name"]`))); err != nil {
			t.Fatal(err)
		}
		waitDOM(t, ctx, 5*time.Second, "sorted by name, ascending", order+` === "fra1,nyc1,sin1"`)
	})
	t.Run("stopped mirror turns down without a reload", func(t *testing.T) {
		s.Mirrors[1].Stop() // nyc1
		waitDOM(t, ctx, 20*time.Second, "nyc1 row down", rowState("nyc1", "down"))
		waitDOM(t, ctx, 5*time.Second, "nyc1 dot down", `!!document.querySelector('svg.map circle.member-dot.down[data-member="nyc1"]')`)
		waitDOM(t, ctx, 5*time.Second, "event listed", `!!document.querySelector('#events li[data-kind="member_state"]') && document.querySelector('#events').textContent.includes("nyc1")`)
		waitDOM(t, ctx, time.Second, "page not reloaded", `window.__noReload === 42`)
	})
	t.Run("drain through the page", func(t *testing.T) {
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr[data-member="sin1"] button[data-action="drain"]`))); err != nil {
			t.Fatal(err)
		}
		waitDOM(t, ctx, 5*time.Second, "token dialog open", `document.querySelector('#token-dialog').open`)
		if err := chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.ID("token-input"), dashToken),
			chromedp.Click(chromedp.ID("token-save")),
		); err != nil {
			t.Fatal(err)
		}
		waitDOM(t, ctx, 10*time.Second, "sin1 row draining", rowState("sin1", "draining"))
		waitDOM(t, ctx, 5*time.Second, "undrain offered", `!!document.querySelector('tr[data-member="sin1"] button[data-action="undrain"]')`)
		waitDOM(t, ctx, 5*time.Second, "drain event", `!!document.querySelector('#events li[data-kind="drain"]')`)
		waitDOM(t, ctx, time.Second, "token kept for the tab", `sessionStorage.getItem("transmirror.adminToken") === "`+dashToken+`"`)
		waitDOM(t, ctx, time.Second, "page not reloaded", `window.__noReload === 42`)
	})
	t.Run("wrong token is refused", func(t *testing.T) {
		if err := evalAny(ctx, `sessionStorage.setItem("transmirror.adminToken", "wrong-token-wrong-token"); true`); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`tr[data-member="fra1"] button[data-action="drain"]`))); err != nil {
			t.Fatal(err)
		}
		waitDOM(t, ctx, 5*time.Second, "error shown", `!document.querySelector('#toast').hidden && document.querySelector('#toast').textContent.includes("refused")`)
		waitDOM(t, ctx, time.Second, "fra1 still up", rowState("fra1", "up"))
		if err := evalAny(ctx, `sessionStorage.setItem("transmirror.adminToken", "`+dashToken+`"); document.querySelector('#toast').hidden = true; true`); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("charts", func(t *testing.T) {
		points := 1
		if *updateScreenshot {
			points = 5 // a line worth showing in the README
		}
		waitDOM(t, ctx, time.Duration(points+2)*12*time.Second, fmt.Sprintf("%d chart points", points),
			fmt.Sprintf(`(() => { const p = document.querySelector('[data-chart="answers"] path.series'); return !!p && (p.getAttribute('d').match(/L/g) || []).length >= %d })()`, points-1))
		waitDOM(t, ctx, 5*time.Second, "utilization chart", `document.querySelectorAll('[data-chart="util"] path.series').length >= 2`)
	})
	t.Run("screenshot", func(t *testing.T) {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		saveArtifact(t, "dashboard.png", png)
		if *updateScreenshot {
			if err := os.WriteFile(filepath.Join("..", "docs", "dashboard.png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// saveArtifact writes a test artefact under e2e/artifacts (ignored by git).
func saveArtifact(t *testing.T, name string, data []byte) {
	t.Helper()
	dir := "artifacts"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", p, len(data))
}

// adminGet fetches a path from an admin server.
func adminGet(t *testing.T, hostport, path string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + hostport + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %s\n%s", hostport, path, resp.Status, b)
	}
	return string(b)
}
