package scheduler

import (
	"slices"
	"testing"
	"time"
)

// TestRegions checks nearest and geo-load on 3 regions × 2 members: clients
// stay home while home is below its watermark and spill to the next nearest
// region when both home members are full.
func TestRegions(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	cases := []struct {
		name string
		// homeUtil is the utilization given to both members of the
		// client's home region (the others are idle).
		homeUtil float64
		// viaEstimator sets it through Estimator reports instead of
		// Member.Load.
		viaEstimator bool
		// byBandwidth gives it as bytes per second over the members'
		// bandwidth, with a load of a tenth of their capacity.
		byBandwidth bool
		spill       bool // want the spill region rather than home
	}{
		{name: "idle", homeUtil: 0},
		{name: "below-low", homeUtil: 0.5},
		{name: "home-full", homeUtil: 1.0, spill: true},
		{name: "home-full-reported", homeUtil: 1.0, viaEstimator: true, spill: true},
		{name: "home-over-high", homeUtil: 0.95, spill: true},
		{name: "bandwidth-below-low", homeUtil: 0.5, byBandwidth: true},
		{name: "bandwidth-full", homeUtil: 1.0, byBandwidth: true, spill: true},
		{name: "bandwidth-full-reported", homeUtil: 1.0, byBandwidth: true, viaEstimator: true, spill: true},
	}
	for _, polName := range []string{"nearest", "geo-load"} {
		pol := mustPolicy(t, polName, Params{})
		for _, tc := range cases {
			for _, cl := range regionClients() {
				t.Run(polName+"/"+tc.name+"/"+cl.name, func(t *testing.T) {
					ms := regionMembers()
					est := NewEstimator(time.Minute)
					const bandwidth = 125e6 // 1Gbit/s
					for i := range ms {
						ms[i].Bandwidth = bandwidth
						if regionOf(ms[i].Name) != cl.home {
							continue
						}
						u := Usage{Load: tc.homeUtil * ms[i].Capacity}
						if tc.byBandwidth {
							u = Usage{Load: 0.1 * ms[i].Capacity, BytesPerSecond: tc.homeUtil * bandwidth}
						}
						if tc.viaEstimator {
							est.Report(i, u, now)
						} else {
							ms[i].Load, ms[i].BytesPerSecond = u.Load, u.BytesPerSecond
						}
					}
					g := NewGroup(ms)
					want := []string{cl.home}
					switch {
					case tc.spill && polName == "geo-load":
						want = cl.spillTier
					case tc.spill:
						want = []string{cl.spill}
					}
					rng := newRand(1)
					buf := make([]int, 0, 8)
					for range 200 {
						q := Query{Client: Client{Loc: cl.loc}, N: 1, Rand: rng, Now: now, Load: est}
						got, open := pol.Pick(g, q, buf[:0])
						if open || len(got) != 1 {
							t.Fatalf("Pick = %v, failOpen %v; want one member", names(g, got), open)
						}
						if r := regionOf(g.Member(got[0]).Name); !slices.Contains(want, r) {
							t.Fatalf("Pick = %v in %s, want a member in %v", names(g, got), r, want)
						}
					}
					if tc.spill {
						return
					}
					// Two members: both home ones.
					q := Query{Client: Client{Loc: cl.loc}, N: 2, Rand: rng, Now: now, Load: est}
					got, _ := pol.Pick(g, q, buf[:0])
					for _, n := range names(g, got) {
						if regionOf(n) != cl.home || len(got) != 2 {
							t.Fatalf("Pick(N=2) = %v, want both %s members", names(g, got), cl.home)
						}
					}
				})
			}
		}
	}
}

