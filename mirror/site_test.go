package mirror

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// siteTestBackend is a back end for front-end tests: it answers
// DefaultHealthPath with 200 or 503 (healthy), every other path with
// "NAME PATH", and counts what it served.
type siteTestBackend struct {
	name    string
	url     string
	healthy atomic.Bool
	checks  atomic.Int64 // health checks answered

	mu      sync.Mutex
	paths   map[string]int
	headers []http.Header
	// body, when set, writes the response instead.
	body func(w http.ResponseWriter, r *http.Request)
}

func newSiteTestBackend(t *testing.T, name string, body func(http.ResponseWriter, *http.Request)) *siteTestBackend {
	t.Helper()
	b := &siteTestBackend{name: name, paths: make(map[string]int), body: body}
	b.healthy.Store(true)
	b.url = startServer(t, ServerOptions{Handler: b})
	return b
}

func (b *siteTestBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == DefaultHealthPath {
		b.checks.Add(1)
		if !b.healthy.Load() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
		return
	}
	b.mu.Lock()
	b.paths[r.URL.RequestURI()]++
	b.headers = append(b.headers, r.Header.Clone())
	b.mu.Unlock()
	if b.body != nil {
		b.body(w, r)
		return
	}
	fmt.Fprintf(w, "%s %s", b.name, r.URL.RequestURI())
}

// served returns how many requests for uri (all when "") b served.
func (b *siteTestBackend) served(uri string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for p, c := range b.paths {
		if uri == "" || p == uri {
			n += c
		}
	}
	return n
}

func (b *siteTestBackend) lastHeader() http.Header {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.headers) == 0 {
		return nil
	}
	return b.headers[len(b.headers)-1]
}

// deadURL returns the URL of a port on 127.0.0.1 that refuses connections.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// startSite builds the front end for cfg, serves it on 127.0.0.1:0 until
// the test ends, and returns its base URL, the handler and its registry.
func startSite(t *testing.T, cfg *Config) (string, *siteHandler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	h, closer, err := NewSiteHandler(cfg, SiteOptions{Registerer: reg, Rand: rand.New(rand.NewPCG(1, 2))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() }) // after the server (cleanups run last-in first-out)
	base := startServer(t, ServerOptions{Handler: h, Registerer: reg})
	return base, h.(*siteHandler), reg
}

// siteCfg returns a front-end config over bs with the given site section.
func siteCfg(s SiteConfig, bs ...BackendConfig) *Config {
	for i := range bs {
		if bs[i].Weight == 0 {
			bs[i].Weight = 1
		}
	}
	return &Config{Backends: bs, Site: s}
}

// quietHealth checks rarely: the first check runs at once, the next in
// an hour, so tests see only the requests they make.
var quietHealth = SiteHealthConfig{Interval: Duration(time.Hour), Timeout: Duration(time.Second), Rise: 2, Fall: 3}

