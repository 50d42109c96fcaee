package frontend

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// startSite builds the front end with the site section cfg over bs,
// serves it on 127.0.0.1:0 until the test ends, and returns its base URL,
// the handler and its registry.
func startSite(t *testing.T, cfg Config, bs ...Backend) (string, *handler, *prometheus.Registry) {
	t.Helper()
	return startSiteWith(t, cfg, Options{Rand: rand.New(rand.NewPCG(1, 2))}, bs...)
}

// startSiteWith is startSite with the options o, whose Registerer it
// sets to the registry it returns.
func startSiteWith(t *testing.T, cfg Config, o Options, bs ...Backend) (string, *handler, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	o.Registerer = reg
	h, closer, err := New(cfg, weighted(bs...), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() }) // after the server (cleanups run last-in first-out)
	base := webtest.Serve(t, h)
	return base, h.(*handler), reg
}

// weighted gives the back ends without a weight the default one, as
// Check does.
func weighted(bs ...Backend) []Backend {
	for i := range bs {
		if bs[i].Weight == 0 {
			bs[i].Weight = DefaultWeight
		}
	}
	return bs
}

// quietHealth checks rarely: the first check runs at once, the next in
// an hour, so tests see only the requests they make.
var quietHealth = HealthConfig{Interval: yamlconf.Duration(time.Hour), Timeout: yamlconf.Duration(time.Second), Rise: 2, Fall: 3}

