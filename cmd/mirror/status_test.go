package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/scheduler/site"
)

// getStatus fetches GET /v1/status from the admin server at base.
func getStatus(t *testing.T, base string) (mirror.Status, string) {
	t.Helper()
	resp, body := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+api.MirrorStatus.Path(), nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", api.MirrorStatus.Path(), resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var s mirror.Status
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return s, body
}

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

func TestStatusDocumentRoot(t *testing.T) {
	d := newFakeDNSD(t, "a", "b")
	m := startMirror(t, d, "a", "site: {cache: {memory: 1MiB}}\n", deps{})
	admin := "http://" + m.admin
	probetest.Until(t, 5*time.Second, func() string {
		if m.view.Snapshot() == nil {
			return "a group view: none yet"
		}
		return ""
	})

	before, body := getStatus(t, admin)
	t.Run("names the mirror, holds no secret", func(t *testing.T) {
		if before.Group != testGroup || before.Member != "a" || before.Host != "a.mirrors.test" || before.Role != mirror.RoleRoot {
			t.Errorf("status names %q %q %q %q", before.Group, before.Member, before.Host, before.Role)
		}
		for _, secret := range []string{testSecret, d.url} {
			if strings.Contains(body, secret) {
				t.Errorf("status shows %q", secret)
			}
		}
		if before.Load.Capacity != mirror.DefaultCapacity || before.Site != nil {
			t.Errorf("load %+v, site %+v", before.Load, before.Site)
		}
		if _, ok := before.Redirect.Redirected[group.ReasonOverload]; !ok {
			t.Errorf("redirect counters %v lack %s", before.Redirect.Redirected, group.ReasonOverload)
		}
	})
	t.Run("group view", func(t *testing.T) {
		v := before.View
		if v == nil || v.State != mirror.ViewFresh || v.Members != 2 || v.Policy != "least-load" || v.StaleAfterSeconds <= 0 {
			t.Errorf("view %+v", v)
		}
	})
	t.Run("cache figures move with requests", func(t *testing.T) {
		c := before.Cache
		if c == nil || c.Capacity != 1<<20 || c.Objects != 0 || c.Hits != 0 || c.Misses != 0 {
			t.Fatalf("cache before requests: %+v", c)
		}
		for range 4 {
			if resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, "http://"+m.addr+"/big.bin", nil)); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /big.bin: %s", resp.Status)
			}
		}
		after, _ := getStatus(t, admin)
		c = after.Cache
		want := serve.CacheStatus{Objects: 1, Capacity: 1 << 20, MaxObject: frontend.DefaultCacheMaxObject, Hits: 3, Misses: 1, HitRatio: 0.75}
		if c == nil || c.Bytes < int64(len(bigFile)) {
			t.Fatalf("cache after requests: %+v", c)
		}
		want.Bytes = c.Bytes
		if *c != want {
			t.Errorf("cache %+v, want %+v", *c, want)
		}
		if after.Load.R <= 0 {
			t.Errorf("request rate %v after requests", after.Load.R)
		}
	})
	t.Run("the page shows the cache", func(t *testing.T) {
		page := getPage(t, admin)
		for _, want := range []string{"Memory cache", "75.0 %", "least-load", `<meta http-equiv="refresh" content="2">`} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
	})
}

