package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestSiteNotServing: a site front end whose only back end fails its
// health checks is not serving: /-/healthy on both listeners and its load
// report answer 503, and it pushes nothing to dnsd; when the back end
// passes them again, all of it is back.
func TestSiteNotServing(t *testing.T) {
	be := webtest.NewBackend(t, "be", nil)
	d := newFakeDNSD(t, "fe")
	yaml := fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: %s
member: fe
host: fe.mirrors.test
dnsd: {url: %q, secret: %q, push_interval: 20ms, view_interval: 1h}
site:
  health: {interval: 10ms, timeout: 1s, rise: 1, fall: 1}
backends:
  - {name: be, url: %q}
`, testGroup, d.url, testSecret, be.URL)
	cfg, err := mirror.ParseConfig(filepath.Join(t.TempDir(), "mirror.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	h, closer, err := frontend.New(cfg.Site, cfg.Backends, frontend.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closer.Close() })
	if _, ok := h.(mirror.SiteServing); !ok {
		t.Fatalf("the front end %T is no SiteServing", h)
	}
	m, err := buildMember(cfg, deps{reg: reg, runQueue: func() (float64, error) { return 0, nil }}, siteContent(h, closer))
	if err != nil {
		t.Fatal(err)
	}
	public := webtest.Serve(t, m.handler)
	admin := webtest.Serve(t, m.admin)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runLoops(ctx, m) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	codes := func() [3]int {
		var out [3]int
		for i, u := range []string{public + mirror.HealthPath, admin + mirror.HealthPath, admin + "/v1/load"} {
			resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, u, nil))
			out[i] = resp.StatusCode
		}
		return out
	}
	ok := [3]int{http.StatusOK, http.StatusOK, http.StatusOK}
	down := [3]int{http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable}

	probetest.Until(t, 5*time.Second, func() string {
		if n := len(d.pushes("fe")); n < 2 {
			return fmt.Sprintf("pushes while the back end is up: %d, want 2", n)
		}
		return ""
	})
	if got := codes(); got != ok {
		t.Fatalf("with the back end up: public health, admin health, load report = %v, want %v", got, ok)
	}

	be.Healthy.Store(false)
	probetest.Until(t, 5*time.Second, func() string {
		if m.Serving() {
			return "not serving: still serving"
		}
		return ""
	})
	if got := codes(); got != down {
		t.Errorf("with no back end up: public health, admin health, load report = %v, want %v", got, down)
	}
	// A push in flight when the back end went down may still land; none
	// after it.
	probetest.Until(t, 5*time.Second, func() string {
		if n := webtest.CounterValue(t, reg, "transmirror_mirror_pushes_total", "result", "not_serving"); n < 3 {
			return fmt.Sprintf("pushes skipped: %g, want 3", n)
		}
		return ""
	})
	before := len(d.pushes("fe"))
	probetest.Until(t, 5*time.Second, func() string {
		if n := webtest.CounterValue(t, reg, "transmirror_mirror_pushes_total", "result", "not_serving"); n < 6 {
			return fmt.Sprintf("more pushes skipped: %g, want 6", n)
		}
		return ""
	})
	if n := len(d.pushes("fe")) - before; n != 0 {
		t.Errorf("%d load reports pushed while not serving", n)
	}

	be.Healthy.Store(true)
	probetest.Until(t, 5*time.Second, func() string {
		if !m.Serving() {
			return "serving again: not serving"
		}
		return ""
	})
	if got := codes(); got != ok {
		t.Errorf("with the back end back: public health, admin health, load report = %v, want %v", got, ok)
	}
	probetest.Until(t, 5*time.Second, func() string {
		if n := len(d.pushes("fe")); n <= before {
			return fmt.Sprintf("pushes again: still %d", n)
		}
		return ""
	})

}
