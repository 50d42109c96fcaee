package sitesim

import (
	"math"
	"testing"
	"time"

	"github.com/transmirror/transmirror/scheduler/sim/backend"
	"github.com/transmirror/transmirror/scheduler/site"
)

// TestFrontendBottleneck: four back ends that take 100 µs a request,
// eight requests outstanding, 1008 requests of which the first 8 are
// not counted. A front end that spends 1 ms on each request caps the
// site at 1000 requests a second: request m is read at m+1 ms (the
// front end never idles: each next request arrives before it is free),
// and completes 100 µs later on a back end that is idle by then. The
// first counted request is sent when request 0 completes, at 1.1 ms,
// the last completes at 1008.1 ms: 1000 requests in 1007 ms. Handing
// off, the front end relays nothing, whatever PerKiB says; proxying,
// it spends 0.5 ms reading a request and 0.5 ms relaying its 1 KiB,
// the same 1 ms. Without a front-end cost the back ends set the pace:
// 4 × 10,000 a second.
func TestFrontendBottleneck(t *testing.T) {
	exact := time.Duration(1007 * time.Millisecond)
	for _, tt := range []struct {
		name        string
		mode        string
		costs       FrontendCosts
		wantElapsed time.Duration // 0: not computed
		want        float64       // requests per second, ±1%
		wantCPU     float64       // the front end's utilization, ±1%
	}{
		{"handoff, 1 ms a request", ModeHandoff, FrontendCosts{PerRequest: time.Millisecond}, exact, 1000 / 1.007, 1008 / 1008.1},
		{"handoff relays nothing", ModeHandoff, FrontendCosts{PerRequest: time.Millisecond, PerKiB: 10 * time.Millisecond}, exact, 1000 / 1.007, 1008 / 1008.1},
		{"proxy (the default), 0.5 ms a request and 0.5 ms a KiB", "", FrontendCosts{PerRequest: 500 * time.Microsecond, PerKiB: 500 * time.Microsecond}, 0, 1000, 1},
		{"free", ModeProxy, FrontendCosts{}, 0, 40_000, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Policy: site.WRR, Backends: 4, Backend: backend.Config{Costs: backend.Costs{PerRequest: 100 * time.Microsecond}},
				Outstanding: 8, Warmup: 8, Mode: tt.mode, Frontend: &tt.costs}
			res, err := Run(c, distinct(1008, 1024))
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests != 1000 || tt.wantElapsed != 0 && res.Elapsed != tt.wantElapsed ||
				!near(res.Throughput, tt.want, 0.01) || !near(res.FrontendCPU, tt.wantCPU, 0.01) {
				t.Errorf("%d requests in %v: %.1f/s, front end %.4f busy; want 1000 in %v, %.1f/s, %.4f busy",
					res.Requests, res.Elapsed, res.Throughput, res.FrontendCPU, tt.wantElapsed, tt.want, tt.wantCPU)
			}
		})
	}
}

// near reports whether got is within rel of want (relative), or both 0.
func near(got, want, rel float64) bool {
	if want == 0 {
		return got == 0
	}
	return math.Abs(got-want) <= rel*math.Abs(want)
}

// TestDefaultFrontendCosts: the front end costs what a back end does
// per request, and in proxy mode per KiB relayed what it does per KiB
// sent.
func TestDefaultFrontendCosts(t *testing.T) {
	own := backend.Costs{PerRequest: 10 * time.Microsecond, PerKiB: time.Microsecond, Seek: time.Millisecond}
	for _, tt := range []struct {
		name string
		mode string
		back backend.Costs
		want FrontendCosts
	}{
		{"proxy, LARD's costs", ModeProxy, backend.Costs{}, FrontendCosts{PerRequest: 145 * time.Microsecond, PerKiB: 80 * time.Microsecond}},
		{"the default mode is proxy", "", backend.Costs{}, FrontendCosts{PerRequest: 145 * time.Microsecond, PerKiB: 80 * time.Microsecond}},
		{"handoff, LARD's costs", ModeHandoff, backend.Costs{}, FrontendCosts{PerRequest: 145 * time.Microsecond}},
		{"proxy, the back ends' own", ModeProxy, own, FrontendCosts{PerRequest: 10 * time.Microsecond, PerKiB: time.Microsecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := DefaultFrontendCosts(tt.mode, tt.back); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
