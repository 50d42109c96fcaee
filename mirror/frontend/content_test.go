package frontend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/scheduler/site"
)

// fakeMap is a ContentMap from a table: index path → back end → copy,
// and the back ends whose index is known. onRefresh, when set, runs at
// each Refresh (a file that appears).
type fakeMap struct {
	mu        sync.Mutex
	copies    map[string]map[string]content.Copy
	indexed   map[string]bool
	refreshes int
	onRefresh func(m *fakeMap)
}

var _ ContentMap = (*fakeMap)(nil)

func (m *fakeMap) Lookup(group, p string) contentmap.Lookup {
	m.mu.Lock()
	defer m.mu.Unlock()
	l := contentmap.Lookup{Copies: map[string]content.Copy{}, Indexed: map[string]bool{}}
	if group != ContentGroup {
		return l
	}
	for n, c := range m.copies[p] {
		l.Copies[n] = c
	}
	for n, ok := range m.indexed {
		l.Indexed[n] = ok
	}
	return l
}

func (m *fakeMap) Refresh(_ context.Context, group string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if group != ContentGroup {
		return
	}
	m.refreshes++
	if m.onRefresh != nil {
		m.onRefresh(m)
	}
}

var (
	tOld = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	tNew = tOld.Add(time.Hour)
)

func TestHolders(t *testing.T) {
	bs := []*backend{{name: "b1"}, {name: "b2"}, {name: "b3"}}
	a := content.Copy{Size: 10, ModTime: tNew}
	stale := content.Copy{Size: 10, ModTime: tOld}
	all := map[string]bool{"b1": true, "b2": true, "b3": true}
	tests := []struct {
		name string
		l    contentmap.Lookup
		want []bool
		n    int
	}{
		{"nothing known: all", contentmap.Lookup{}, []bool{true, true, true}, 3},
		{"b3 lacks it", contentmap.Lookup{Copies: map[string]content.Copy{"b1": a, "b2": a}, Indexed: all}, []bool{true, true, false}, 2},
		{"b2's copy is stale", contentmap.Lookup{Copies: map[string]content.Copy{"b1": a, "b2": stale, "b3": a}, Indexed: all}, []bool{true, false, true}, 2},
		{"b3 unknown holds everything", contentmap.Lookup{Copies: map[string]content.Copy{"b1": a}, Indexed: map[string]bool{"b1": true, "b2": true}}, []bool{true, false, true}, 2},
		{"only the unknown one", contentmap.Lookup{Copies: map[string]content.Copy{}, Indexed: map[string]bool{"b1": true, "b2": true}}, []bool{false, false, true}, 1},
		{"nobody", contentmap.Lookup{Copies: map[string]content.Copy{}, Indexed: all}, []bool{false, false, false}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			has, n := holders(bs, tt.l)
			if !slices.Equal(has, tt.want) || n != tt.n {
				t.Errorf("holders = %v, %d; want %v, %d", has, n, tt.want, tt.n)
			}
		})
	}
}

// contentSite is a front end in mode over three test back ends with the
// content map m, and its registry.
func contentSite(t *testing.T, policy, mode string, m *fakeMap) (string, *handler, *prometheus.Registry, []*webtest.Backend) {
	t.Helper()
	var bes []*webtest.Backend
	var bs []Backend
	for _, name := range []string{"b1", "b2", "b3"} {
		be := webtest.NewBackend(t, name, nil)
		bes = append(bes, be)
		bs = append(bs, Backend{Name: name, URL: be.URL, PublicURL: "http://" + name + ".example.org/", Memory: 1 << 20})
	}
	reg := prometheus.NewPedanticRegistry()
	cfg := Config{Policy: PolicyConfig{Name: policy}, Mode: mode, Health: quietHealth, Content: true}
	hh, closer, err := New(cfg, weighted(bs...), Options{Registerer: reg, Rand: rand.New(rand.NewPCG(1, 2)), Content: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	return webtest.Serve(t, hh), hh.(*handler), reg, bes
}

// servedBy fetches base+p and returns the name of the back end that
// served it: the body's first word (proxy) or the redirect's host.
func servedBy(t *testing.T, base, p string) string {
	t.Helper()
	resp, body := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+p, nil))
	if loc := resp.Header.Get("Location"); resp.StatusCode == http.StatusFound {
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		name, _, _ := strings.Cut(u.Host, ".")
		return name
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", p, resp.Status)
	}
	name, _, _ := strings.Cut(body, " ")
	return name
}