func TestSiteProxyStreamsAndForwards(t *testing.T) {
	const chunk, chunks = 64 << 10, 128 // 8 MiB
	firstSent := make(chan struct{})
	goOn := make(chan struct{})
	release := sync.OnceFunc(func() { close(goOn) })
	defer release() // never leave the back end holding, even on failure
	be := newSiteTestBackend(t, "b1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(chunk*chunks))
		buf := []byte(strings.Repeat("x", chunk))
		for i := range chunks {
			if _, err := w.Write(buf); err != nil {
				return
			}
			if i == 0 {
				http.NewResponseController(w).Flush()
				close(firstSent)
				<-goOn // held until the client has read the first chunk
			}
		}
	})
	base, h, reg := startSite(t, siteCfg(SiteConfig{Policy: SitePolicyConfig{Name: "wrr"}, Health: quietHealth},
		BackendConfig{Name: "b1", URL: be.url}))

	req := newRequest(t, http.MethodGet, base+"/pub/big.iso?x=1", map[string]string{
		"X-Forwarded-For": "6.6.6.6", // a client's claim: dropped
		"Forwarded":       "for=6.6.6.6",
	})
	req.Host = "www.example.org"
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, chunk)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	// The first chunk arrived while the back end still holds the other
	// 127 (it waits for release): the front end streams rather than
	// buffers the body.
	select {
	case <-firstSent:
	case <-time.After(10 * time.Second):
		t.Fatal("the back end never reported sending the first chunk")
	}
	release()
	rest, err := io.Copy(io.Discard, resp.Body)
	if err != nil || rest != chunk*(chunks-1) {
		t.Fatalf("rest of body: %d bytes, %v", rest, err)
	}

	hd := be.lastHeader()
	tests := []struct {
		name, got, want string
	}{
		{"X-Forwarded-For is the client only", hd.Get("X-Forwarded-For"), "127.0.0.1"},
		{"X-Forwarded-Host", hd.Get("X-Forwarded-Host"), "www.example.org"},
		{"X-Forwarded-Proto", hd.Get("X-Forwarded-Proto"), "http"},
		{"Forwarded", hd.Get("Forwarded"), `for=127.0.0.1;host="www.example.org";proto=http`},
		{"request URI kept", fmt.Sprint(be.served("/pub/big.iso?x=1")), "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	t.Run("proxied bytes counted", func(t *testing.T) {
		eventually(t, 5*time.Second, "proxied_bytes_total", func() bool {
			return sampleSum(t, reg, "transmirror_mirror_proxied_bytes_total", nil) == chunk*chunks
		})
	})
	t.Run("in flight back to zero", func(t *testing.T) {
		eventually(t, 5*time.Second, "in-flight 0", func() bool { return h.backends[0].active.Load() == 0 })
	})
}

func TestSiteProxyRetry(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		wantStatus  int
		wantRetries float64
		wantAlive   int // requests the live back end served
	}{
		{"GET is retried on another back end", http.MethodGet, http.StatusOK, 1, 1},
		{"HEAD is retried on another back end", http.MethodHead, http.StatusOK, 1, 1},
		{"POST is not retried", http.MethodPost, http.StatusBadGateway, 0, 0},
		{"DELETE is not retried", http.MethodDelete, http.StatusBadGateway, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alive := newSiteTestBackend(t, "alive", nil)
			// wrr with weights 100:1 picks "dead" first.
			base, _, reg := startSite(t, siteCfg(SiteConfig{Policy: SitePolicyConfig{Name: "wrr"}, Health: quietHealth},
				BackendConfig{Name: "dead", URL: deadURL(t), Weight: 100},
				BackendConfig{Name: "alive", URL: alive.url, Weight: 1}))
			var body io.Reader
			if tt.method == http.MethodPost {
				body = strings.NewReader("form=1")
			}
			req, err := http.NewRequest(tt.method, base+"/f", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := do(t, req)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := sampleSum(t, reg, "transmirror_mirror_retries_total", nil); got != tt.wantRetries {
				t.Errorf("retries_total %g, want %g", got, tt.wantRetries)
			}
			if got := alive.served(""); got != tt.wantAlive {
				t.Errorf("live back end served %d, want %d", got, tt.wantAlive)
			}
			if got := sampleSum(t, reg, "transmirror_mirror_backend_errors_total", map[string]string{"backend": "dead", "kind": errRefused}); got < 1 {
				t.Errorf("backend_errors_total{dead,refused} = %g, want >= 1", got)
			}
		})
	}
}

