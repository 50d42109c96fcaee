package group

import (
	"math"
	"testing"
	"time"
)

func TestFairShareRedirect(t *testing.T) {
	rules := RedirectRules{LowWatermark: 0.5, MaxShare: 0.8}
	flows := func(r, a float64) Flows { return Flows{Arrivals: r, Redirectable: a, Served: r} }
	tests := []struct {
		name string
		c    Correction
		want float64
	}{
		// C = 1000 load units: 100 requests/s at utilization 1.
		{"at the fair share: nothing", Correction{Flows: flows(70, 70), Capacity: 1000, Fair: 0.7}, 0},
		{"below: nothing", Correction{Flows: flows(50, 50), Capacity: 1000, Fair: 0.7}, 0},
		{"twice the fair share: half", Correction{Flows: flows(140, 140), Capacity: 1000, Fair: 0.7}, 0.5},
		{"the excess over what may be redirected", Correction{Flows: flows(140, 100), Capacity: 1000, Fair: 0.7}, 0.7},
		{"capped at max_share", Correction{Flows: flows(700, 700), Capacity: 1000, Fair: 0.7}, 0.8},
		{"the run queue is load", Correction{Flows: flows(70, 70), RunQueue: 7, Capacity: 1000, Fair: 0.7}, 0.1},
		{"fair below the low watermark: the watermark", Correction{Flows: flows(60, 60), Capacity: 1000, Fair: 0.3}, 1.0 / 6},
		{"no view: the low watermark", Correction{Flows: flows(100, 100), Capacity: 1000, Fair: math.NaN()}, 0.5},
		{"bandwidth over the target", Correction{Flows: flows(50, 50), Capacity: 1000, Fair: 0.7, Bandwidth: 1.4}, 0.5},
		{"nothing redirectable", Correction{Flows: flows(500, 0), Capacity: 1000, Fair: 0.7}, 0},
		{"no capacity", Correction{Flows: flows(100, 100), Fair: 0.7}, 0},
		{"infinite arrivals", Correction{Flows: flows(math.Inf(1), 1), Capacity: 1000, Fair: 0.7}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FairShareRedirect(rules, tt.c); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("FairShareRedirect = %g, want %g", got, tt.want)
			}
		})
	}
}

func TestSiblingLimit(t *testing.T) {
	rules := RedirectRules{LowWatermark: 0.5, MaxShare: 0.8}
	tests := []struct {
		name string
		c    Correction
		want float64
	}{
		{"serving under the target: the target", Correction{Flows: Flows{Served: 60}, Capacity: 1000, Fair: 0.7}, 0.7},
		{"serving over it: what it serves", Correction{Flows: Flows{Served: 90}, Capacity: 1000, Fair: 0.7}, 0.9},
		{"with the run queue", Correction{Flows: Flows{Served: 70}, RunQueue: 10, Capacity: 1000, Fair: 0.7}, 0.8},
		{"no capacity: the target", Correction{Flows: Flows{Served: 90}, Fair: 0.7}, 0.7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SiblingLimit(rules, tt.c); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("SiblingLimit = %g, want %g", got, tt.want)
			}
		})
	}
}

func TestFlowMeter(t *testing.T) {
	f := NewFlowMeter(time.Second)
	now := t0
	// 100 requests per second, evenly, for 10 time constants: the rate
	// reads 100 (within the sawtooth of one request, 1/τ).
	for range 1000 {
		now = now.Add(10 * time.Millisecond)
		f.Note(now, true, false)
	}
	if got := f.Flows(now); math.Abs(got.Arrivals-100) > 1 || math.Abs(got.Redirectable-100) > 1 || math.Abs(got.Served-100) > 1 {
		t.Errorf("steady 100/s reads %+v", got)
	}
	// Then they stop: after one time constant the rate is down to e⁻¹.
	if got := f.Flows(now.Add(time.Second)).Arrivals; math.Abs(got-100/math.E) > 1 {
		t.Errorf("one τ after the stop: %g, want %g", got, 100/math.E)
	}
	// Not redirectable, redirected: counted apart.
	g := NewFlowMeter(time.Second)
	g.Note(t0, false, true)
	if got := g.Flows(t0); got.Arrivals != 1 || got.Redirectable != 0 || got.Served != 0 {
		t.Errorf("one redirected request: %+v", got)
	}
	// A clock that steps back decays nothing and does not panic.
	g.Note(t0.Add(-time.Hour), true, false)
	if got := g.Flows(t0); got.Arrivals != 2 {
		t.Errorf("after a step back: %+v", got)
	}
}