// TestSiteContentRoutesToHolders sends requests for files that some back
// ends lack, under every policy in proxy and redirect mode, and checks
// that each goes to a back end that holds the file's best copy.
func TestSiteContentRoutesToHolders(t *testing.T) {
	a := content.Copy{Size: 10, ModTime: tNew}
	stale := content.Copy{Size: 10, ModTime: tOld}
	paths := map[string][]string{ // request path → who may serve it
		"/pub/a":     {"b1", "b2"},
		"/pub/b":     {"b3"},
		"/pub/fresh": {"b1", "b3"},
		"/pub/none":  {"b1", "b2", "b3"}, // nobody: the usual pick
		"/pub/":      {"b1", "b2", "b3"}, // a listing: any
	}
	for _, mode := range []string{ModeProxy, ModeRedirect} {
		for _, policy := range site.Names() {
			t.Run(mode+"/"+policy, func(t *testing.T) {
				m := &fakeMap{
					copies: map[string]map[string]content.Copy{
						"pub/a":     {"b1": a, "b2": a},
						"pub/b":     {"b3": a},
						"pub/fresh": {"b1": a, "b2": stale, "b3": a},
					},
					indexed: map[string]bool{"b1": true, "b2": true, "b3": true},
				}
				base, _, reg, _ := contentSite(t, policy, mode, m)
				for k := range 20 {
					for p, want := range paths {
						if got := servedBy(t, base, fmt.Sprintf("%s?k=%d", p, k)); !slices.Contains(want, got) {
							t.Fatalf("%s went to %s; want one of %v", p, got, want)
						}
					}
				}
				if got := webtest.SampleSum(t, reg, "transmirror_mirror_site_content_misses_total", nil); got != 20 {
					t.Errorf("misses %g, want 20 (the requests for /pub/none)", got)
				}
				if got := webtest.CounterValue(t, reg, "transmirror_mirror_site_content_lookups_total", "result", contentHeld); got != 60 {
					t.Errorf("held lookups %g, want 60", got)
				}
				if m.refreshes < 20 {
					t.Errorf("%d refreshes, want one per miss", m.refreshes)
				}
			})
		}
	}
}

// TestSiteContentFallbacks covers the requests that go to the usual
// pick: no index known, a file that a refresh finds, holders down.
func TestSiteContentFallbacks(t *testing.T) {
	a := content.Copy{Size: 10, ModTime: tNew}
	t.Run("no index known", func(t *testing.T) {
		base, _, reg, bes := contentSite(t, site.WRR, ModeProxy, &fakeMap{})
		for range 6 {
			servedBy(t, base, "/x")
		}
		for _, be := range bes {
			if be.Served("/x") != 2 {
				t.Errorf("%s served /x %d times, want 2 (wrr over all)", be.Name, be.Served("/x"))
			}
		}
		if got := webtest.CounterValue(t, reg, "transmirror_mirror_site_content_lookups_total", "result", contentUnknown); got != 6 {
			t.Errorf("unknown lookups %g, want 6", got)
		}
	})
	t.Run("a refresh finds a new file", func(t *testing.T) {
		m := &fakeMap{indexed: map[string]bool{"b1": true, "b2": true, "b3": true},
			onRefresh: func(m *fakeMap) { m.copies = map[string]map[string]content.Copy{"new": {"b2": a}} }}
		base, _, reg, _ := contentSite(t, site.LARD, ModeProxy, m)
		if got := servedBy(t, base, "/new"); got != "b2" || m.refreshes != 1 {
			t.Errorf("served by %s after %d refreshes; want b2 after 1", got, m.refreshes)
		}
		if got := webtest.SampleSum(t, reg, "transmirror_mirror_site_content_misses_total", nil); got != 0 {
			t.Errorf("misses %g, want 0", got)
		}
	})
	t.Run("holders down", func(t *testing.T) {
		m := &fakeMap{copies: map[string]map[string]content.Copy{"b": {"b3": a}},
			indexed: map[string]bool{"b1": true, "b2": true, "b3": true}}
		base, h, reg, _ := contentSite(t, site.LeastConn, ModeProxy, m)
		// After the first health check, which would bring it back.
		b3 := h.backends[2]
		probetest.Until(t, 10*time.Second, func() string {
			b3.health.mu.Lock()
			defer b3.health.mu.Unlock()
			if b3.health.state == healthUnknown {
				return "b3 not checked yet"
			}
			return ""
		})
		b3.routable.Store(false)
		if got := servedBy(t, base, "/b"); got == "b3" {
			t.Errorf("served by %s, which is down", got)
		}
		if got := webtest.SampleSum(t, reg, "transmirror_mirror_site_content_holders_down_total", nil); got != 1 {
			t.Errorf("holders_down %g, want 1", got)
		}
	})
}

func TestSiteContentNeedsMap(t *testing.T) {
	_, _, err := New(Config{Content: true}, []Backend{{Name: "b1", URL: "http://127.0.0.1:1"}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "content map") {
		t.Errorf("New = %v; want an error about the content map", err)
	}
}