func TestSiteHealth(t *testing.T) {
	fast := SiteHealthConfig{Interval: Duration(10 * time.Millisecond), Timeout: Duration(5 * time.Second), Rise: 2, Fall: 3}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a failing health endpoint takes a back end down after fall and up after rise", func(t *testing.T) {
			a := newSiteTestBackend(t, "a", nil)
			b := newSiteTestBackend(t, "b", nil)
			base, h, reg := startSite(t, siteCfg(SiteConfig{Policy: SitePolicyConfig{Name: "wrr"}, Health: fast},
				BackendConfig{Name: "a", URL: a.url}, BackendConfig{Name: "b", URL: b.url}))
			ba := h.backends[0]
			up := func() float64 {
				return sampleSum(t, reg, "transmirror_mirror_backend_up", map[string]string{"backend": "a"})
			}
			eventually(t, 5*time.Second, "a up after its first check", func() bool {
				ba.health.mu.Lock()
				defer ba.health.mu.Unlock()
				return ba.health.state == healthUp
			})

			a.healthy.Store(false)
			before := a.checks.Load()
			eventually(t, 5*time.Second, "a down", func() bool { return up() == 0 })
			if n := a.checks.Load() - before; n < 3 {
				t.Errorf("down after %d failed checks, want >= fall (3)", n)
			}
			served := a.served("")
			for i := range 10 {
				resp, _ := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("%s/x%d", base, i), nil))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d while a is down", resp.StatusCode)
				}
			}
			if got := a.served(""); got != served {
				t.Errorf("a served %d requests while down", got-served)
			}

			a.healthy.Store(true)
			before = a.checks.Load()
			eventually(t, 5*time.Second, "a up again", func() bool { return up() == 1 })
			if n := a.checks.Load() - before; n < 2 {
				t.Errorf("up after %d checks, want >= rise (2)", n)
			}
			if got := sampleSum(t, reg, "transmirror_mirror_backend_health_changes_total", map[string]string{"backend": "a", "state": "down"}); got != 1 {
				t.Errorf("health changes to down: %g, want 1", got)
			}
		}},
		{"passive errors take a back end down", func(t *testing.T) {
			alive := newSiteTestBackend(t, "alive", nil)
			hc := quietHealth
			hc.PassiveErrors = 2
			base, h, reg := startSite(t, siteCfg(SiteConfig{Policy: SitePolicyConfig{Name: "wrr"}, Health: hc},
				BackendConfig{Name: "dead", URL: deadURL(t), Weight: 100},
				BackendConfig{Name: "alive", URL: alive.url, Weight: 1}))
			for i := range 20 {
				resp, _ := do(t, newRequest(t, http.MethodGet, fmt.Sprintf("%s/x%d", base, i), nil))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
			}
			if h.backends[0].routable.Load() {
				t.Error("dead back end still takes requests")
			}
			// The one check at start failed too (fall 3 not reached): the
			// passive errors did it, after 2 failed requests.
			if got := sampleSum(t, reg, "transmirror_mirror_retries_total", nil); got != 2 {
				t.Errorf("retries_total %g, want 2 (then the dead back end is down)", got)
			}
		}},
		{"all back ends down: fail open", func(t *testing.T) {
			a := newSiteTestBackend(t, "a", nil)
			a.healthy.Store(false)
			base, h, reg := startSite(t, siteCfg(SiteConfig{Policy: SitePolicyConfig{Name: "wrr"}, Health: fast},
				BackendConfig{Name: "a", URL: a.url}))
			eventually(t, 5*time.Second, "a down", func() bool { return !h.backends[0].routable.Load() })
			resp, _ := do(t, newRequest(t, http.MethodGet, base+"/f", nil))
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200 from the only back end", resp.StatusCode)
			}
			if got := sampleSum(t, reg, "transmirror_mirror_all_backends_down_total", nil); got != 1 {
				t.Errorf("all_backends_down_total %g, want 1", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestSiteRedirect(t *testing.T) {
	be := newSiteTestBackend(t, "b1", nil)
	base, _, _ := startSite(t, siteCfg(SiteConfig{Mode: SiteModeRedirect, Policy: SitePolicyConfig{Name: "wrr"}, Health: quietHealth},
		BackendConfig{Name: "b1", URL: be.url, PublicURL: "http://b1.example.org/mirror/"}))
	tests := []struct {
		name, target, want string
	}{
		{"path and query", "/pub/x.iso?a=1&b=2", "http://b1.example.org/mirror/pub/x.iso?a=1&b=2"},
		{"escaped path kept", "/pub/a%20b.iso", "http://b1.example.org/mirror/pub/a%20b.iso"},
		{"root", "/", "http://b1.example.org/mirror/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := do(t, newRequest(t, http.MethodGet, base+tt.target, nil))
			if resp.StatusCode != http.StatusFound {
				t.Errorf("status %d, want 302", resp.StatusCode)
			}
			if got := resp.Header.Get("Location"); got != tt.want {
				t.Errorf("Location %q, want %q", got, tt.want)
			}
			if got := resp.Header.Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control %q, want no-store", got)
			}
		})
	}
	if n := be.served(""); n != 0 {
		t.Errorf("back end served %d requests in redirect mode", n)
	}
}

func TestSiteLocality(t *testing.T) {
	tests := []struct {
		policy  string
		sticky  bool // every URL on one back end
		spreads bool // one URL over every back end
	}{
		{"lard", true, false},
		{"lard-r", true, false},
		{"chbl", true, false},
		{"wrr", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			var bes []*siteTestBackend
			var bcs []BackendConfig
			for i := range 3 {
				b := newSiteTestBackend(t, fmt.Sprintf("b%d", i), nil)
				bes = append(bes, b)
				bcs = append(bcs, BackendConfig{Name: b.name, URL: b.url, Memory: 1 << 20})
			}
			base, _, _ := startSite(t, siteCfg(SiteConfig{Policy: SitePolicyConfig{Name: tt.policy}, Health: quietHealth}, bcs...))
			// Five URLs, three back ends: round robin cycles through them.
			uris := []string{"/a.iso", "/b.iso", "/c.iso", "/d.iso", "/e.iso"}
			for range 6 {
				for _, u := range uris {
					resp, _ := do(t, newRequest(t, http.MethodGet, base+u, nil))
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s: status %d", u, resp.StatusCode)
					}
				}
			}
			for _, u := range uris {
				holders := 0
				for _, b := range bes {
					if b.served(u) > 0 {
						holders++
					}
				}
				if tt.sticky && holders != 1 {
					t.Errorf("%s went to %d back ends, want 1", u, holders)
				}
				if tt.spreads && holders != len(bes) {
					t.Errorf("%s went to %d back ends, want all %d", u, holders, len(bes))
				}
			}
		})
	}
}

