package site

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestCHBLBound checks the bound on random sequences. With completions
// interleaved the average can fall under a back end's earlier share, and
// no policy can take back a request, so the check is then on the picked
// back end, at every pick; with picks only, it is on every back end after
// every pick.
func TestCHBLBound(t *testing.T) {
	tests := []struct {
		name    string
		c       float64
		weights []float64
		keys    int
		dones   bool
		flips   bool
	}{
		{name: "c=1.25, 4 back ends, hot keys, picks only", c: 1.25, weights: []float64{1, 1, 1, 1}, keys: 3},
		{name: "c=1.25, 4 back ends, hot keys", c: 1.25, weights: []float64{1, 1, 1, 1}, keys: 3, dones: true},
		{name: "c=1.25, 7 back ends, many keys, picks only", c: 1.25, weights: []float64{1, 1, 1, 1, 1, 1, 1}, keys: 1000},
		{name: "c=1.25, 7 back ends, many keys", c: 1.25, weights: []float64{1, 1, 1, 1, 1, 1, 1}, keys: 1000, dones: true},
		{name: "c=1, one key, picks only", c: 1, weights: []float64{1, 1, 1, 1, 1}, keys: 1},
		{name: "c=1, one key", c: 1, weights: []float64{1, 1, 1, 1, 1}, keys: 1, dones: true},
		{name: "c=2, health flips", c: 2, weights: []float64{1, 1, 1, 1}, keys: 20, dones: true, flips: true},
		{name: "c=1.5, weighted, picks only", c: 1.5, weights: []float64{1, 2, 3}, keys: 5},
		{name: "c=1.5, weighted", c: 1.5, weights: []float64{1, 2, 3}, keys: 5, dones: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, 22))
			pol := mustNew(CHBL, Params{BalanceFactor: tt.c}, 1)
			bs := backends(len(tt.weights), 0)
			for i, w := range tt.weights {
				bs[i].Weight = w
			}
			type flight struct{ key, backend string }
			var inFlight []flight
			steps := 20_000
			if !tt.dones {
				steps = 2_000
			}
			for step := range steps {
				if tt.flips && step%97 == 0 {
					j := rng.IntN(len(bs))
					bs[j].Up = !bs[j].Up
				}
				if tt.dones && len(inFlight) > 0 && rng.IntN(5) < 2 {
					k := rng.IntN(len(inFlight))
					f := inFlight[k]
					inFlight[k] = inFlight[len(inFlight)-1]
					inFlight = inFlight[:len(inFlight)-1]
					bs[indexOf(bs, f.backend, -1)].Active--
					pol.Done(Request{Key: f.key}, f.backend, t0)
					continue
				}
				key := fmt.Sprint("/k", rng.IntN(tt.keys))
				i, err := pol.Pick(Request{Key: key}, bs, t0)
				if err != nil {
					continue // all down for a moment
				}
				bs[i].Active++
				inFlight = append(inFlight, flight{key, bs[i].Name})
				// The bound counts the new request: total is after it.
				total, upW := 0, 0.0
				for j := range bs {
					if bs[j].Up {
						total += bs[j].Active
						upW += bs[j].Weight
					}
				}
				for j := range bs {
					if !bs[j].Up || (tt.dones && j != i) {
						continue
					}
					bound := ceilRatio(tt.c*float64(total)*bs[j].Weight, upW)
					if bs[j].Active > bound {
						t.Fatalf("step %d: %s has %d in flight, bound %d (total %d)", step, bs[j].Name, bs[j].Active, bound, total)
					}
				}
			}
		})
	}
}

// ceilRatio is ceil(a/b) for the exact small values of the test, without
// trusting float division to land on an integer.
func ceilRatio(a, b float64) int {
	n := int(a / b)
	for float64(n)*b < a-1e-9 {
		n++
	}
	for n > 0 && float64(n-1)*b >= a-1e-9 {
		n--
	}
	return n
}

func TestCHBL(t *testing.T) {
	t.Run("same key same back end while under the bound", func(t *testing.T) {
		pol := mustNew(CHBL, Params{}, 1)
		bs := backends(8, 0)
		for k := range 100 {
			key := fmt.Sprint("/k", k)
			a, _ := pol.Pick(Request{Key: key}, bs, t0)
			b, _ := pol.Pick(Request{Key: key}, bs, t0)
			if a != b {
				t.Fatalf("%s went to %d then %d", key, a, b)
			}
		}
	})
	t.Run("full home walks on; keys spread over all", func(t *testing.T) {
		pol := mustNew(CHBL, Params{}, 1)
		bs := backends(4, 0)
		home, _ := pol.Pick(Request{Key: "/hot"}, bs, t0)
		seen := map[int]bool{}
		for range 40 {
			i, _ := pol.Pick(Request{Key: "/hot"}, bs, t0)
			bs[i].Active++
			seen[i] = true
		}
		if len(seen) != 4 || !seen[home] {
			t.Errorf("a hot key used %v, want all 4 with home %d", seen, home)
		}
		// 40 in flight on 4: ceil(1.25·41/4) = 13 at most each.
		for _, b := range bs {
			if b.Active > 13 {
				t.Errorf("%s has %d", b.Name, b.Active)
			}
		}
	})
	t.Run("a failure moves only that back end's keys", func(t *testing.T) {
		pol := mustNew(CHBL, Params{}, 1)
		bs := backends(5, 0)
		before := map[string]int{}
		for k := range 2000 {
			key := fmt.Sprint("/k", k)
			before[key], _ = pol.Pick(Request{Key: key}, bs, t0)
		}
		bs[3].Up = false
		for key, b := range before {
			after, _ := pol.Pick(Request{Key: key}, bs, t0)
			if b != 3 && after != b {
				t.Fatalf("%s moved from %d to %d", key, b, after)
			}
		}
	})
	t.Run("weights set the share of keys", func(t *testing.T) {
		pol := mustNew(CHBL, Params{}, 1)
		bs := backends(2, 0)
		bs[1].Weight = 3
		n := 0
		for k := range 10_000 {
			if i, _ := pol.Pick(Request{Key: fmt.Sprint("/k", k)}, bs, t0); i == 1 {
				n++
			}
		}
		if share := float64(n) / 10_000; share < 0.7 || share > 0.8 {
			t.Errorf("weight 3 of 4 got %.3f of the keys", share)
		}
	})
}