// TestFairShareSettles runs the fair-share law in closed loop on a fluid
// model, in steps of 10 ms: a mirror whose target is 70 requests per
// second receives λ(t) requests per second, all redirectable, measures
// them with a FlowMeter and redirects FairShareRedirect of them; what it
// serves is λ·(1 − p). For a step of load, a ramp and a resolver that
// moves away and back (the arrivals falling to 40% and jumping back),
// what it serves settles on the target and does not oscillate: after
// each change the error changes sign at most once (the law reads the
// arrivals, not its own output, so there is no loop to ring), it is
// within 1% of the target five time constants after the change, and the
// requests served over the target are what the filter's lag costs: for
// a step from λ₀ to λ₁ over the target T, T·τ·ln(λ₁/λ₀) (see the package
// doc; a ramp of slope a costs about T·τ·ln(λ₁/(λ₀ − a·τ))), with 5% for
// the discrete steps. Nor does it undershoot: it never serves less than
// min(λ, T) but for the filter's lag after a drop (T·τ·ln(λ₀/λ₁), the
// mirror image of a rise), and it ends within 0.5% of min(λ, T) before
// each next change. (A law aimed at half its target passes the overshoot
// checks with room to spare; these fail it.)
func TestFairShareSettles(t *testing.T) {
	const (
		target = 70.0 // requests per second: u* = 0.7 of 100
		dt     = 10 * time.Millisecond
	)
	rules := RedirectRules{LowWatermark: 0.5, MaxShare: 1}
	tau := time.Second
	type phase struct {
		until time.Duration
		rate  func(t time.Duration) float64 // λ at t since the start
	}
	constant := func(r float64) func(time.Duration) float64 { return func(time.Duration) float64 { return r } }
	tests := []struct {
		name    string
		phases  []phase
		changes []time.Duration // when the load changes, for the checks
		excess  float64         // bound on the requests served over the target
		deficit float64         // bound on the requests served under min(λ, target)
	}{
		{"step from the fair share to three times it", []phase{{10 * time.Second, constant(70)}, {30 * time.Second, constant(210)}},
			[]time.Duration{10 * time.Second}, 1.05 * target * math.Log(3), 0.5},
		{"ramp from 50 to 210 over 20 s", []phase{{5 * time.Second, constant(50)},
			{25 * time.Second, func(t time.Duration) float64 { return 50 + 8*(t-5*time.Second).Seconds() }},
			{45 * time.Second, constant(210)}},
			[]time.Duration{25 * time.Second}, 1.05 * target * math.Log(202.0/62), 0.5},
		// The drop from 175 to 70 costs as much under the target as a rise
		// costs over it: T·τ·ln(175/70).
		{"resolver switch: away and back", []phase{{10 * time.Second, constant(175)}, {20 * time.Second, constant(70)}, {40 * time.Second, constant(175)}},
			[]time.Duration{10 * time.Second, 20 * time.Second}, 1.05 * target * math.Log(2.5), 1.05 * target * math.Log(2.5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFlowMeter(tau)
			var served, floor []float64 // per step, requests per second: served, and min(λ, target)
			var excess, deficit float64
			var at time.Duration
			for _, ph := range tt.phases {
				for ; at < ph.until; at += dt {
					now := t0.Add(at)
					lambda := ph.rate(at)
					// The fluid arrivals of the step, λ·dt requests of 1/τ
					// each; the law reads the meter halfway through them, as
					// Poisson arrivals see its time average.
					add := func(n float64) {
						f.mu.Lock()
						f.decay(now)
						f.arrivals += n / f.tau
						f.redirectable += n / f.tau
						f.mu.Unlock()
					}
					n := lambda * dt.Seconds()
					add(n / 2)
					p := FairShareRedirect(rules, Correction{Flows: f.Flows(now), Capacity: 1000, Fair: target / 100})
					add(n / 2)
					s := lambda * (1 - p)
					served, floor = append(served, s), append(floor, min(lambda, target))
					if at > tt.phases[0].until-dt {
						excess += max(s-target, 0) * dt.Seconds()
						deficit += max(min(lambda, target)-s, 0) * dt.Seconds()
					}
				}
			}
			if excess > tt.excess {
				t.Errorf("served %.1f requests over the target after the first change, want ≤ %.1f", excess, tt.excess)
			}
			if deficit > tt.deficit {
				t.Errorf("served %.1f requests under min(arrivals, target) after the first change, want ≤ %.1f: it redirects what it could serve", deficit, tt.deficit)
			}
			end := time.Duration(len(served)) * dt
			for k, c := range tt.changes {
				next := end
				if k+1 < len(tt.changes) {
					next = tt.changes[k+1]
				}
				from, to := int(c/dt), int(next/dt)
				signs := 0
				for i := from + 1; i < to; i++ {
					a, b := served[i-1]-target, served[i]-target
					if math.Abs(a) > 1e-9 && math.Abs(b) > 1e-9 && (a > 0) != (b > 0) {
						signs++
					}
				}
				if signs > 1 {
					t.Errorf("after the change at %v the error changed sign %d times: it oscillates", c, signs)
				}
				if settled := int((c + 5*tau) / dt); settled < to && served[settled] > target*1.01 {
					t.Errorf("5τ after the change at %v it serves %.2f/s, want within 1%% of %g", c, served[settled], target)
				}
				if last := served[to-1]; last > target*1.005 {
					t.Errorf("before the next change it serves %.2f/s, over the target %g", last, target)
				}
				if last, low := served[to-1], floor[to-1]; last < low*0.995 {
					t.Errorf("before the next change it serves %.2f/s, under min(arrivals, target) %g", last, low)
				}
			}
			t.Logf("after the first change: %.1f requests served over the target, %.1f under", excess, deficit)
		})
	}
}

