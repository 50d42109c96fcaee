package scheduler

import (
	"math"
	"testing"
	"time"
)

// TestWindowEstimator checks the windowed model: booked load ramps out
// over the report window after the answer, load that leaves a member ramps
// out the same way, reports do not reset it, load + pending never goes
// below 0, and bookings no report takes in decay with the horizon.
func TestWindowEstimator(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	sec := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	const w = 10 * time.Second
	cases := []struct {
		name string
		run  func(e *Estimator) float64 // returns member 0's pending load
		want float64
	}{
		{"booked-before-any-report", func(e *Estimator) float64 {
			e.Move([]int{0}, nil, 0, 10, t0, t0)
			return e.Pending(0, t0)
		}, 10},
		{"report-before-the-answer-shows-none", func(e *Estimator) float64 {
			e.ReportWindow(0, Usage{Load: 50}, sec(-1), w)
			e.Move([]int{0}, nil, 0, 10, t0, t0)
			return e.Pending(0, sec(1))
		}, 10},
		{"half-a-window-later-half", func(e *Estimator) float64 {
			e.Move([]int{0}, nil, 0, 10, t0, t0)
			e.ReportWindow(0, Usage{Load: 55}, sec(5), w)
			return e.Pending(0, sec(5))
		}, 5},
		{"a-window-later-none", func(e *Estimator) float64 {
			e.Move([]int{0}, nil, 0, 10, t0, t0)
			e.ReportWindow(0, Usage{Load: 60}, sec(5), w)
			e.ReportWindow(0, Usage{Load: 60}, sec(10), w)
			return e.Pending(0, sec(10))
		}, 0},
		{"split-over-the-answer", func(e *Estimator) float64 {
			e.Move([]int{0, 1}, nil, 0, 10, t0, t0)
			e.ReportWindow(0, Usage{Load: 50}, sec(2), w)
			return e.Pending(0, sec(2))
		}, 4},
		{"leaves-the-previous-member", func(e *Estimator) float64 {
			e.ReportWindow(0, Usage{Load: 50}, sec(-1), w)
			e.Move([]int{1}, []int{0}, 1, 10, t0, t0)
			e.ReportWindow(0, Usage{Load: 48}, sec(4), w)
			return e.Pending(0, sec(4))
		}, -6},
		{"left-before-the-report", func(e *Estimator) float64 {
			e.ReportWindow(0, Usage{Load: 50}, sec(4), w)
			e.Move([]int{1}, []int{0}, 1, 10, t0, sec(5)) // expired at t0, asked again at 5 s
			return e.Pending(0, sec(5))
		}, -6},
		{"never-below-zero", func(e *Estimator) float64 {
			e.ReportWindow(0, Usage{Load: 4}, sec(-1), w)
			e.Move(nil, []int{0}, 1, 10, t0, t0)
			return e.Pending(0, t0)
		}, -4},
		{"moved-back-nets-out", func(e *Estimator) float64 {
			e.ReportWindow(0, Usage{Load: 50}, sec(-1), w)
			e.Move([]int{1}, []int{0}, 1, 10, t0, t0)
			e.Move([]int{0}, []int{1}, 1, 10, t0, t0)
			return e.Pending(0, t0)
		}, 0},
		{"reports-lost-decay-with-horizon", func(e *Estimator) float64 {
			e.Move([]int{0}, nil, 0, 10, t0, t0)
			return e.Pending(0, t0.Add(bookSlots*time.Second+time.Minute))
		}, 5},
		{"recycled-slot-goes-stale", func(e *Estimator) float64 {
			e.Move([]int{0}, nil, 0, 10, t0, t0)
			e.Move([]int{0}, nil, 0, 10, t0.Add(bookSlots*time.Second), t0.Add(bookSlots*time.Second))
			return e.Pending(0, t0.Add(bookSlots*time.Second+time.Minute))
		}, 5 + 10},
		{"add-is-a-move-from-nowhere", func(e *Estimator) float64 {
			e.Add([]int{0, 1}, 10, t0)
			return e.Pending(0, t0)
		}, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.run(NewWindowEstimator(time.Minute)); math.Abs(got-tc.want) > 1e-6 {
				t.Errorf("pending = %g, want %g", got, tc.want)
			}
		})
	}
}

// TestEstimatorMoveExponential: NewEstimator's model ignores the members
// a load leaves and the report window, as the mirrors rely on.
func TestEstimatorMoveExponential(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	e := NewEstimator(time.Minute)
	e.Move([]int{1}, []int{0}, 1, 10, t0, t0)
	if p := e.Pending(0, t0); p != 0 {
		t.Errorf("pending of the member left = %g, want 0", p)
	}
	if p := e.Pending(1, t0.Add(time.Minute)); math.Abs(p-5) > 1e-9 {
		t.Errorf("pending a half-life later = %g, want 5", p)
	}
	e.ReportWindow(1, Usage{Load: 1}, t0.Add(time.Minute), time.Hour)
	if p := e.Pending(1, t0.Add(time.Minute)); p != 0 {
		t.Errorf("pending after a report = %g, want 0", p)
	}
}

