package probe

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func fixedRunQueue(m float64) func() (float64, error) {
	return func() (float64, error) { return m, nil }
}

func newTestReporter(t *testing.T, clk *fakeClock, window time.Duration, rq func() (float64, error)) *Reporter {
	t.Helper()
	r, err := NewReporter(ReporterConfig{Group: "www", Member: "fra1", Capacity: 2000, Window: window, RunQueue: rq, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestReporterRates(t *testing.T) {
	tests := []struct {
		name     string
		window   time.Duration
		requests int           // spread evenly over spread
		spread   time.Duration // from t0
		after    time.Duration // snapshot at t0+spread+after
		wantR    float64
	}{
		{"100 in 1s window", time.Second, 100, time.Second, 0, 100},
		{"steady 50/s over 10s window", 10 * time.Second, 1000, 20 * time.Second, 0, 50},
		{"young reporter", 10 * time.Second, 30, 3 * time.Second, 0, 10},
		{"window passed", time.Second, 100, time.Second, 2 * time.Second, 0},
		{"nothing", time.Second, 0, time.Second, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock(t0)
			r := newTestReporter(t, clk, tt.window, fixedRunQueue(1.5))
			if tt.requests > 0 {
				step := tt.spread / time.Duration(tt.requests)
				for i := 0; i < tt.requests; i++ {
					r.RequestStarted()
					clk.Advance(step)
					r.RequestDone(1000, i%10 == 0)
				}
			} else {
				clk.Advance(tt.spread)
			}
			clk.Advance(tt.after)
			rep := r.Snapshot(clk.Now())
			if math.Abs(rep.R-tt.wantR) > 0.02*tt.wantR+1e-9 {
				t.Errorf("r = %g, want ≈ %g", rep.R, tt.wantR)
			}
			if !near(rep.BytesPerSecond, 1000*rep.R) || math.Abs(rep.RedirectsPerSecond-rep.R/10) > 0.15*rep.R/10+1e-9 {
				t.Errorf("bytes/s = %g, redirects/s = %g for r = %g", rep.BytesPerSecond, rep.RedirectsPerSecond, rep.R)
			}
			if rep.M != 1.5 || !near(rep.Load, 10*(rep.R+1.5)) {
				t.Errorf("m = %g, load = %g, want 1.5 and 10·(r+m)", rep.M, rep.Load)
			}
			if err := rep.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestReporterSnapshot(t *testing.T) {
	clk := newFakeClock(t0)
	fail := atomic.Bool{}
	rq := func() (float64, error) {
		if fail.Load() {
			return 0, errors.New("boom")
		}
		return 0.75, nil
	}
	r := newTestReporter(t, clk, time.Second, rq)
	r.RequestStarted()
	r.RequestStarted()
	r.RequestDone(10, false)
	a := r.Snapshot(clk.Now())
	fail.Store(true)
	b := r.Snapshot(clk.Now())
	if a.Seq == 0 || b.Seq <= a.Seq {
		t.Errorf("seq %d then %d, want increasing from 1", a.Seq, b.Seq)
	}
	if a.Conns != 1 {
		t.Errorf("conns = %d, want 1 in flight", a.Conns)
	}
	if b.M != 0.75 {
		t.Errorf("m after a failed read = %g, want the last good 0.75", b.M)
	}
	if a.Group != "www" || a.Member != "fra1" || a.Capacity != 2000 || !a.Time.Equal(t0) {
		t.Errorf("identity fields: %+v", a)
	}
}

func TestReporterRunQueueInFlight(t *testing.T) {
	clk := newFakeClock(t0)
	r, err := NewReporter(ReporterConfig{
		Group: "www", Member: "fra1", Capacity: 2000, Window: time.Second, Clock: clk.Now, RunQueueInFlight: true,
		RunQueue: func() (float64, error) { t.Error("RunQueue read with RunQueueInFlight"); return 9, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0, 1, 2, 1} {
		switch i {
		case 1, 2:
			r.RequestStarted()
		case 3:
			r.RequestDone(10, false)
		}
		rep := r.Snapshot(clk.Now())
		if rep.M != want || rep.Conns != int64(want) || !near(rep.Load, 10*(rep.R+want)) {
			t.Errorf("step %d: m = %g, conns = %d, load = %g, want m = conns = %g and load 10·(r+m)", i, rep.M, rep.Conns, rep.Load, want)
		}
	}
}

func TestReporterWrapAndServe(t *testing.T) {
	clk := newFakeClock(t0)
	rep := newTestReporter(t, clk, time.Second, fixedRunQueue(0))
	release := make(chan struct{})
	entered := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", 1000)) })
	mux.HandleFunc("/copy", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, strings.NewReader(strings.Repeat("y", 500))) // through ReadFrom
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://fra1.example.org/moved", http.StatusFound)
	})
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	top := http.NewServeMux()
	top.Handle(loadPath, rep)
	top.Handle("/", rep.Wrap(mux))
	srv := httptest.NewServer(top)
	defer srv.Close()

	get := func(path string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get("/file")
	get("/copy")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(srv.URL + "/moved")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	done := make(chan struct{})
	go func() { get("/block"); close(done) }()
	<-entered

	clk.Advance(500 * time.Millisecond)
	resp, err = http.Get(srv.URL + loadPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "application/json" {
		t.Fatalf("GET %s: %d %s", loadPath, resp.StatusCode, ct)
	}
	got, err := DecodeReport(resp.Body, MaxReportSize)
	if err != nil {
		t.Fatal(err)
	}
	close(release)
	<-done
	redirectBytes := int64(len(`<a href="http://fra1.example.org/moved">Found</a>.`) + 2)
	want := Report{
		Group: "www", Member: "fra1", Seq: 1, Time: t0.Add(500 * time.Millisecond),
		R: 3 / 0.5, Conns: 1, BytesPerSecond: float64(1500+redirectBytes) / 0.5, RedirectsPerSecond: 1 / 0.5,
		Load: 60, Capacity: 2000, Window: 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("report:\n got %+v\nwant %+v", got, want)
	}

	t.Run("method not allowed", func(t *testing.T) {
		resp, err := http.Post(srv.URL+loadPath, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("POST: %d Allow=%q", resp.StatusCode, resp.Header.Get("Allow"))
		}
	})
}

func TestNewReporterErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  ReporterConfig
		sub  string
	}{
		{"no group", ReporterConfig{Member: "a"}, "group: empty"},
		{"no member", ReporterConfig{Group: "a"}, "member: empty"},
		{"negative capacity", ReporterConfig{Group: "a", Member: "b", Capacity: -1}, "capacity"},
		{"nan capacity", ReporterConfig{Group: "a", Member: "b", Capacity: math.NaN()}, "capacity"},
		{"negative bandwidth", ReporterConfig{Group: "a", Member: "b", Bandwidth: -1}, "bandwidth"},
		{"infinite bandwidth", ReporterConfig{Group: "a", Member: "b", Bandwidth: math.Inf(1)}, "bandwidth"},
		{"tiny window", ReporterConfig{Group: "a", Member: "b", Window: time.Millisecond}, "window"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewReporter(tt.cfg)
			if !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tt.sub) {
				t.Fatalf("err = %v, want ErrInvalidSpec with %q", err, tt.sub)
			}
		})
	}
}

func TestReporterSetCapacity(t *testing.T) {
	tests := []struct {
		name string
		set  float64
		want float64
	}{
		{"raised", 5000, 5000},
		{"zero", 0, 0},
		{"negative ignored", -1, 2000},
		{"NaN ignored", math.NaN(), 2000},
		{"infinite ignored", math.Inf(1), 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock(time.Unix(1000, 0))
			r := newTestReporter(t, clk, time.Second, fixedRunQueue(0))
			r.SetCapacity(tt.set)
			if got := r.Snapshot(clk.Now()).Capacity; got != tt.want {
				t.Errorf("capacity %g after SetCapacity(%g), want %g", got, tt.set, tt.want)
			}
		})
	}
}

func TestReporterBandwidth(t *testing.T) {
	clk := newFakeClock(time.Unix(1000, 0))
	r, err := NewReporter(ReporterConfig{Group: "www", Member: "fra1", Capacity: 2000, Bandwidth: 125e6,
		Window: time.Second, RunQueue: fixedRunQueue(0), Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Snapshot(clk.Now()).Bandwidth; got != 125e6 {
		t.Fatalf("bandwidth %g, want the configured 125e6", got)
	}
	tests := []struct {
		name string
		set  float64
		want float64
	}{
		{"raised", 250e6, 250e6},
		{"no limit", 0, 0},
		{"negative ignored", -1, 0},
		{"NaN ignored", math.NaN(), 0},
		{"back", 125e6, 125e6},
		{"infinite ignored", math.Inf(1), 125e6},
	}
	for _, tt := range tests { // in order: each starts where the last ended
		t.Run(tt.name, func(t *testing.T) {
			r.SetBandwidth(tt.set)
			rep := r.Snapshot(clk.Now())
			if rep.Bandwidth != tt.want {
				t.Errorf("bandwidth %g after SetBandwidth(%g), want %g", rep.Bandwidth, tt.set, tt.want)
			}
			if err := rep.Validate(); err != nil {
				t.Errorf("report: %v", err)
			}
		})
	}
}

// TestReporterGroupAndServing: requests on the group name (any case, a
// port, a trailing dot) are counted in group_requests_per_second, others
// not; serving_load is 10·(Serving + m).
func TestReporterGroupAndServing(t *testing.T) {
	clk := newFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	r, err := NewReporter(ReporterConfig{
		Group: "www.example.org", Member: "fra1", Capacity: 100, Window: time.Second,
		RunQueue: func() (float64, error) { return 0.5, nil }, Clock: clk.Now,
		Serving: func(time.Time) float64 { return 7 },
	})
	if err != nil {
		t.Fatal(err)
	}
	h := r.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	for _, host := range []string{"www.example.org", "WWW.example.org.:8080", "fra1.example.org", "127.0.0.1:80", "www.example.org.evil"} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	clk.Advance(500 * time.Millisecond)
	got := r.Snapshot(clk.Now())
	if want := 2 / 0.5; got.GroupRequestsPerSecond != want {
		t.Errorf("group_requests_per_second %g, want %g", got.GroupRequestsPerSecond, want)
	}
	if want := LoadOf(7, 0.5); got.ServingLoad != want {
		t.Errorf("serving_load %g, want %g", got.ServingLoad, want)
	}
	if got.Window != 1 {
		t.Errorf("window_seconds %g, want 1", got.Window)
	}
	if err := got.Validate(); err != nil {
		t.Error(err)
	}
	if s := got.Served(); s != got.ServingLoad {
		t.Errorf("Served() = %g, want the serving load %g", s, got.ServingLoad)
	}
	got.ServingLoad = 0
	if s, want := got.Served(), got.Load-10*got.RedirectsPerSecond; s != want {
		t.Errorf("Served() without serving_load = %g, want load − 10·redirects = %g", s, want)
	}
}

// fixedPaths is a PathSource with fixed figures.
type fixedPaths struct {
	top     []PathCount
	rescued uint64
}

func (p fixedPaths) Top(time.Time) []PathCount { return p.top }
func (p fixedPaths) Rescued() uint64           { return p.rescued }

func TestReporterSetPaths(t *testing.T) {
	tests := []struct {
		name        string
		src         PathSource
		want        []PathCount
		wantRescued uint64
	}{
		{name: "none"},
		{name: "given", src: fixedPaths{top: []PathCount{{"/a", 3}, {"/b", 1}}, rescued: 5},
			want: []PathCount{{"/a", 3}, {"/b", 1}}, wantRescued: 5},
		{name: "invalid entries left out", src: fixedPaths{top: []PathCount{
			{"/a", 3}, {"no slash", 2}, {"/a", 2}, {"/b c", 2}, {"/z", 0}, {"/n", math.NaN()}, {"/b", 1},
		}}, want: []PathCount{{"/a", 3}, {"/b", 1}}},
		{name: "cut to sixteen", src: fixedPaths{top: manyTop(20)}, want: manyTop(16)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock(time.Unix(1000, 0))
			r := newTestReporter(t, clk, time.Second, fixedRunQueue(0))
			r.SetPaths(tt.src)
			rep := r.Snapshot(clk.Now())
			if !reflect.DeepEqual(rep.Top, tt.want) || rep.Rescued != tt.wantRescued {
				t.Errorf("top %v rescued %d, want %v %d", rep.Top, rep.Rescued, tt.want, tt.wantRescued)
			}
			if err := rep.Validate(); err != nil {
				t.Errorf("the report does not validate: %v", err)
			}
		})
	}
}