// TestDownAndFailOpen checks every policy: a down member never appears, and
// with every member down the answer is drawn from all of them and says so.
func TestDownAndFailOpen(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	for _, polName := range Names() {
		pol := mustPolicy(t, polName, Params{})
		for _, cl := range regionClients() {
			t.Run(polName+"/one-down/"+cl.name, func(t *testing.T) {
				ms := regionMembers()
				// Take down the member nearest to the client.
				down := 0
				for i := range ms {
					if DistanceKm(cl.loc, ms[i].Loc) < DistanceKm(cl.loc, ms[down].Loc) {
						down = i
					}
				}
				ms[down].Up = false
				g := NewGroup(ms)
				rng := newRand(2)
				for k := range 100 {
					q := Query{Client: Client{Loc: cl.loc, Key: uint64(k)}, N: 6, Rand: rng, Now: now}
					got, open := pol.Pick(g, q, nil)
					if open || len(got) != 5 || slices.Contains(got, down) {
						t.Fatalf("Pick(N=6) = %v, failOpen %v; want the 5 members but %s", names(g, got), open, ms[down].Name)
					}
					q.N = 1
					got, _ = pol.Pick(g, q, nil)
					if polName == "nearest" || polName == "geo-load" {
						if r := regionOf(g.Member(got[0]).Name); r != cl.home {
							t.Fatalf("Pick = %v in %s, want the other member in %s", names(g, got), r, cl.home)
						}
					}
				}
			})
			t.Run(polName+"/all-down/"+cl.name, func(t *testing.T) {
				ms := regionMembers()
				for i := range ms {
					ms[i].Up = false
					ms[i].Load = 2 * ms[i].Capacity // stale reports are ignored
				}
				g := NewGroup(ms)
				if !g.FailOpen() {
					t.Fatal("FailOpen() = false with every member down")
				}
				rng := newRand(3)
				q := Query{Client: Client{Loc: cl.loc, Key: 42}, N: 6, Rand: rng, Now: now, Load: NewEstimator(0)}
				got, open := pol.Pick(g, q, nil)
				sorted := slices.Sorted(slices.Values(got))
				if !open || !slices.Equal(sorted, []int{0, 1, 2, 3, 4, 5}) {
					t.Fatalf("Pick(N=6) = %v, failOpen %v; want all 6 members and failOpen", names(g, got), open)
				}
				q.N = 1
				if got, open := pol.Pick(g, q, nil); !open || len(got) != 1 {
					t.Fatalf("Pick(N=1) = %v, failOpen %v; want one member and failOpen", names(g, got), open)
				}
				if polName == "nearest" || polName == "geo-load" {
					got, _ := pol.Pick(g, q, nil)
					if r := regionOf(g.Member(got[0]).Name); r != cl.home {
						t.Fatalf("failing open Pick = %v in %s, want %s", names(g, got), r, cl.home)
					}
				}
			})
		}
	}
}

// TestNearestTaper checks that nearest sheds a member between the
// watermarks progressively: at the midpoint it keeps about half.
func TestNearestTaper(t *testing.T) {
	paris := regionClients()[0].loc
	cases := []struct {
		name string
		util float64
		want float64 // share of answers that still name ams, the nearest
	}{
		{"at-low", 0.7, 1},
		{"quarter", 0.75, 0.75},
		{"midpoint", 0.8, 0.5},
		{"three-quarters", 0.85, 0.25},
		{"at-high", 0.9, 0},
	}
	pol := mustPolicy(t, "nearest", Params{LowWatermark: 0.7, HighWatermark: 0.9})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := regionMembers()
			ms[1].Load = tc.util * ms[1].Capacity // ams
			g := NewGroup(ms)
			rng := newRand(4)
			const n = 10000
			hits := 0
			for range n {
				got, _ := pol.Pick(g, Query{Client: Client{Loc: paris}, N: 1, Rand: rng}, nil)
				if g.Member(got[0]).Name == "ams" {
					hits++
				} else if g.Member(got[0]).Name != "fra" {
					t.Fatalf("Pick = %v, want ams or fra", names(g, got))
				}
			}
			if got := float64(hits) / n; got < tc.want-0.02 || got > tc.want+0.02 {
				t.Errorf("ams share = %.4f, want %.2f ± 0.02", got, tc.want)
			}
		})
	}
}
