package frontend

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/scheduler/site"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// reportServer serves a back end's report with in flight n and the
// completions given.
func reportServer(t *testing.T, inFlight *atomic.Int64, completions []Completion) string {
	t.Helper()
	return webtest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/site":
			rep := BackendReport{Time: time.Now(), InFlight: inFlight.Load(), CacheMemory: 1 << 20, CacheMaxObject: 2000,
				Completions: completions, Next: 7}
			_ = json.NewEncoder(w).Encode(rep)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
}

// TestRedirectModeSeesReports: in redirect mode the policy sees the
// back ends' reported in-flight counts plus the redirects issued since,
// their real cache size and object limit, and Done gets the sizes of
// the requests they completed.
func TestRedirectModeSeesReports(t *testing.T) {
	hc := quietHealth
	hc.Path = "/healthy"
	frozen := time.Unix(1_800_000_000, 0)
	for _, policy := range []string{"lard", "tb-ccrd"} {
		t.Run(policy, func(t *testing.T) {
			var busy, idle atomic.Int64
			busy.Store(5)
			b1 := reportServer(t, &busy, nil)
			b2 := reportServer(t, &idle, []Completion{{Key: "/a", Size: 1500}, {Key: "/big", Size: 5000}})
			reg := prometheus.NewPedanticRegistry()
			hh, closer, err := New(Config{Mode: ModeRedirect, Policy: PolicyConfig{Name: policy, TLow: 1, THigh: 2}, Health: hc},
				weighted(
					Backend{Name: "b1", URL: b1, PublicURL: "http://b1.example.org", AdminURL: b1},
					Backend{Name: "b2", URL: b2, PublicURL: "http://b2.example.org", AdminURL: b2}),
				Options{Registerer: reg, Rand: rand.New(rand.NewPCG(1, 2)), Now: func() time.Time { return frozen }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closer.Close() })
			h := hh.(*handler)
			probetest.Until(t, 5*time.Second, func() string {
				for i, b := range h.backends {
					if mem, _ := b.rep.cache(); mem != 1<<20 {
						return fmt.Sprintf("both reports read: back end %d's cache memory %d, want %d", i, mem, 1<<20)
					}
				}
				return ""
			})
			base := webtest.Serve(t, h)
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			var to []string
			for i := range 8 {
				resp, err := client.Get(base + "/f" + strings.Repeat("x", i))
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				to = append(to, strings.TrimPrefix(strings.Split(resp.Header.Get("Location"), ".")[0], "http://"))
			}
			// b1 reports 5 in flight, b2 none: b2 takes the new targets
			// until the redirects it got (in flight for the whole frozen
			// instant) reach b1's load; then b1 gets some.
			for i := range 5 {
				if to[i] != "b2" {
					t.Fatalf("redirect %d went to %s, want b2 (in flight 0+%d against 5): %v", i, to[i], i, to)
				}
			}
			sawB1 := false
			for _, x := range to[5:] {
				sawB1 = sawB1 || x == "b1"
			}
			if !sawB1 {
				t.Errorf("b1 never chosen once b2 had more redirects in flight than b1's report: %v", to)
			}
			if policy == "tb-ccrd" {
				// The next report (a health interval later) brings b2's
				// completions to a policy that has seen the back ends.
				if err := h.fetchReport(context.Background(), h.backends[1]); err != nil {
					t.Fatal(err)
				}
				st := h.policy.(site.Stater).State()
				for _, c := range st.Caches {
					if c.Capacity != 1<<20 {
						t.Errorf("%s modelled with %d bytes, want the reported 1 MiB", c.Backend, c.Capacity)
					}
					if c.Backend == "b2" && c.Bytes != 1500 {
						t.Errorf("b2's model holds %d bytes, want 1500 (/a; /big is over the reported max object)", c.Bytes)
					}
				}
			}
		})
	}
}

// TestCompletions: the ring returns what was completed after a number,
// and counts what it no longer holds.
func TestCompletions(t *testing.T) {
	c := NewCompletions()
	for i := range maxCompletions + 10 {
		c.add(Completion{Key: "/k", Size: int64(i)})
	}
	out, next, lost := c.Since(0)
	if len(out) != maxCompletions || lost != 10 || next != maxCompletions+10 || out[0].Size != 10 {
		t.Fatalf("Since(0): %d completions from size %d, next %d, lost %d", len(out), out[0].Size, next, lost)
	}
	c.add(Completion{Key: "/last", Size: 1})
	out, next, lost = c.Since(next)
	if len(out) != 1 || out[0].Key != "/last" || lost != 0 || next != maxCompletions+11 {
		t.Fatalf("Since(next): %v, next %d, lost %d", out, next, lost)
	}
	if out, _, _ := c.Since(1 << 40); len(out) != maxCompletions {
		t.Errorf("after a restart of the back end (a number beyond it) %d completions, want all %d", len(out), maxCompletions)
	}
}

