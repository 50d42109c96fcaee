package scheduler

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestUtilization(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name                 string
		f                    Figures
		load, bandwidth, max float64
	}{
		{"load only", Figures{Load: 30, Pending: 10, Capacity: 100}, 0.4, 0, 0.4},
		{"no bandwidth: bytes do not count", Figures{Load: 30, Capacity: 100, BytesPerSecond: 1e9}, 0.3, 0, 0.3},
		{"the uplink is the bound", Figures{Load: 5, Capacity: 100, BytesPerSecond: 95e6, Bandwidth: 100e6}, 0.05, 0.95, 0.95},
		{"the load is the bound", Figures{Load: 80, Pending: 10, Capacity: 100, BytesPerSecond: 10e6, Bandwidth: 100e6}, 0.9, 0.1, 0.9},
		{"over the bandwidth", Figures{Capacity: 100, BytesPerSecond: 150e6, Bandwidth: 100e6}, 0, 1.5, 1.5},
		{"no capacity: full", Figures{Load: 1, BytesPerSecond: 1, Bandwidth: 100}, inf, 0.01, inf},
		{"idle", Figures{Capacity: 100, Bandwidth: 100e6}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near := func(a, b float64) bool { return a == b || math.Abs(a-b) < 1e-12 }
			if got := tt.f.LoadUtilization(); !near(got, tt.load) {
				t.Errorf("LoadUtilization = %g, want %g", got, tt.load)
			}
			if got := tt.f.BandwidthUtilization(); !near(got, tt.bandwidth) {
				t.Errorf("BandwidthUtilization = %g, want %g", got, tt.bandwidth)
			}
			if got := tt.f.Utilization(); !near(got, tt.max) {
				t.Errorf("Utilization = %g, want %g", got, tt.max)
			}
		})
	}
}

// TestPoliciesSeeBandwidth checks that the figures a policy works from
// carry the bandwidth: from the snapshot, overridden by a report, and
// ignored (reported bytes as much as reported load) when failing open.
func TestPoliciesSeeBandwidth(t *testing.T) {
	ms := []Member{{Name: "a", Up: true, Capacity: 100, Load: 10, BytesPerSecond: 90e6, Bandwidth: 100e6}}
	tests := []struct {
		name   string
		up     bool
		report *Usage
		want   float64
	}{
		{"snapshot", true, nil, 0.9},
		{"report overrides", true, &Usage{Load: 10, BytesPerSecond: 20e6}, 0.2},
		{"report of load only", true, &Usage{Load: 50}, 0.5},
		{"failing open", false, &Usage{Load: 10, BytesPerSecond: 20e6}, 0},
	}
	t0 := time.Unix(1_700_000_000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := append([]Member(nil), ms...)
			ms[0].Up = tt.up
			g := NewGroup(ms)
			e := NewEstimator(0)
			if tt.report != nil {
				e.Report(0, *tt.report, t0)
			}
			q := Query{Now: t0, Load: e}
			v := begin(g, &q)
			defer v.end()
			if got := v.util(0); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("util = %g, want %g", got, tt.want)
			}
		})
	}
}

