package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestSiteContent: a front end with site.content over three back-end
// mirror processes with content.index, of which be2 lacks the directory
// b/. A keep-alive client fetches every file of a/ and b/ through the
// front end, several times, in proxy, redirect and handoff mode, under
// wrr (which, without the content map, would send every third request
// to be2): no file that some back end holds is a 404, each comes whole
// from a back end that has it (in redirect mode, the 302 names be1 or
// be3 for b/), and a file that nobody has is a 404, counted as a miss.
func TestSiteContent(t *testing.T) {
	for _, mode := range []string{"proxy", "redirect", "handoff"} {
		t.Run(mode, func(t *testing.T) {
			// Unix socket paths are short: not t.TempDir().
			dir, err := os.MkdirTemp("", "tmc")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			fe, hosts := startContentSite(t, dir, mode)
			client := &http.Client{
				Timeout:       20 * time.Second,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			}
			base := "http://" + fe.HTTP
			// A miss needs every back end's index known (an unknown one
			// holds everything): wait for the first.
			probetest.Until(t, 20*time.Second, func() string {
				if code := fetchStatus(client, base+"/nobody/has/this"); code != http.StatusNotFound {
					return fmt.Sprintf("GET /nobody/has/this: %d, want 404", code)
				}
				if metricSum(scrape(t, fe.Admin), "transmirror_mirror_site_content_misses_total") == 0 {
					return "the back ends' indexes are not known yet"
				}
				return ""
			})
			misses := metricSum(scrape(t, fe.Admin), "transmirror_mirror_site_content_misses_total")
			for round := range 3 {
				for _, d := range []string{"a", "b"} {
					for i := range contentFiles {
						p := fmt.Sprintf("/%s/%d.txt", d, i)
						if err := fetchContent(client, base, p, hosts, d == "b"); err != nil {
							t.Fatalf("round %d: %v", round, err)
						}
					}
				}
			}
			if code := fetchStatus(client, base+"/c/0.txt"); code != http.StatusNotFound {
				t.Errorf("GET /c/0.txt: %d, want 404 (nobody has it)", code)
			}
			text := scrape(t, fe.Admin)
			if got := metricSum(text, "transmirror_mirror_site_content_misses_total") - misses; got != 1 {
				t.Errorf("misses %v, want 1 (/c/0.txt)", got)
			}
			if got := metricSum(text, "transmirror_mirror_site_content_lookups_total", `result="held"`); got < 3*2*contentFiles {
				t.Errorf("held lookups %v, want at least %d", got, 3*2*contentFiles)
			}
		})
	}
}

// contentFiles is the number of files in each directory of the test.
const contentFiles = 12

// startContentSite starts three back ends in dir (be2 without b/) and a
// front end over them in mode with site.content and wrr; it returns the
// front end and each back end's public host:port by name.
func startContentSite(t *testing.T, dir, mode string) (*mirrorProc, map[string]string) {
	t.Helper()
	hosts := map[string]string{}
	var backends []string
	for i := range 3 {
		name := fmt.Sprintf("be%d", i+1)
		root := filepath.Join(dir, name)
		dirs := []string{"a", "b"}
		if name == "be2" {
			dirs = dirs[:1]
		}
		for _, d := range dirs {
			if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
				t.Fatal(err)
			}
			for k := range contentFiles {
				writeFile(t, filepath.Join(root, d), fmt.Sprintf("%d.txt", k), contentBody(d, k))
			}
		}
		sock := filepath.Join(dir, name+".sock")
		extra := ""
		if mode == "handoff" {
			extra = fmt.Sprintf("site: {handoff_socket: %q}\n", sock)
		}
		be := runMirror(t, writeFile(t, dir, name+".yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: %s
host: %s.site.example.test
root: %q
capacity: 1000
redirect: {enabled: false}
timeouts: {shutdown: 2s}
content: {index: true}
%s`, name, name, root, extra)), name)
		hosts[name] = be.HTTP
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
  content: true
  policy: {name: wrr}
  health: {interval: 200ms}
`, strings.Join(backends, ""), mode)), "fe")
	return fe, hosts
}

// contentBody is the body of file k of directory d.
func contentBody(d string, k int) string {
	return fmt.Sprintf("%s/%d %s\n", d, k, strings.Repeat(d, 100+k))
}

// fetchContent fetches base+p, following a 302 (redirect mode) after
// checking that it names a back end that has p (be2 lacks b/: notBe2),
// and checks that the body is the file's.
func fetchContent(c *http.Client, base, p string, hosts map[string]string, notBe2 bool) error {
	u := base + p
	for hop := 0; ; hop++ {
		resp, err := c.Get(u)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("GET %s: %v", u, err)
		}
		if resp.StatusCode == http.StatusFound && hop == 0 {
			loc, err := url.Parse(resp.Header.Get("Location"))
			if err != nil {
				return err
			}
			if notBe2 && loc.Host == hosts["be2"] {
				return fmt.Errorf("GET %s: redirected to be2, which lacks it", p)
			}
			u = loc.String()
			continue
		}
		var d string
		var k int
		fmt.Sscanf(p, "/%1s/%d.txt", &d, &k)
		if resp.StatusCode != http.StatusOK || string(body) != contentBody(d, k) {
			return fmt.Errorf("GET %s: %s, %d bytes; want 200 and the file", u, resp.Status, len(body))
		}
		return nil
	}
}

// fetchStatus returns the status of a GET of u, after one 302 (redirect
// mode); 0 on error.
func fetchStatus(c *http.Client, u string) int {
	for hop := 0; ; hop++ {
		resp, err := c.Get(u)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound || hop > 0 {
			return resp.StatusCode
		}
		u = resp.Header.Get("Location")
	}
}

// TestSiteContentCheck: mirror -check refuses site.content over a back
// end without admin_url, naming the file, the line and the key.
func TestSiteContentCheck(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "fe.yaml", `listen: ["127.0.0.1:0"]
group: www.example.test
member: fe
host: fe.site.example.test
backends:
  - {name: be1, url: "http://127.0.0.1:1", admin_url: "http://127.0.0.1:2"}
  - {name: be2, url: "http://127.0.0.1:3"}
site: {content: true}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin("mirror"), "-check", "-config", cfg).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("mirror -check: %v, want exit 1; output:\n%s", err, out)
	}
	if want := "fe.yaml:7:6: backends[1].admin_url: is required by site.content"; !strings.Contains(string(out), want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}