func TestOverloaded(t *testing.T) {
	rules := RedirectRules{LowWatermark: 0.7}
	tests := []struct {
		name     string
		arrivals float64 // requests per second
		fair     float64
		tau      time.Duration
		want     bool
	}{
		// Target 70 requests/s (0.7 of 1000 load units); the noise of a
		// FlowMeter at τ = 1 s is √(R/2) requests/s, three of them the bar.
		{"at the target", 70, 0.7, time.Second, false},
		{"within three sigmas", 85, 0.7, time.Second, false},         // excess 15 < 3·√42.5 = 19.6
		{"over three sigmas", 95, 0.7, time.Second, true},            // excess 25 > 3·√47.5 = 20.7
		{"the skew's hot spot", 190, 0.7, time.Second, true},         // excess 120 > 29
		{"a longer τ is less noisy", 85, 0.7, 4 * time.Second, true}, // 15 > 3·√10.6 = 9.8
		{"below the target", 50, 0.7, time.Second, false},
		{"target raised by the fair share", 95, 0.9, time.Second, false},
		{"no time constant", 190, 0.7, 0, false},
		{"nothing comes in", 0, 0.7, time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Correction{Flows: Flows{Arrivals: tt.arrivals, Redirectable: tt.arrivals}, Capacity: 1000, Fair: tt.fair, TimeConstant: tt.tau}
			if got := Overloaded(rules, c); got != tt.want {
				t.Errorf("Overloaded(%g/s, fair %g, τ %v) = %t, want %t", tt.arrivals, tt.fair, tt.tau, got, tt.want)
			}
		})
	}
}