func TestSiteMetricsLint(t *testing.T) {
	be := newSiteTestBackend(t, "b1", nil)
	base, h, reg := startSite(t, siteCfg(SiteConfig{Health: quietHealth}, BackendConfig{Name: "b1", URL: be.url}))
	if _, err := NewCache(SiteCacheConfig{Memory: 1 << 20}, CacheOptions{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	do(t, newRequest(t, http.MethodGet, base+"/x", nil))
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
		if len(mfs) < 10 {
			t.Errorf("only %d metric families: the lint saw too little", len(mfs))
		}
	})
	t.Run("a reloaded handler shares the collectors; closing the last drops the back end", func(t *testing.T) {
		h2, c2, err := NewSiteHandler(siteCfg(SiteConfig{Health: quietHealth}, BackendConfig{Name: "b2", URL: be.url}), SiteOptions{Registerer: reg})
		if err != nil {
			t.Fatalf("second handler on the same registry: %v", err)
		}
		_ = h2
		h.Close()
		if got := sampleSum(t, reg, "transmirror_mirror_backend_up", map[string]string{"backend": "b1"}); got != 0 {
			t.Errorf("b1 still exported after its handler closed")
		}
		if got := sampleSum(t, reg, "transmirror_mirror_backend_up", map[string]string{"backend": "b2"}); got != 1 {
			t.Errorf("b2 not exported")
		}
		c2.Close()
	})
}