// TestProxyModeSeesLoadsAndSizes: in proxy mode a request counts in
// flight from the pick to its last byte, and Done gets its
// Content-Length (tb-ccrd's model holds it), or nothing for an error.
func TestProxyModeSeesLoadsAndSizes(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	be := webtest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthy":
		case "/slow.bin":
			started <- struct{}{}
			<-release
			w.Header().Set("Content-Length", "3000")
			_, _ = w.Write(make([]byte, 3000))
		default:
			http.NotFound(w, r)
		}
	}))
	hc := quietHealth
	hc.Path = "/healthy"
	base, h, _ := startSite(t, Config{Mode: ModeProxy, Policy: PolicyConfig{Name: "tb-ccrd"}, Health: hc},
		Backend{Name: "b1", URL: be, Memory: 1 << 20})
	done := make(chan error, 1)
	go func() {
		resp, err := http.Get(base + "/slow.bin")
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	<-started
	if n := h.backends[0].active.Load(); n != 1 {
		t.Fatalf("in flight while the back end answers: %d, want 1", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/missing")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The client has its response before the handler tells the policy:
	// wait for both requests to be done, then for the model.
	var st site.Stats
	probetest.Until(t, 5*time.Second, func() string {
		st = h.policy.(site.Stater).State()
		if n := h.backends[0].active.Load(); n != 0 {
			return fmt.Sprintf("both requests done and told: %d active", n)
		}
		if len(st.Caches) != 1 || st.Caches[0].Objects < 1 {
			return fmt.Sprintf("both requests done and told: caches %+v", st.Caches)
		}
		return ""
	})

	if st.Caches[0].Bytes != 3000 || st.Caches[0].Objects != 1 {
		t.Errorf("model %+v, want the one 3000-byte object (the 404 is not cached)", st.Caches)
	}
}

// TestBackendBandwidth: a back end that sends at its bandwidth, with
// hardly a request in flight, counts as loaded (t_high per weight), so
// LARD gives new targets to the other one; without a bandwidth it would
// take its share.
func TestBackendBandwidth(t *testing.T) {
	be := webtest.Serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	hc := quietHealth
	hc.Path = "/healthy"
	frozen := time.Unix(1_800_000_000, 0)
	for _, tt := range []struct {
		name      string
		bandwidth float64
		sent      int64   // bytes b1 completed just now
		load      float64 // b1's bandwidth load: t_high (65) at 100%
		wantB1    bool    // b1 still gets new targets
	}{
		{"at its bandwidth", 10_000, 20_000, 65, false}, // 20 kB over the 2 s time constant: 10 kB/s
		{"at half its bandwidth", 10_000, 10_000, 32.5, false},
		{"no bandwidth", 0, 20_000, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hh, closer, err := New(Config{Mode: ModeProxy, Policy: PolicyConfig{Name: "lard"}, Health: hc},
				weighted(Backend{Name: "b1", URL: be, Bandwidth: yamlconf.Bandwidth(tt.bandwidth)}, Backend{Name: "b2", URL: be}),
				Options{Rand: rand.New(rand.NewPCG(3, 4)), Now: func() time.Time { return frozen }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { closer.Close() })
			h := hh.(*handler)
			b1 := h.backends[0]
			b1.active.Add(1)
			h.release(b1, site.Request{Key: "/big"}, tt.sent)
			if got := h.bandwidthLoad(b1, frozen); got != tt.load {
				t.Errorf("bandwidth load %v, want %v", got, tt.load)
			}
			toB1 := 0
			for i := range 20 {
				b, err := h.pick(site.Request{Key: fmt.Sprint("/new", i)}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if b == b1 {
					toB1++
				}
				h.release(b, site.Request{}, 0)
			}
			if got := toB1 > 0; got != tt.wantB1 {
				t.Errorf("b1 got %d of 20 new targets; want some: %v", toB1, tt.wantB1)
			}
			if st := h.Status().Backends[0]; st.Bandwidth != tt.bandwidth || st.BytesPerSecond != float64(tt.sent)/2 {
				t.Errorf("status: %v B/s of %v, want %v of %v", st.BytesPerSecond, st.Bandwidth, float64(tt.sent)/2, tt.bandwidth)
			}
		})
	}
}

// TestReportHidesQueries: the unauthenticated report (api.SiteReport)
// shows the path of each completed request and a digest of its query,
// never the query, which may carry a client's token; the front end's
// policy keys match the reported ones under either site.target_key.
func TestReportHidesQueries(t *testing.T) {
	c := NewCompletions()
	h := c.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x")) }))
	tests := []struct {
		name, target, path, query string
	}{
		{"token query", "/pub/a.iso?token=s3cr3t", "/pub/a.iso", "token=s3cr3t"},
		{"escaped path kept", "/a%20b/c?x=1&y=%2F", "/a%20b/c", "x=1&y=%2F"},
		{"no query", "/pub/b.iso", "/pub/b.iso", ""},
		{"empty query", "/pub/c.iso?", "/pub/c.iso", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.target, nil)
			h.ServeHTTP(httptest.NewRecorder(), r)
			rec := httptest.NewRecorder()
			ReportHandler(func() BackendReport { return BackendReport{} }, c).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/site", nil))
			var rep BackendReport
			if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			reported := rep.Completions[len(rep.Completions)-1].Key
			if tt.query != "" && strings.Contains(rec.Body.String(), tt.query) {
				t.Errorf("the report shows the query %q: %s", tt.query, rec.Body.String())
			}
			if p, _, _ := strings.Cut(reported, "?"); p != tt.path {
				t.Errorf("reported key %q, want the path %q", reported, tt.path)
			}
			if got := policyRequest(r, false).Key; got != tt.path || policyKey(reported, false) != got {
				t.Errorf("path keys: policy %q, from the report %q; want %q", got, policyKey(reported, false), tt.path)
			}
			if got := policyRequest(r, true).Key; got != policyKey(reported, true) || (tt.query != "") != strings.Contains(got, "?") {
				t.Errorf("path_query keys: policy %q, from the report %q", got, policyKey(reported, true))
			}
		})
	}
	t.Run("queries told apart", func(t *testing.T) {
		a, b := RequestKey(&url.URL{Path: "/f", RawQuery: "v=1"}, true), RequestKey(&url.URL{Path: "/f", RawQuery: "v=2"}, true)
		if a == b {
			t.Errorf("two queries, one key %q", a)
		}
	})
}