// startSiteMirror builds a site front end mirror over bes with the site
// section given as YAML, its policy on clock now, and serves its public
// and admin handlers until the test ends. It returns the public and admin
// base URLs and the registry. The back ends' URLs are set after the
// config is parsed, so they may carry what ParseConfig refuses (user
// information), as a config from elsewhere could.
func startSiteMirror(t *testing.T, siteYAML string, now func() time.Time, bes ...frontend.Backend) (string, string, *prometheus.Registry) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: [\"127.0.0.1:0\"]\ngroup: %s\nmember: fe\nhost: fe.mirrors.test\n%s\nbackends:\n", testGroup, siteYAML)
	for _, be := range bes {
		fmt.Fprintf(&b, "  - {name: %q, url: \"http://127.0.0.1:1\", memory: 1MiB}\n", be.Name)
	}
	cfg, err := mirror.ParseConfig(filepath.Join(t.TempDir(), "mirror.yaml"), []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	for i, be := range bes {
		cfg.Backends[i].URL = be.URL
	}
	reg := prometheus.NewPedanticRegistry()
	h, closer, err := frontend.New(cfg.Site, cfg.Backends, frontend.Options{Registerer: reg, Rand: rand.New(rand.NewPCG(1, 2)), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.(mirror.SiteStatusSource); !ok {
		t.Fatalf("the front end %T is no SiteStatusSource", h)
	}
	t.Cleanup(func() { closer.Close() })
	m, err := buildMember(cfg, deps{reg: reg, runQueue: func() (float64, error) { return 0, nil }}, siteContent(h, closer))
	if err != nil {
		t.Fatal(err)
	}
	public := webtest.ServeUntilEnd(t, m.public)
	admin := webtest.Serve(t, m.admin)
	return public, admin, reg
}

// fakeClock is a clock that tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestStatusSiteFrontEnd(t *testing.T) {
	quiet := "  health: {interval: 1h, timeout: 1s}\n"
	tests := []struct {
		name   string
		policy string // site section: the policy line
		check  func(t *testing.T, get func(uri string), status func() mirror.Status, clock *fakeClock)
	}{
		{
			name: "lard: targets grow with distinct URLs", policy: "{name: lard, max_targets: 4}",
			check: func(t *testing.T, get func(string), status func() mirror.Status, _ *fakeClock) {
				for i, want := range []int{1, 2, 3, 4, 4, 4} {
					get(fmt.Sprintf("/f%d.iso", i))
					get(fmt.Sprintf("/f%d.iso", i)) // a repeat is no new target
					ps := status().Site.PolicyState
					if ps == nil || ps.Policy != site.LARD || ps.LARD == nil || ps.LARD.Targets != want || ps.LARD.MaxTargets != 4 {
						t.Fatalf("after %d URLs: policy state %+v, want %d targets of 4", i+1, ps, want)
					}
				}
			},
		},
		{
			name: "lard-r: targets and replicas", policy: "{name: lard-r}",
			check: func(t *testing.T, get func(string), status func() mirror.Status, _ *fakeClock) {
				for i := range 3 {
					get(fmt.Sprintf("/f%d.iso", i))
				}
				ps := status().Site.PolicyState
				if ps == nil || ps.LARD == nil || ps.LARD.Targets != 3 || ps.LARD.Replicas != 3 {
					t.Errorf("policy state %+v", ps)
				}
			},
		},
		{
			name: "ward: core size after an analysis", policy: "{name: ward, ward_interval: 1m}",
			check: func(t *testing.T, get func(string), status func() mirror.Status, clock *fakeClock) {
				ps := status().Site.PolicyState
				if ps == nil || ps.WARD == nil || ps.WARD.CoreFiles != 0 || !ps.WARD.LastAnalysis.IsZero() {
					t.Fatalf("before requests: %+v", ps)
				}
				// /hot0 too hot for one back end; the others once each.
				for i, n := range []int{10, 1, 1} {
					for range n {
						get(fmt.Sprintf("/hot%d", i))
					}
				}
				clock.Add(time.Minute)
				get("/hot0") // the analysis runs at this pick
				w := status().Site.PolicyState.WARD
				if w.CoreFiles != 1 || w.CoreBytes <= 0 || !w.LastAnalysis.Equal(clock.Now()) || w.SketchFiles != 3 {
					t.Errorf("after an analysis: %+v, want a core of /hot0 at %v", w, clock.Now())
				}
			},
		},
		{
			name: "tb-ccrd: cache models", policy: "{name: tb-ccrd}",
			check: func(t *testing.T, get func(string), status func() mirror.Status, _ *fakeClock) {
				for i := range 4 {
					get(fmt.Sprintf("/f%d", i))
				}
				// The client has the whole response before the front end's
				// handler has told the policy (Done): wait for the fourth.
				objects := func() (n int, models int) {
					ps := status().Site.PolicyState
					for _, c := range ps.Caches {
						n += c.Objects
					}
					return n, len(ps.Caches)
				}
				probetest.Until(t, 5*time.Second, func() string {
					if n, m := objects(); n != 4 || m != 2 {
						return fmt.Sprintf("4 objects over 2 models: %d over %d", n, m)
					}
					return ""
				})
			},
		},
		{
			name: "chbl: balance factor", policy: "{name: chbl, balance_factor: 1.5}",
			check: func(t *testing.T, get func(string), status func() mirror.Status, _ *fakeClock) {
				get("/x")
				if c := status().Site.PolicyState.CHBL; c == nil || c.BalanceFactor != 1.5 || c.RingPoints != 200 || c.Bound <= 0 {
					t.Errorf("chbl state %+v", c)
				}
			},
		},
		{
			name: "wrr: picks and in-flight per back end", policy: "{name: wrr}",
			check: func(t *testing.T, get func(string), status func() mirror.Status, _ *fakeClock) {
				for range 4 {
					get("/x")
				}
				// The front end releases a request just after its response
				// is out: wait for the in-flight counts to drop.
				var s *frontend.Status
				probetest.Until(t, 5*time.Second, func() string {
					s = status().Site
					if a, b := s.Backends[0].InFlight, s.Backends[1].InFlight; a != 0 || b != 0 {
						return fmt.Sprintf("no request in flight: %d and %d", a, b)
					}
					return ""
				})
				if s.PolicyState == nil || s.PolicyState.Policy != site.WRR || s.PolicyState.LARD != nil {
					t.Errorf("policy state %+v", s.PolicyState)
				}
				for _, b := range s.Backends {
					if b.Picks != 2 || b.Errors != 0 {
						t.Errorf("back end %+v, want 2 picks and no errors", b)
					}
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b0 := webtest.NewBackend(t, "b0", nil)
			b1 := webtest.NewBackend(t, "b1", nil)
			clock := &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
			public, admin, reg := startSiteMirror(t, "site:\n  policy: "+tt.policy+"\n"+quiet, clock.Now,
				frontend.Backend{Name: "b0", URL: b0.URL}, frontend.Backend{Name: "b1", URL: b1.URL})
			get := func(uri string) {
				t.Helper()
				if resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, public+uri, nil)); resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %s", uri, resp.Status)
				}
			}
			status := func() mirror.Status {
				t.Helper()
				s, _ := getStatus(t, admin)
				return s
			}
			s := status()
			if s.Role != mirror.RoleSite || s.Site == nil || s.Cache != nil || s.View != nil {
				t.Fatalf("status %+v", s)
			}
			if s.Site.Mode != frontend.ModeProxy || len(s.Site.Backends) != 2 || s.Site.Backends[0].Name != "b0" || s.Site.Backends[0].URL != b0.URL {
				t.Fatalf("site %+v", s.Site)
			}
			tt.check(t, get, status, clock)
			t.Run("promlint", func(t *testing.T) {
				mfs, err := reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range problems {
					t.Errorf("promlint: %s: %s", p.Metric, p.Text)
				}
			})
		})
	}
}