func TestSiteProxyStreamsAndForwards(t *testing.T) {
	const chunk, chunks = 64 << 10, 128 // 8 MiB
	firstSent := make(chan struct{})
	goOn := make(chan struct{})
	release := sync.OnceFunc(func() { close(goOn) })
	defer release() // never leave the back end holding, even on failure
	be := webtest.NewBackend(t, "b1", func(w http.ResponseWriter, r *http.Request) {
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
	base, h, reg := startSite(t, Config{Policy: PolicyConfig{Name: "wrr"}, Health: quietHealth},
		Backend{Name: "b1", URL: be.URL})

	req := webtest.NewRequest(t, http.MethodGet, base+"/pub/big.iso?x=1", map[string]string{
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

	hd := be.LastHeader()
	tests := []struct {
		name, got, want string
	}{
		{"X-Forwarded-For is the client only", hd.Get("X-Forwarded-For"), "127.0.0.1"},
		{"X-Forwarded-Host", hd.Get("X-Forwarded-Host"), "www.example.org"},
		{"X-Forwarded-Proto", hd.Get("X-Forwarded-Proto"), "http"},
		{"Forwarded", hd.Get("Forwarded"), `for=127.0.0.1;host="www.example.org";proto=http`},
		{"request URI kept", fmt.Sprint(be.Served("/pub/big.iso?x=1")), "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
	t.Run("proxied bytes counted", func(t *testing.T) {
		probetest.Until(t, 5*time.Second, func() string {
			if n := webtest.SampleSum(t, reg, "transmirror_mirror_proxied_bytes_total", nil); n != chunk*chunks {
				return fmt.Sprintf("proxied_bytes_total: %g, want %d", n, chunk*chunks)
			}
			return ""
		})
	})
	t.Run("in flight back to zero", func(t *testing.T) {
		probetest.Until(t, 5*time.Second, func() string {
			if n := h.backends[0].active.Load(); n != 0 {
				return fmt.Sprintf("in-flight 0: %d", n)
			}
			return ""
		})
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
			alive := webtest.NewBackend(t, "alive", nil)
			// wrr with weights 100:1 picks "dead" first.
			base, _, reg := startSite(t, Config{Policy: PolicyConfig{Name: "wrr"}, Health: quietHealth},
				Backend{Name: "dead", URL: webtest.DeadURL(t), Weight: 100},
				Backend{Name: "alive", URL: alive.URL, Weight: 1})
			var body io.Reader
			if tt.method == http.MethodPost {
				body = strings.NewReader("form=1")
			}
			req, err := http.NewRequest(tt.method, base+"/f", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, _ := webtest.Do(t, req)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := webtest.SampleSum(t, reg, "transmirror_mirror_retries_total", nil); got != tt.wantRetries {
				t.Errorf("retries_total %g, want %g", got, tt.wantRetries)
			}
			if got := alive.Served(""); got != tt.wantAlive {
				t.Errorf("live back end served %d, want %d", got, tt.wantAlive)
			}
			if got := webtest.SampleSum(t, reg, "transmirror_mirror_backend_errors_total", map[string]string{"backend": "dead", "kind": errRefused}); got < 1 {
				t.Errorf("backend_errors_total{dead,refused} = %g, want >= 1", got)
			}
		})
	}
}

func TestSiteHealth(t *testing.T) {
	fast := HealthConfig{Interval: yamlconf.Duration(10 * time.Millisecond), Timeout: yamlconf.Duration(5 * time.Second), Rise: 2, Fall: 3}
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a failing health endpoint takes a back end down after fall and up after rise", func(t *testing.T) {
			a := webtest.NewBackend(t, "a", nil)
			b := webtest.NewBackend(t, "b", nil)
			base, h, reg := startSite(t, Config{Policy: PolicyConfig{Name: "wrr"}, Health: fast},
				Backend{Name: "a", URL: a.URL}, Backend{Name: "b", URL: b.URL})
			ba := h.backends[0]
			up := func() float64 {
				return webtest.SampleSum(t, reg, "transmirror_mirror_backend_up", map[string]string{"backend": "a"})
			}
			probetest.Until(t, 5*time.Second, func() string {
				ba.health.mu.Lock()
				defer ba.health.mu.Unlock()
				if st := ba.health.state; st != healthUp {
					return fmt.Sprintf("a up after its first check: state %v", st)
				}
				return ""
			})

			a.Healthy.Store(false)
			before := a.Checks.Load()
			probetest.Until(t, 5*time.Second, func() string {
				if v := up(); v != 0 {
					return fmt.Sprintf("a down: backend_up %g", v)
				}
				return ""
			})
			if n := a.Checks.Load() - before; n < 3 {
				t.Errorf("down after %d failed checks, want >= fall (3)", n)
			}
			served := a.Served("")
			for i := range 10 {
				resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, fmt.Sprintf("%s/x%d", base, i), nil))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d while a is down", resp.StatusCode)
				}
			}
			if got := a.Served(""); got != served {
				t.Errorf("a served %d requests while down", got-served)
			}

			a.Healthy.Store(true)
			before = a.Checks.Load()
			probetest.Until(t, 5*time.Second, func() string {
				if v := up(); v != 1 {
					return fmt.Sprintf("a up again: backend_up %g", v)
				}
				return ""
			})
			if n := a.Checks.Load() - before; n < 2 {
				t.Errorf("up after %d checks, want >= rise (2)", n)
			}
			if got := webtest.SampleSum(t, reg, "transmirror_mirror_backend_health_changes_total", map[string]string{"backend": "a", "state": "down"}); got != 1 {
				t.Errorf("health changes to down: %g, want 1", got)
			}
		}},
		{"passive errors take a back end down", func(t *testing.T) {
			alive := webtest.NewBackend(t, "alive", nil)
			hc := quietHealth
			hc.PassiveErrors = 2
			base, h, reg := startSite(t, Config{Policy: PolicyConfig{Name: "wrr"}, Health: hc},
				Backend{Name: "dead", URL: webtest.DeadURL(t), Weight: 100},
				Backend{Name: "alive", URL: alive.URL, Weight: 1})
			for i := range 20 {
				resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, fmt.Sprintf("%s/x%d", base, i), nil))
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: status %d", i, resp.StatusCode)
				}
			}
			if h.backends[0].routable.Load() {
				t.Error("dead back end still takes requests")
			}
			// The one check at start failed too (fall 3 not reached): the
			// passive errors did it, after 2 failed requests.
			if got := webtest.SampleSum(t, reg, "transmirror_mirror_retries_total", nil); got != 2 {
				t.Errorf("retries_total %g, want 2 (then the dead back end is down)", got)
			}
		}},
		{"all back ends down: fail open", func(t *testing.T) {
			a := webtest.NewBackend(t, "a", nil)
			a.Healthy.Store(false)
			base, h, reg := startSite(t, Config{Policy: PolicyConfig{Name: "wrr"}, Health: fast},
				Backend{Name: "a", URL: a.URL})
			probetest.Until(t, 5*time.Second, func() string {
				if h.backends[0].routable.Load() {
					return "a down: still routable"
				}
				return ""
			})
			if h.Serving() {
				t.Error("Serving with every back end down")
			}
			resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+"/f", nil))
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, want 200 from the only back end", resp.StatusCode)
			}
			if got := webtest.SampleSum(t, reg, "transmirror_mirror_all_backends_down_total", nil); got != 1 {
				t.Errorf("all_backends_down_total %g, want 1", got)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

func TestSiteRedirect(t *testing.T) {
	be := webtest.NewBackend(t, "b1", nil)
	base, _, _ := startSite(t, Config{Mode: ModeRedirect, Policy: PolicyConfig{Name: "wrr"}, Health: quietHealth},
		Backend{Name: "b1", URL: be.URL, PublicURL: "http://b1.example.org/mirror/"})
	tests := []struct {
		name, target, want string
	}{
		{"path and query", "/pub/x.iso?a=1&b=2", "http://b1.example.org/mirror/pub/x.iso?a=1&b=2"},
		{"escaped path kept", "/pub/a%20b.iso", "http://b1.example.org/mirror/pub/a%20b.iso"},
		{"root", "/", "http://b1.example.org/mirror/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+tt.target, nil))
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
	if n := be.Served(""); n != 0 {
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
			var bes []*webtest.Backend
			var bcs []Backend
			for i := range 3 {
				b := webtest.NewBackend(t, fmt.Sprintf("b%d", i), nil)
				bes = append(bes, b)
				bcs = append(bcs, Backend{Name: b.Name, URL: b.URL, Memory: 1 << 20})
			}
			base, _, _ := startSite(t, Config{Policy: PolicyConfig{Name: tt.policy}, Health: quietHealth}, bcs...)
			// Five URLs, three back ends: round robin cycles through them.
			uris := []string{"/a.iso", "/b.iso", "/c.iso", "/d.iso", "/e.iso"}
			for range 6 {
				for _, u := range uris {
					resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+u, nil))
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("%s: status %d", u, resp.StatusCode)
					}
				}
			}
			for _, u := range uris {
				holders := 0
				for _, b := range bes {
					if b.Served(u) > 0 {
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
	be := webtest.NewBackend(t, "b1", nil)
	base, h, reg := startSite(t, Config{Health: quietHealth}, Backend{Name: "b1", URL: be.URL})
	webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+"/x", nil))
	// The first health check runs in the background; its state change is
	// what makes the last family appear.
	probetest.Until(t, 10*time.Second, func() string {
		if webtest.SampleSum(t, reg, "transmirror_mirror_backend_health_changes_total", nil) <= 0 {
			return "the first health check's state change: none counted"
		}
		return ""
	})

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
		if want := len(newMetrics().collectors()); len(mfs) < want {
			t.Errorf("only %d metric families, want %d: the lint saw too little", len(mfs), want)
		}
	})
	t.Run("a reloaded handler shares the collectors; closing the last drops the back end", func(t *testing.T) {
		h2, c2, err := New(Config{Health: quietHealth}, weighted(Backend{Name: "b2", URL: be.URL}), Options{Registerer: reg})
		if err != nil {
			t.Fatalf("second handler on the same registry: %v", err)
		}
		_ = h2
		h.Close()
		if got := webtest.SampleSum(t, reg, "transmirror_mirror_backend_up", map[string]string{"backend": "b1"}); got != 0 {
			t.Errorf("b1 still exported after its handler closed")
		}
		if got := webtest.SampleSum(t, reg, "transmirror_mirror_backend_up", map[string]string{"backend": "b2"}); got != 1 {
			t.Errorf("b2 not exported")
		}
		c2.Close()
	})
}
