package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// topFetch is one client request of TestTopPaths: n times method path on
// the group name at a mirror, with a Range header when rng is set, and
// the status it must get.
type topFetch struct {
	mirror, method, path, rng string
	n, status                 int
}

// TestTopPaths: two real mirrors with document roots, a and b, probed by
// a real dnsd. A real HTTP client fetches a few paths on the group name,
// different numbers of times: whole GETs, Range requests from byte 0
// (which count) and from further on (which do not: one download in
// segments counts once), HEADs (which do not), a missing path (a 404
// counts) and a path over 512 bytes (not counted, counted as too long).
// dnsd's group view lists the paths by the sum of both mirrors' counts,
// most requested first, with no rescue; groupctl status shows them.
func TestTopPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	long := strings.Repeat("/"+strings.Repeat("x", 199), 3) // 600 bytes
	fetches := []topFetch{
		{"a", "GET", "/pool/big.iso", "", 3, 200},
		{"a", "GET", "/pool/big.iso", "bytes=0-99", 1, 206},
		{"a", "GET", "/pool/big.iso", "bytes=100-199", 4, 206}, // segments of the downloads above
		{"b", "GET", "/pool/big.iso", "bytes=0-", 1, 206},
		{"b", "GET", "/pool/big.iso", "bytes=500-", 3, 206},
		{"a", "GET", "/dists/stable/InRelease", "", 4, 200},
		{"b", "GET", "/dists/stable/InRelease", "", 3, 200},
		{"a", "HEAD", "/README", "", 9, 200},
		{"b", "GET", "/README", "", 1, 200},
		{"a", "GET", "/missing.deb", "", 2, 404},
		{"a", "GET", long, "", 2, 404},
	}
	want := []probe.PathCount{
		{Path: "/dists/stable/InRelease", Count: 7}, {Path: "/pool/big.iso", Count: 5},
		{Path: "/missing.deb", Count: 2}, {Path: "/README", Count: 1},
	}
	mirrors := map[string]*mirrorProc{}
	for _, name := range []string{"a", "b"} {
		root := filepath.Join(dir, name+"-root")
		for f, data := range map[string]string{"pool/big.iso": strings.Repeat("0123456789", 100), "dists/stable/InRelease": "release\n", "README": "hi\n"} {
			p := filepath.Join(root, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := fmt.Sprintf("listen: [\"127.0.0.1:0\"]\nadmin: 127.0.0.1:0\ngroup: %s\nmember: %s\nhost: %s.mirrors.example.test\nroot: %s\ncapacity: 1000\nrun_queue: none\n",
			faultGroup, name, name, root)
		mirrors[name] = runMirror(t, writeFile(t, dir, name+".yaml", cfg), name)
	}
	d := startDNSD(t, true, "-config", topDNSD(t, dir, mirrors))
	for _, f := range fetches {
		for range f.n {
			if code := topDo(t, mirrors[f.mirror].HTTP, f); code != f.status {
				t.Fatalf("%s %s (Range %q) at %s: %d, want %d", f.method, f.path, f.rng, f.mirror, code, f.status)
			}
		}
	}
	var v api.GroupView
	probetest.Until(t, 20*time.Second, func() string {
		body := whereGet(t, "http://"+d.Admin+api.GetGroup.Path(faultGroup))
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			return fmt.Sprintf("group view: %v: %s", err, body)
		}
		if !reflect.DeepEqual(v.Top, want) {
			return fmt.Sprintf("group top %v, want %v", v.Top, want)
		}
		return ""
	})
	for _, m := range v.Members {
		if m.LastReport == nil || m.Rescued != 0 || m.LastReport.Top != nil {
			t.Errorf("member %s: rescued %d, last report %+v; want 0 rescued and a report without its top", m.Name, m.Rescued, m.LastReport)
		}
	}
	metrics := whereGet(t, "http://"+mirrors["a"].Admin+"/metrics")
	for _, line := range []string{`transmirror_mirror_popular_requests_total{result="too_long"} 2`, `transmirror_mirror_popular_requests_total{result="counted"} 10`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("a's /metrics lacks %s", line)
		}
	}
	out, err := groupctl(t, d.Admin, "", "status", faultGroup)
	if err != nil || !strings.Contains(out, "RESCUED") || !strings.Contains(out, "most requested") ||
		strings.Index(out, "/dists/stable/InRelease") > strings.Index(out, "/pool/big.iso") {
		t.Errorf("groupctl status: %v:\n%s", err, out)
	}
}

// topDo sends f once to the public listener addr on the group name and
// returns the status.
func topDo(t *testing.T, addr string, f topFetch) int {
	t.Helper()
	req, err := http.NewRequest(f.method, "http://"+addr+f.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = faultGroup
	if f.rng != "" {
		req.Header.Set("Range", f.rng)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", f.method, f.path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// topDNSD writes dnsd's config for TestTopPaths into dir: the group with
// members a and b, each probed on its admin listener every 200 ms.
func topDNSD(t *testing.T, dir string, mirrors map[string]*mirrorProc) string {
	t.Helper()
	zone := readFileT(t, filepath.Join("testdata", "example.test.zone"))
	var mb strings.Builder
	for i, name := range []string{"a", "b"} {
		ip := fmt.Sprintf("127.0.74.%d", i+1)
		zone += fmt.Sprintf("%s.mirrors IN A %s\n", name, ip)
		fmt.Fprintf(&mb, "      - {name: %s, host: %s.mirrors.example.test, addresses: [%s], capacity: 1000, probe: \"http://%s/v1/load\"}\n",
			name, name, ip, mirrors[name].Admin)
	}
	writeFile(t, dir, "example.test.zone", zone)
	return writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e: the most requested paths
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
health: {interval: 200ms, timeout: 150ms, jitter: 20ms, rise: 1, fall: 2}
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: 1, max: 1}
    answers: 2
    policy: {name: weighted}
    members:
%s`, faultGroup, mb.String()))
}