func TestStatusBackendHealth(t *testing.T) {
	up := webtest.NewBackend(t, "up", nil)
	down := webtest.DeadURL(t)
	_, admin, _ := startSiteMirror(t, "site:\n  health: {interval: 20ms, timeout: 1s, fall: 1}\n", nil,
		frontend.Backend{Name: "up", URL: up.URL}, frontend.Backend{Name: "down", URL: down})
	var s mirror.Status
	probetest.Until(t, 5*time.Second, func() string {
		s, _ = getStatus(t, admin)
		if h0, h1 := s.Site.Backends[0].Health, s.Site.Backends[1].Health; h0 != "up" || h1 != "down" {
			return fmt.Sprintf("health verdicts: %s and %s, want up and down", h0, h1)
		}
		return ""
	})

	if b := s.Site.Backends[1]; b.LastError == "" || b.Errors == 0 {
		t.Errorf("down back end %+v: want its last error and errors counted", b)
	}
}

func TestStatusPageEscapesAndRedacts(t *testing.T) {
	const hostile = `<script>alert("x")</script>&'`
	be := webtest.NewBackend(t, "b", nil)
	withSecrets := strings.Replace(be.URL, "http://", "http://operator:hunter2@", 1) + "/?token=s3cret#frag"
	_, admin, _ := startSiteMirror(t, "site:\n  health: {interval: 1h, timeout: 1s}\n", nil,
		frontend.Backend{Name: hostile, URL: withSecrets})

	page := getPage(t, admin)
	_, js := getStatus(t, admin)
	for _, leak := range []string{"hunter2", "operator", "s3cret", "token", "frag"} {
		if strings.Contains(page, leak) || strings.Contains(js, leak) {
			t.Errorf("status shows %q from the back end's URL", leak)
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("the page carries the back-end name unescaped")
	}
	if want := `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&#39;`; !strings.Contains(page, want) {
		t.Errorf("page lacks the escaped name %s", want)
	}
	if !strings.Contains(page, be.URL) {
		t.Errorf("page lacks the back end's URL %s", be.URL)
	}
}

func TestStatusRoutes(t *testing.T) {
	d := newFakeDNSD(t, "a")
	m := startMirror(t, d, "a", "", deps{})
	admin := "http://" + m.admin
	tests := []struct {
		name, method, path string
		status             int
		contentType        string
	}{
		{"page", http.MethodGet, "/", http.StatusOK, "text/html; charset=utf-8"},
		{"page HEAD", http.MethodHead, "/", http.StatusOK, "text/html; charset=utf-8"},
		{"json", http.MethodGet, api.MirrorStatus.Path(), http.StatusOK, "application/json"},
		{"style sheet", http.MethodGet, "/status.css", http.StatusOK, "text/css; charset=utf-8"},
		{"not the page", http.MethodGet, "/index.html", http.StatusNotFound, ""},
		{"read-only", http.MethodPost, "/", http.StatusMethodNotAllowed, ""},
		{"read-only json", http.MethodDelete, api.MirrorStatus.Path(), http.StatusMethodNotAllowed, ""},
		{"load report still served", http.MethodGet, "/v1/load", http.StatusOK, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := webtest.Do(t, webtest.NewRequest(t, tt.method, admin+tt.path, nil))
			if resp.StatusCode != tt.status {
				t.Fatalf("%s %s: %s, want %d", tt.method, tt.path, resp.Status, tt.status)
			}
			if tt.contentType != "" && resp.Header.Get("Content-Type") != tt.contentType {
				t.Errorf("Content-Type %q, want %q", resp.Header.Get("Content-Type"), tt.contentType)
			}
		})
	}
}
