package scheduler

import (
	"math"
	"testing"
	"time"
)

// TestLeastLoadBurst sends a burst of 1,000 answers between two reports:
// the pending load spreads them in proportion to capacity.
func TestLeastLoadBurst(t *testing.T) {
	cases := []struct {
		name       string
		capacities []float64
		loads      []float64 // reported before the burst, as utilization
	}{
		{"1:2:3", []float64{100, 200, 300}, []float64{0, 0, 0}},
		{"1:1:1", []float64{100, 100, 100}, []float64{0, 0, 0}},
		{"5:1", []float64{500, 100}, []float64{0, 0}},
		{"1:2:3-equally-loaded", []float64{100, 200, 300}, []float64{0.3, 0.3, 0.3}},
	}
	pol := mustPolicy(t, "least-load", Params{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Unix(1_700_000_000, 0)
			ms := make([]Member, len(tc.capacities))
			est := NewEstimator(30 * time.Second)
			var total float64
			for i, c := range tc.capacities {
				ms[i] = Member{Name: string(rune('a' + i)), Up: true, Capacity: c, Weight: 1}
				est.Report(i, Usage{Load: tc.loads[i] * c}, t0)
				total += c
			}
			g := NewGroup(ms)
			rng := newRand(5)
			const answers = 1000
			counts := make([]int, len(ms))
			buf := make([]int, 0, 1)
			for k := range answers {
				now := t0.Add(time.Duration(k) * time.Millisecond) // a 1 s burst
				got, _ := pol.Pick(g, Query{N: 1, Rand: rng, Now: now, Load: est}, buf[:0])
				counts[got[0]]++
				est.Add(got, HiddenLoad(1), now) // a scope of 1 request/s
			}
			for i, c := range tc.capacities {
				want := c / total
				got := float64(counts[i]) / answers
				t.Logf("member %d: share %.4f, want %.4f", i, got, want)
				if math.Abs(got-want) > 0.1*want {
					t.Errorf("member %d: share %.4f, want %.4f ± 10%%", i, got, want)
				}
			}
			// The next report resets the pending load.
			est.Report(0, Usage{}, t0.Add(2*time.Second))
			if p := est.Pending(0, t0.Add(2*time.Second)); p != 0 {
				t.Errorf("pending after report = %g, want 0", p)
			}
		})
	}
}

func TestEstimator(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name string
		run  func(e *Estimator) float64 // returns member 0's pending load
		want float64
	}{
		{"empty", func(e *Estimator) float64 { return e.Pending(0, t0) }, 0},
		{"add", func(e *Estimator) float64 { e.Add([]int{0}, 10, t0); return e.Pending(0, t0) }, 10},
		{"split-evenly", func(e *Estimator) float64 { e.Add([]int{0, 1}, 10, t0); return e.Pending(0, t0) }, 5},
		{"halves-at-horizon", func(e *Estimator) float64 { e.Add([]int{0}, 10, t0); return e.Pending(0, t0.Add(time.Minute)) }, 5},
		{"quarter-at-two-horizons", func(e *Estimator) float64 {
			e.Add([]int{0}, 10, t0)
			return e.Pending(0, t0.Add(2*time.Minute))
		}, 2.5},
		{"accumulates-decayed", func(e *Estimator) float64 {
			e.Add([]int{0}, 10, t0)
			e.Add([]int{0}, 10, t0.Add(time.Minute))
			return e.Pending(0, t0.Add(time.Minute))
		}, 15},
		{"report-resets", func(e *Estimator) float64 {
			e.Add([]int{0}, 10, t0)
			e.Report(0, Usage{Load: 50}, t0.Add(time.Second))
			return e.Pending(0, t0.Add(time.Second))
		}, 0},
		{"clock-backwards", func(e *Estimator) float64 { e.Add([]int{0}, 10, t0); return e.Pending(0, t0.Add(-time.Hour)) }, 10},
		{"negative-ignored", func(e *Estimator) float64 {
			e.Add([]int{-1}, 10, t0)
			e.Report(-1, Usage{Load: 1}, t0)
			return e.Pending(-1, t0)
		}, 0},
		{"nan-ignored", func(e *Estimator) float64 { e.Add([]int{0}, math.NaN(), t0); return e.Pending(0, t0) }, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.run(NewEstimator(time.Minute)); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("pending = %g, want %g", got, tc.want)
			}
		})
	}
}

// TestEstimatorOverridesSnapshot checks that a report overrides the load of
// the Group snapshot, and pending load adds to it.
func TestEstimatorOverridesSnapshot(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	ms := []Member{
		{Name: "a", Up: true, Capacity: 100, Load: 90, Weight: 1},
		{Name: "b", Up: true, Capacity: 100, Load: 10, Weight: 1},
	}
	g := NewGroup(ms)
	cases := []struct {
		name  string
		setup func(e *Estimator)
		want  string
	}{
		{"snapshot", func(*Estimator) {}, "b"},
		{"reported", func(e *Estimator) { e.Report(0, Usage{}, t0) }, "a"},
		{"pending", func(e *Estimator) { e.Add([]int{1}, 85, t0) }, "a"},
	}
	pol := mustPolicy(t, "least-load", Params{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := NewEstimator(0)
			tc.setup(e)
			got, _ := pol.Pick(g, Query{N: 1, Rand: newRand(6), Now: t0, Load: e}, nil)
			if n := g.Member(got[0]).Name; n != tc.want {
				t.Errorf("Pick = %s, want %s", n, tc.want)
			}
		})
	}
}

// TestLeastLoadBandwidth checks that a member whose uplink is full ranks
// by its bandwidth utilization, however few requests it serves.
func TestLeastLoadBandwidth(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	const bandwidth = 12.5e6 // 100Mbit/s
	cases := []struct {
		name string
		a, b Usage // reported by members a and b, both of capacity 100
		want string
	}{
		{"by load", Usage{Load: 20}, Usage{Load: 30}, "a"},
		{"a's uplink full, few requests", Usage{Load: 5, BytesPerSecond: bandwidth}, Usage{Load: 30}, "b"},
		{"a's uplink half full", Usage{Load: 5, BytesPerSecond: bandwidth / 2}, Usage{Load: 30}, "b"},
		{"a's uplink a tenth full", Usage{Load: 5, BytesPerSecond: bandwidth / 10}, Usage{Load: 30}, "a"},
		{"both uplinks, b's fuller", Usage{Load: 5, BytesPerSecond: bandwidth / 2}, Usage{Load: 5, BytesPerSecond: bandwidth}, "a"},
	}
	pol := mustPolicy(t, "least-load", Params{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGroup([]Member{
				{Name: "a", Up: true, Capacity: 100, Bandwidth: bandwidth, Weight: 1},
				{Name: "b", Up: true, Capacity: 100, Bandwidth: bandwidth, Weight: 1},
			})
			e := NewEstimator(0)
			e.Report(0, tc.a, t0)
			e.Report(1, tc.b, t0)
			rng := newRand(7)
			for range 20 {
				got, _ := pol.Pick(g, Query{N: 2, Rand: rng, Now: t0, Load: e}, nil)
				if n := g.Member(got[0]).Name; n != tc.want {
					t.Fatalf("Pick = %v, want %s first", names(g, got), tc.want)
				}
			}
		})
	}
}
