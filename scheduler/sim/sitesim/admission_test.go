package sitesim

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/transmirror/transmirror/scheduler/sim/backend"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
	"github.com/transmirror/transmirror/scheduler/site"
)

// distinct is n requests of size bytes, each for an object of its own.
func distinct(n int, size uint64) Workload {
	keys := make([]string, n)
	reqs := make([]workload.Request, n)
	for i := range n {
		keys[i] = fmt.Sprintf("/k%d", i)
		reqs[i] = workload.Request{Object: uint32(i), Size: size}
	}
	return Workload{Requests: slices.Values(reqs), Objects: keys}
}

// flat is n back ends without a cache whose every request costs 1 ms of
// CPU (a miss costs no disk: no seek, no disk time per KiB), behind a
// front end that costs nothing.
func flat(policy string, n int) Config {
	return Config{Policy: policy, Seed: 1, Backends: n, Backend: backend.Config{Costs: backend.Costs{PerRequest: time.Millisecond}},
		Outstanding: 4, Frontend: &FrontendCosts{}, Bin: time.Millisecond}
}

// TestAdmission: four requests sent at once to two back ends that take
// 1 ms each. Without a bound they complete two at 1 ms and two at 2 ms;
// a bound of 1 serialises them (1, 2, 3 and 4 ms); LARD's default
// S = (2−1)·t_high + t_low − 1 = 2 with t_low 1 and t_high 2 holds two
// until the first two complete. A request that waits gets the slot of
// the first completion and the least loaded back end then.
func TestAdmission(t *testing.T) {
	for _, tt := range []struct {
		name        string
		policy      string
		params      site.Params
		admission   int
		wantLimit   int
		wantQueued  int
		wantElapsed time.Duration
		wantBins    []int // completions in (0, 1 ms], (1, 2 ms], ...
		spread      bool  // two on each back end (serialised, lard's ties go by its random source)
	}{
		{"none", site.WRR, site.Params{}, -1, 0, 0, 2 * time.Millisecond, []int{2, 2}, true},
		{"wrr has none by default", site.WRR, site.Params{}, 0, 0, 0, 2 * time.Millisecond, []int{2, 2}, true},
		{"1 serialises", site.WRR, site.Params{}, 1, 1, 3, 4 * time.Millisecond, []int{1, 1, 1, 1}, true},
		{"3 holds one, which takes the first slot free", site.WRR, site.Params{}, 3, 3, 1, 2 * time.Millisecond, []int{2, 2}, true},
		{"lard's S by default", site.LARD, site.Params{TLow: 1, THigh: 2}, 0, 2, 2, 2 * time.Millisecond, []int{2, 2}, true},
		{"lard's S over written", site.LARD, site.Params{TLow: 1, THigh: 2}, 1, 1, 3, 4 * time.Millisecond, []int{1, 1, 1, 1}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := flat(tt.policy, 2)
			c.Params, c.Admission = tt.params, tt.admission
			res, err := Run(c, distinct(4, 0))
			if err != nil {
				t.Fatal(err)
			}
			var bins []int
			for _, b := range res.Bins {
				bins = append(bins, b.Requests)
			}
			if res.Admission != tt.wantLimit || res.Queued != tt.wantQueued || res.Elapsed != tt.wantElapsed ||
				!slices.Equal(bins, tt.wantBins) {
				t.Errorf("limit %d, %d queued, elapsed %v, bins %v; want %d, %d, %v, %v",
					res.Admission, res.Queued, res.Elapsed, bins, tt.wantLimit, tt.wantQueued, tt.wantElapsed, tt.wantBins)
			}
			if tt.spread && !slices.Equal(res.PerBackend, []int{2, 2}) {
				t.Errorf("per back end %v, want [2 2]", res.PerBackend)
			}
		})
	}
}