// TestUtilCache: a pick reuses a member's utilization that an earlier pick
// computed less than utilRecheck ago, unless a report, a booking, a
// booking moved off or a remote share changed it since; after
// utilRecheck it computes it again (here: the pending load has decayed).
func TestUtilCache(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := []Member{{Name: "a", Up: true, Capacity: 100}, {Name: "b", Up: true, Capacity: 100}}
	tests := []struct {
		name     string
		windowed bool
		after    time.Duration
		change   func(e *Estimator, at time.Time)
		cached   bool // the second pick sees the first one's figure
	}{
		{"nothing changed", false, 100 * time.Millisecond, func(*Estimator, time.Time) {}, true},
		{"a report", false, time.Millisecond, func(e *Estimator, at time.Time) { e.Report(0, Usage{Load: 80}, at) }, false},
		{"a booking", false, time.Millisecond, func(e *Estimator, at time.Time) { e.Add([]int{0}, 30, at) }, false},
		{"a booking moved off", true, time.Millisecond, func(e *Estimator, at time.Time) { e.Move([]int{1}, []int{0}, 1, 20, at, at) }, false},
		{"a remote share", false, time.Millisecond, func(e *Estimator, at time.Time) { e.SetRemote(0, 20) }, false},
		{"utilRecheck later", false, utilRecheck + time.Millisecond, func(*Estimator, time.Time) {}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewGroup(ms)
			e := NewEstimator(time.Second)
			if tt.windowed {
				e = NewWindowEstimator(time.Second)
			}
			e.Report(0, Usage{Load: 10}, t0)
			e.Report(1, Usage{Load: 10}, t0) // both entries exist: no growth clears the cache
			e.Add([]int{0}, 50, t0)
			util := func(at time.Time) (cached, exact float64) {
				q := Query{Now: at, Load: e}
				v := begin(g, &q)
				defer v.end()
				return v.util(0), v.figures(0).Utilization()
			}
			first, _ := util(t0)
			t1 := t0.Add(tt.after)
			tt.change(e, t1)
			got, exact := util(t1)
			if want := map[bool]float64{true: first, false: exact}[tt.cached]; got != want {
				t.Errorf("util %g, want %g (first pick %g, exact %g)", got, want, first, exact)
			}
			if got == first && !tt.cached {
				t.Errorf("util %g: still the first pick's, the change does not show", got)
			}
		})
	}
	t.Run("failing open", func(t *testing.T) {
		down := []Member{{Name: "a", Capacity: 100}}
		e := NewEstimator(0)
		e.Report(0, Usage{Load: 90}, t0)
		q := Query{Now: t0, Load: e}
		v := begin(NewGroup(down), &q)
		defer v.end()
		if got := v.util(0); got != 0 {
			t.Errorf("util %g failing open, want 0 (reports ignored)", got)
		}
		if e.utils[0].at.Load() != 0 {
			t.Error("a fail-open figure was cached")
		}
	})
}

// TestPicksShareTheCache: picks on several goroutines fill and read the
// utilization cache under the estimator's read lock while reports and
// bookings change it (run with -race); every answer names distinct
// members that are up, and a member reported full is never picked after
// its report while another has room.
func TestPicksShareTheCache(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var ms []Member
	for i := range 32 {
		ms = append(ms, Member{Name: fmt.Sprint("m", i), Up: i != 3, Capacity: 100, Weight: 1, Loc: at(float64(i), float64(i), "", "")})
	}
	g := NewGroup(ms)
	e := NewWindowEstimator(time.Minute)
	pol := mustPolicy(t, "geo-load", Params{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := newRand(uint64(w))
			dst := make([]int, 0, 2)
			for k := range 2000 {
				now := t0.Add(time.Duration(k) * time.Millisecond)
				if w == 0 && k%10 == 0 {
					e.ReportWindow(k%32, Usage{Load: float64(k % 100)}, now, 10*time.Second)
				}
				dst, _ = pol.Pick(g, Query{Client: Client{Loc: at(5, 5, "", "")}, N: 2, Rand: r, Now: now, Load: e}, dst[:0])
				if len(dst) != 2 || dst[0] == dst[1] || !ms[dst[0]].Up || !ms[dst[1]].Up {
					t.Errorf("pick %v", dst)
					return
				}
				e.Add(dst, 0.01, now)
			}
		})
	}
	wg.Wait()
	// Member 5 (the client's nearest) reported full, the others with room:
	// no pick after the report names it, though picks cached its figure.
	end := t0.Add(3 * time.Second)
	for i := range ms {
		e.ReportWindow(i, Usage{Load: 10}, end, 10*time.Second)
	}
	pol.Pick(g, Query{Client: Client{Loc: at(5, 5, "", "")}, N: 2, Rand: newRand(8), Now: end, Load: e}, nil)
	e.ReportWindow(5, Usage{Load: 100}, end, 10*time.Second)
	r := newRand(9)
	for k := range 200 {
		dst, _ := pol.Pick(g, Query{Client: Client{Loc: at(5, 5, "", "")}, N: 2, Rand: r, Now: end.Add(time.Duration(k) * time.Millisecond), Load: e}, nil)
		if slices.Contains(dst, 5) {
			t.Fatalf("pick %d names member 5, reported full", k)
		}
	}
}
