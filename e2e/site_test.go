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
func TestSiteHotFileSpreads(t *testing.T) {
	for _, mode := range []string{"handoff", "redirect"} {
		t.Run(mode, func(t *testing.T) {
			// Unix socket paths are short: not t.TempDir().
			dir, err := os.MkdirTemp("", "tms")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			root := filepath.Join(dir, "root")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, root, "hot.bin", strings.Repeat("x", 1<<20))
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
site:
  cache: {memory: 64KiB, max_object: 1MiB}
%s`, name, name, root, extra)
				be := runMirror(t, writeFile(t, dir, name+".yaml", cfg), name, "-bench-miss-delay-per-mib", "20ms")
				backends = append(backends, siteBackendLine(name, mode, sock, be))
			}
			fe := runMirror(t, writeFile(t, dir, "fe.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: fe
host: fe.site.example.test
capacity: 1000
redirect: {enabled: false}
timeouts: {shutdown: 2s}
backends:
%ssite:
  mode: %s
  policy: {name: lard-r, t_low: 2, t_high: 4}
  health: {interval: 200ms}
`, strings.Join(backends, ""), mode)), "fe")

			client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
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
						resp, err := client.Get("http://" + fe.HTTP + "/hot.bin")
						if err != nil {
							errs <- err
							return
						}
						n, err := io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if err != nil || resp.StatusCode != http.StatusOK || n != 1<<20 {
							errs <- fmt.Errorf("status %d, %d bytes, %v", resp.StatusCode, n, err)
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
			text := scrape(t, fe.Admin)
			served := 0
			var picks []string
			for i := range 3 {
				n := metricSum(text, "transmirror_mirror_backend_picks_total", fmt.Sprintf(`backend="be%d"`, i+1))
				picks = append(picks, fmt.Sprintf("be%d %.0f", i+1, n))
				if n > 0 {
					served++
				}
			}
			t.Logf("%s: picks %s", mode, strings.Join(picks, ", "))
			if served < 2 {
				t.Errorf("the hot file stayed on %d back end(s): picks %s", served, strings.Join(picks, ", "))
			}
			if n := metricSum(text, "transmirror_mirror_site_reassignments_total", `policy="lard-r"`); n < 1 {
				t.Errorf("site_reassignments_total{policy=lard-r} = %v, want at least 1", n)
			}
		})
	}
}

// siteBackendLine is back end be's item of a front end's backends list in
// site mode mode: its URL and admin URL, and its handoff socket (sock) or
// public URL where the mode needs one.
func siteBackendLine(name, mode, sock string, be *mirrorProc) string {
	line := fmt.Sprintf("  - {name: %s, url: \"http://%s\", admin_url: \"http://%s\"", name, be.HTTP, be.Admin)
	switch mode {
	case "handoff":
		line += fmt.Sprintf(", handoff_socket: %q", sock)
	case "redirect":
		line += fmt.Sprintf(", public_url: \"http://%s\"", be.HTTP)
	}
	return line + "}\n"
}
