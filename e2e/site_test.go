package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestSiteHotFileSpreads: one front end and three back-end mirror
// processes, policy lard-r with small thresholds (t_low 2, t_high 4), and
// a hot file that 16 clients fetch over and over, each request on a new
// connection.
// The back ends cache nothing and read every request from a slow "disk"
// (the mirror's -bench-miss-delay-per-mib), so the requests pile up on the back end that has
// the file: LARD/R sees it over T_high while the others are idle and
// replicates the file, in handoff mode (the back end reports its requests
// over the handoff socket) and in redirect mode (the back ends report to
// the front end's admin_url fetches). Without those reports the front
// end saw no load in these modes and the file stayed on one back end.
// Over TLS (the front end's tls.listen) the same holds in proxy mode,
// where the front end terminates TLS, and in redirect mode, where every
// 302 names the back end's https public URL: an https client is never
// sent to http.
func TestSiteHotFileSpreads(t *testing.T) {
	for _, tt := range []struct {
		name, mode string
		tls        bool
	}{
		{"handoff", "handoff", false}, {"redirect", "redirect", false},
		{"proxy over TLS", "proxy", true}, {"redirect over TLS", "redirect", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Unix socket paths are short: not t.TempDir().
			dir, err := os.MkdirTemp("", "tms")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			st := startHotSite(t, dir, tt.mode, tt.tls)
			fetchHot(t, st)
			text := scrape(t, st.fe.Admin)
			served := 0
			var picks []string
			for i := range 3 {
				n := metricSum(text, "transmirror_mirror_backend_picks_total", fmt.Sprintf(`backend="be%d"`, i+1))
				picks = append(picks, fmt.Sprintf("be%d %.0f", i+1, n))
				if n > 0 {
					served++
				}
			}
			t.Logf("%s: picks %s", tt.name, strings.Join(picks, ", "))
			if served < 2 {
				t.Errorf("the hot file stayed on %d back end(s): picks %s", served, strings.Join(picks, ", "))
			}
			if n := metricSum(text, "transmirror_mirror_site_reassignments_total", `policy="lard-r"`); n < 1 {
				t.Errorf("site_reassignments_total{policy=lard-r} = %v, want at least 1", n)
			}
		})
	}
}

// hotSite is TestSiteHotFileSpreads' site: its front end, and the URL and
// client to fetch the hot file with (https, trusting the test CA, with
// tls).
type hotSite struct {
	fe     *mirrorProc
	url    string
	client *http.Client
	https  bool
}

// startHotSite starts three back ends and a front end in site mode mode,
// all in dir, with TLS on every public listener when tls.
func startHotSite(t *testing.T, dir, mode string, tls bool) hotSite {
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, "hot.bin", strings.Repeat("x", 1<<20))
	st := hotSite{client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, https: tls}
	tlsLine := func(string) string { return "" }
	if tls {
		ca := probetest.NewCA(t, dir, "ca")
		st.client = ca.Client()
		st.client.Timeout = 20 * time.Second
		tlsLine = func(name string) string {
			cert, key := ca.LeafFor(t, dir, name, "www.example.test")
			return fmt.Sprintf("tls: {listen: [\"127.0.0.1:0\"], certificates: [{cert_file: %q, key_file: %q}]}\n", cert, key)
		}
	}
	var backends []string
	for i := range 3 {
		name := fmt.Sprintf("be%d", i+1)
		sock := filepath.Join(dir, name+".sock")
		extra := ""
		if mode == "handoff" {
			extra = fmt.Sprintf("  handoff_socket: %q\n", sock)
		}
		cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: %s
host: %s.site.example.test
root: %q
capacity: 1000
redirect: {enabled: false}
timeouts: {shutdown: 2s}
%ssite:
  cache: {memory: 64KiB, max_object: 1MiB}
%s`, name, name, root, tlsLine(name), extra)
		be := runMirror(t, writeFile(t, dir, name+".yaml", cfg), name, "-bench-miss-delay-per-mib", "20ms")
		backends = append(backends, siteBackendLine(name, mode, sock, be))
	}
	st.fe = runMirror(t, writeFile(t, dir, "fe.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: fe
host: fe.site.example.test
capacity: 1000
redirect: {enabled: false}
timeouts: {shutdown: 2s}
%sbackends:
%ssite:
  mode: %s
  policy: {name: lard-r, t_low: 2, t_high: 4}
  health: {interval: 200ms}
`, tlsLine("fe"), strings.Join(backends, ""), mode)), "fe")
	st.url = "http://" + st.fe.HTTP + "/hot.bin"
	if tls {
		st.url = "https://" + st.fe.HTTPS + "/hot.bin"
		// Every hop of an https request stays https.
		st.client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirected to %s: an https request must stay https", req.URL)
			}
			return nil
		}
	}
	return st
}

// fetchHot has 16 clients fetch the hot file 4 times each.
func fetchHot(t *testing.T, st hotSite) {
	var wg sync.WaitGroup
	errs := make(chan error, 16*4)
	// The clients arrive 5 ms apart, so that handoffs and 302s
	// (well under a millisecond each) do not overlap: the only
	// load the front end can see is the back ends' own.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range 16 {
		<-tick.C
		wg.Go(func() {
			for range 4 {
				resp, err := st.client.Get(st.url)
				if err != nil {
					errs <- err
					return
				}
				n, err := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || n != 1<<20 || (resp.TLS == nil) == st.https {
					errs <- fmt.Errorf("status %d, %d bytes, TLS %v, %v", resp.StatusCode, n, resp.TLS != nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("fetch: %v", err)
	}
}

// siteBackendLine is back end be's item of a front end's backends list in
// site mode mode: its URL and admin URL, and its handoff socket (sock) or
// public URL where the mode needs one (https when be listens for TLS).
func siteBackendLine(name, mode, sock string, be *mirrorProc) string {
	line := fmt.Sprintf("  - {name: %s, url: \"http://%s\", admin_url: \"http://%s\"", name, be.HTTP, be.Admin)
	switch {
	case mode == "handoff":
		line += fmt.Sprintf(", handoff_socket: %q", sock)
	case mode == "redirect" && be.HTTPS != "":
		line += fmt.Sprintf(", public_url: \"https://%s\"", be.HTTPS)
	case mode == "redirect":
		line += fmt.Sprintf(", public_url: \"http://%s\"", be.HTTP)
	}
	return line + "}\n"
}