// TestEstimatorRemote: the pending load that others booked (SetRemote)
// adds to Pending, replaces what was set before, is not in LocalPending,
// never takes load + pending below 0, and a Pick sees it.
func TestEstimatorRemote(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name           string
		run            func(e *Estimator)
		pending, local float64
	}{
		{"remote only", func(e *Estimator) { e.SetRemote(0, 30) }, 30, 0},
		{"local and remote add up", func(e *Estimator) {
			e.Move([]int{0}, nil, 0, 10, t0, t0)
			e.SetRemote(0, 30)
		}, 40, 10},
		{"a new remote figure replaces the old", func(e *Estimator) {
			e.SetRemote(0, 30)
			e.SetRemote(0, 5)
		}, 5, 0},
		{"a negative remote figure stops at -load", func(e *Estimator) {
			e.ReportWindow(0, Usage{Load: 20}, t0, 10*time.Second)
			e.SetRemote(0, -50)
		}, -20, 0},
		{"not finite: 0", func(e *Estimator) { e.SetRemote(0, math.Inf(1)) }, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := NewWindowEstimator(time.Minute)
			tc.run(e)
			if got := e.Pending(0, t0); math.Abs(got-tc.pending) > 1e-9 {
				t.Errorf("Pending = %g, want %g", got, tc.pending)
			}
			if got := e.LocalPending(0, t0); math.Abs(got-tc.local) > 1e-9 {
				t.Errorf("LocalPending = %g, want %g", got, tc.local)
			}
		})
	}
	t.Run("a pick sees it", func(t *testing.T) {
		g := NewGroup([]Member{{Name: "a", Up: true, Capacity: 100}, {Name: "b", Up: true, Capacity: 100}})
		e := NewWindowEstimator(time.Minute)
		e.SetRemote(0, 90) // another node sent a's capacity's worth
		for range 20 {
			picked, _ := leastLoad{}.Pick(g, Query{N: 1, Rand: newRand(1), Now: t0, Load: e}, nil)
			if len(picked) != 1 || picked[0] != 1 {
				t.Fatalf("picked %v, want b (a carries the other node's answers)", picked)
			}
		}
	})
}

// TestPendingSum: the pending load of several sources adds up, with each
// source's remote figures, floored once at −load (the reporting
// Estimator's); alone, it is the Estimator's Pending; a pick sees the sum.
func TestPendingSum(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name string
		run  func(own, redir, nodes *Estimator)
		want float64
	}{
		{"nothing", func(own, redir, nodes *Estimator) {}, 0},
		{"each source adds", func(own, redir, nodes *Estimator) {
			own.Move([]int{0}, nil, 0, 7, t0, t0)
			redir.Move([]int{0}, nil, 0, 50, t0, t0)
			nodes.SetRemote(0, 40)
		}, 97},
		{"floored once, not per source", func(own, redir, nodes *Estimator) {
			own.ReportWindow(0, Usage{Load: 20}, t0, 10*time.Second)
			own.Move(nil, []int{0}, 1, 30, t0, t0) // -30, below -load alone
			redir.Move([]int{0}, nil, 0, 25, t0, t0)
		}, -5},
		{"the sum below -load", func(own, redir, nodes *Estimator) {
			own.ReportWindow(0, Usage{Load: 20}, t0, 10*time.Second)
			nodes.SetRemote(0, -50)
		}, -20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			own, redir, nodes := NewWindowEstimator(time.Minute), NewWindowEstimator(time.Minute), NewWindowEstimator(time.Minute)
			tc.run(own, redir, nodes)
			if got := PendingSum(0, t0, own, []*Estimator{redir, nodes}); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("PendingSum = %g, want %g", got, tc.want)
			}
			if got, want := PendingSum(0, t0, own, nil), own.Pending(0, t0); got != want {
				t.Errorf("PendingSum alone = %g, want Pending's %g", got, want)
			}
		})
	}
	t.Run("a pick sees it", func(t *testing.T) {
		g := NewGroup([]Member{{Name: "a", Up: true, Capacity: 100}, {Name: "b", Up: true, Capacity: 100}})
		own, nodes := NewWindowEstimator(time.Minute), NewWindowEstimator(time.Minute)
		nodes.SetRemote(0, 90)
		for range 20 {
			picked, _ := leastLoad{}.Pick(g, Query{N: 1, Rand: newRand(1), Now: t0, Load: own, Also: []*Estimator{nodes}}, nil)
			if len(picked) != 1 || picked[0] != 1 {
				t.Fatalf("picked %v, want b (a carries the other node's answers)", picked)
			}
		}
	})
}
