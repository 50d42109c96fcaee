package mirror

import (
	"bytes"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/scheduler/site"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// getPage fetches the HTML status page from the admin server at base.
func getPage(t *testing.T, base string) string {
	t.Helper()
	resp, body := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+"/", nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	return body
}

// staticStatus is a StatusSource that always says the same.
type staticStatus Status

func (s staticStatus) Status(time.Time) Status { return Status(s) }

// TestStatusPageGolden renders a fixed status of each role; run with
// -update to rewrite testdata/status_*.html.
func TestStatusPageGolden(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	base := Status{
		Time: at, Group: "www.example.org", Member: "fra1", Host: "fra1.mirrors.example.org",
		Started: at.Add(-90 * time.Minute), UptimeSeconds: 5400,
		Load: LoadStatus{R: 12.5, M: 0.5, Conns: 3, BytesPerSecond: 3 << 20, RedirectsPerSecond: 1.25,
			Load: 130, Capacity: 200, Bandwidth: 12.5e6, Utilization: 0.65, ServingUtilization: 0.6},
		Redirect: RedirectStatus{Enabled: true, LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 0.5, PerSecond: 1.25,
			Redirected: map[string]uint64{group.ReasonOverload: 42}, Skipped: map[string]uint64{group.ReasonNoSibling: 1, group.ReasonNoView: 0, group.ReasonStaleView: 2}},
		View: &ViewStatus{State: ViewFresh, Fetched: at.Add(-1500 * time.Millisecond), AgeSeconds: 1.5,
			StaleAfterSeconds: 15, Policy: "least-load", Members: 3, Candidates: 2},
	}
	root := base
	root.Role = RoleRoot
	root.Load.Generation = at.Add(-2 * time.Hour) // content.trace
	root.Join = &group.JoinStatus{State: group.JoinJoined, Joined: 2, DNSD: 2}
	root.TLS = []CertificateStatus{
		{Names: []string{"www.example.org"}, NotAfter: at.Add(60 * 24 * time.Hour)},
		{Names: []string{"fra1.mirrors.example.org", "fra1.example.org"}, NotAfter: at.Add(36 * time.Hour)},
	}
	root.Cache = &serve.CacheStatus{Objects: 120, Bytes: 200 << 20, Capacity: 256 << 20, MaxObject: 1 << 20, Hits: 900, Misses: 100, HitRatio: 0.9}
	front := base
	front.Role = RoleSite
	front.View = &ViewStatus{State: ViewStale, Fetched: at.Add(-time.Minute), AgeSeconds: 60, StaleAfterSeconds: 15, Policy: "least-load", Members: 3, Candidates: 2}
	front.Site = &frontend.Status{Mode: frontend.ModeProxy, Policy: site.TBCCRD, Retries: 2,
		PolicyState: &site.Stats{Policy: site.TBCCRD, Caches: []site.CacheModelStats{
			{Backend: "be1", Objects: 10, Bytes: 5 << 20, Capacity: 64 << 20},
		}},
		Backends: []frontend.BackendStatus{
			{Name: "be1", URL: "http://10.0.0.1:8080", Health: "up", Weight: 1, MemoryBytes: 64 << 20, InFlight: 2, Picks: 100},
			{Name: "be2", URL: "http://10.0.0.2:8080", Health: "down", LastError: "refused", Weight: 2, MemoryBytes: 64 << 20, Picks: 50, Errors: 7},
			{Name: "be3", URL: "http://10.0.0.3:8080", Health: "unknown", Weight: 1, MemoryBytes: 64 << 20},
		}}
	lard := front
	lard.View = nil
	lardSite := *front.Site
	lardSite.Policy = site.LARD
	lardSite.PolicyState = &site.Stats{Policy: site.LARD, LARD: &site.LARDStats{Targets: 1234, MaxTargets: 100000}}
	lard.Site = &lardSite
	ward := lard
	wardSite := lardSite
	wardSite.Policy = site.WARD
	wardSite.PolicyState = &site.Stats{Policy: site.WARD, WARD: &site.WARDStats{CoreFiles: 40, CoreBytes: 12 << 20, SketchFiles: 900, SketchEntries: 10000, LastAnalysis: at.Add(-30 * time.Second), Interval: time.Minute}}
	ward.Site = &wardSite

	tests := []struct {
		name   string
		status Status
	}{
		{"root", root},
		{"site_tbccrd", front},
		{"site_lard", lard},
		{"site_ward", ward},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewStatusHandler(staticStatus(tt.status), func() time.Time { return at })
			if err != nil {
				t.Fatal(err)
			}
			base := startServer(t, serve.ServerOptions{Handler: h})
			got := []byte(getPage(t, base))
			golden := filepath.Join("testdata", "status_"+tt.name+".html")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("page differs from %s (run with -update to accept):\n%s", golden, got)
			}
		})
	}
}
