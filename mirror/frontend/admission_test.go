package frontend

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/scheduler/site"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// TestNewAdmission: a limit left out is the policy's own
// (site.AdmissionLimit, over the sum of the weights); -1 and redirect
// mode have none.
func TestNewAdmission(t *testing.T) {
	two := []Backend{{Name: "a", Weight: 1}, {Name: "b", Weight: 1}}
	for _, tt := range []struct {
		name     string
		cfg      Config
		backends []Backend
		want     int
	}{
		{"lard's S", Config{Policy: PolicyConfig{Name: site.LARD}}, two, 65 + 25 - 1},
		{"the default policy is lard", Config{}, two, 65 + 25 - 1},
		{"thresholds", Config{Policy: PolicyConfig{Name: site.LARDR, TLow: 1, THigh: 2}}, two, 2},
		{"weights count as back ends", Config{Policy: PolicyConfig{Name: site.TBCCRD}},
			[]Backend{{Name: "a", Weight: 1.5}, {Name: "b", Weight: 1}}, 121},
		{"no weights: one each", Config{}, []Backend{{Name: "a"}, {Name: "b"}}, 89},
		{"wrr has none", Config{Policy: PolicyConfig{Name: site.WRR}}, two, 0},
		{"written", Config{Policy: PolicyConfig{Name: site.WRR}, Admission: AdmissionConfig{Limit: 5}}, two, 5},
		{"-1 is none", Config{Admission: AdmissionConfig{Limit: -1}}, two, 0},
		{"redirect has none", Config{Mode: ModeRedirect, Admission: AdmissionConfig{Limit: 5}}, two, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := newAdmission(tt.cfg, tt.backends).limit; got != tt.want {
				t.Errorf("limit %d, want %d", got, tt.want)
			}
		})
	}
}

// TestAdmission: with LARD's limit S = (n−1)·t_high + t_low − 1 = 2, the
// third request waits in the front end until one of the first two
// completes; beyond the queue, or after max_wait, requests get 503.
func TestAdmission(t *testing.T) {
	var started atomic.Int64
	release := make(chan struct{}, 16)
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthy" {
			return
		}
		started.Add(1)
		<-release
		_, _ = io.WriteString(w, "ok")
	})
	hc := quietHealth
	hc.Path = "/healthy"
	cfg := Config{Mode: ModeProxy, Policy: PolicyConfig{Name: "lard", TLow: 1, THigh: 2}, Health: hc,
		Admission: AdmissionConfig{Queue: 1, MaxWait: yamlconf.Duration(time.Minute)}}
	base, h, reg := startSite(t, cfg,
		Backend{Name: "b1", URL: webtest.Serve(t, slow)}, Backend{Name: "b2", URL: webtest.Serve(t, slow)})
	if h.adm.limit != 2 {
		t.Fatalf("limit %d, want 2", h.adm.limit)
	}
	if v := webtest.SampleSum(t, reg, "transmirror_mirror_site_admission_limit", nil); v != 2 {
		t.Errorf("site_admission_limit %v, want 2", v)
	}
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	codes := make(chan int, 8)
	get := func(path string) {
		resp, err := client.Get(base + path)
		if err != nil {
			codes <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes <- resp.StatusCode
	}
	for i := range 3 {
		go get("/f" + strings.Repeat("x", i))
	}
	probetest.Until(t, 10*time.Second, func() string {
		used, waiting := h.adm.state()
		if n := started.Load(); n != 2 || used != 2 || waiting != 1 {
			return fmt.Sprintf("two requests on the back ends, one queued: %d started, %d slots used, %d waiting", n, used, waiting)
		}
		return ""
	})
	if v := testutil.ToFloat64(h.m.queued); v != 1 {
		t.Errorf("site_queue_length %v, want 1", v)
	}
	// The queue holds one: a fourth request is refused at once.
	get("/full")
	if c := <-codes; c != http.StatusServiceUnavailable {
		t.Fatalf("the request beyond the queue got %d, want 503", c)
	}
	if v := testutil.ToFloat64(h.m.queueRejected.WithLabelValues(queueFull)); v != 1 {
		t.Errorf("rejected{full} %v, want 1", v)
	}
	// One completes: the queued one reaches a back end.
	release <- struct{}{}
	if c := <-codes; c != http.StatusOK {
		t.Fatalf("first completed with %d", c)
	}
	probetest.Until(t, 10*time.Second, func() string {
		used, waiting := h.adm.state()
		if n := started.Load(); n != 3 || used != 2 || waiting != 0 {
			return fmt.Sprintf("the queued request admitted: %d started, %d slots used, %d waiting", n, used, waiting)
		}
		return ""
	})
	release <- struct{}{}
	release <- struct{}{}
	for range 2 {
		if c := <-codes; c != http.StatusOK {
			t.Fatalf("completed with %d", c)
		}
	}
	probetest.Until(t, 10*time.Second, func() string {
		if used, waiting := h.adm.state(); used != 0 || waiting != 0 {
			return fmt.Sprintf("every slot back: %d slots used, %d waiting", used, waiting)
		}
		return ""
	})
}

// TestAdmissionMaxWait: a request that waits longer than max_wait gets 503.
func TestAdmissionMaxWait(t *testing.T) {
	release := make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthy" {
			<-release
		}
	})
	hc := quietHealth
	hc.Path = "/healthy"
	cfg := Config{Mode: ModeProxy, Policy: PolicyConfig{Name: "least-conn"}, Health: hc,
		Admission: AdmissionConfig{Limit: 1, Queue: 4, MaxWait: yamlconf.Duration(20 * time.Millisecond)}}
	base, h, _ := startSite(t, cfg, Backend{Name: "b1", URL: webtest.Serve(t, slow)})
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	first := make(chan error, 1)
	go func() {
		resp, err := client.Get(base + "/a")
		if err == nil {
			resp.Body.Close()
		}
		first <- err
	}()
	probetest.Until(t, 10*time.Second, func() string {
		if used, _ := h.adm.state(); used != 1 {
			return fmt.Sprintf("the first request admitted: %d slots used", used)
		}
		return ""
	})

	resp, err := client.Get(base + "/b")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("got %d (Retry-After %q), want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if v := testutil.ToFloat64(h.m.queueRejected.WithLabelValues(queueTimeout)); v != 1 {
		t.Errorf("rejected{timeout} %v, want 1", v)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}
