package scheduler

import (
	"slices"
	"testing"
	"time"
)

func TestFreshnessRuleJudge(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	h := func(n float64) time.Time { return now.Add(-time.Duration(n * float64(time.Hour))) }
	up := func(gens ...time.Time) []Content {
		var out []Content
		for _, g := range gens {
			out = append(out, Content{Generation: g, Answerable: true})
		}
		return out
	}
	rule := FreshnessRule{MaxLag: time.Hour, MaxSkew: 30 * time.Second}
	for _, tc := range []struct {
		name     string
		rule     FreshnessRule
		members  []Content
		lagging  []bool
		lags     []float64 // hours, -1: unknown
		failOpen bool
	}{
		{"no generations", rule, up(time.Time{}, time.Time{}), []bool{false, false}, []float64{-1, -1}, false},
		{"one lagging", rule, up(h(0), h(0.5), h(2)), []bool{false, false, true}, []float64{0, 0.5, 2}, false},
		{"all lagging: the freshest answer", rule,
			append(up(h(3), h(5), h(3)), Content{Generation: h(0)}), // the newest one is drained
			[]bool{false, true, false, false}, []float64{3, 5, 3, 0}, true},
		{"exactly at max_lag", rule, up(h(0), h(1)), []bool{false, false}, []float64{0, 1}, false},
		{"just past max_lag", rule, up(h(0), h(1).Add(-time.Nanosecond)), []bool{false, true}, []float64{0, 1}, false},
		{"comes back", rule, up(h(0), h(0.25)), []bool{false, false}, []float64{0, 0.25}, false},
		{"members without a generation", rule, up(h(0), time.Time{}, h(4)), []bool{false, false, true}, []float64{0, -1, 4}, false},
		{"only lagging and unknown: no fail open", rule,
			[]Content{{Generation: h(0)}, {Answerable: true}, {Generation: h(2), Answerable: true}},
			[]bool{false, false, true}, []float64{0, -1, 2}, false},
		{"off", FreshnessRule{MaxSkew: time.Second}, up(h(0), h(10)), []bool{false, false}, []float64{0, 10}, false},
		{"master", FreshnessRule{MaxLag: time.Hour, Master: h(0), MaxSkew: time.Second}, up(h(0.5), h(2)), []bool{false, true}, []float64{0.5, 2}, false},
		{"master ahead of all", FreshnessRule{MaxLag: time.Hour, Master: h(0), MaxSkew: time.Second}, up(h(2), h(3)), []bool{false, true}, []float64{2, 3}, true},
		{"generation from the future is not believed", rule, up(now.Add(time.Hour), h(2)), []bool{false, false}, []float64{-1, 0}, false},
		{"nobody answerable", rule, []Content{{Generation: h(0)}, {Generation: h(3)}}, []bool{false, true}, []float64{0, 3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, failOpen := tc.rule.Judge(now, tc.members, nil)
			var lagging []bool
			var lags []float64
			for _, f := range got {
				lagging = append(lagging, f.Lagging)
				l := -1.0
				if f.Known {
					l = float64(f.Lag.Round(time.Millisecond)) / float64(time.Hour)
				}
				lags = append(lags, l)
			}
			if !slices.Equal(lagging, tc.lagging) || failOpen != tc.failOpen {
				t.Errorf("lagging %v, fail open %v; want %v, %v", lagging, failOpen, tc.lagging, tc.failOpen)
			}
			if !slices.Equal(lags, tc.lags) {
				t.Errorf("lags (h) %v, want %v", lags, tc.lags)
			}
		})
	}
}

// TestFreshnessRuleReusesOut: Judge writes into out and clears what a
// previous call left there.
func TestFreshnessRuleReusesOut(t *testing.T) {
	now := time.Now()
	out := []Freshness{{Known: true, Lagging: true}, {Known: true, Lagging: true}}
	got, _ := FreshnessRule{MaxLag: time.Hour}.Judge(now, []Content{{}}, out)
	if len(got) != 1 || got[0] != (Freshness{}) {
		t.Errorf("got %+v", got)
	}
}

// TestFreshnessRuleComesBack: a member lagging leaves, and the report of
// its next sync brings it back with no other step.
func TestFreshnessRuleComesBack(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	rule := FreshnessRule{MaxLag: time.Hour}
	members := []Content{{Generation: now, Answerable: true}, {Generation: now.Add(-2 * time.Hour), Answerable: true}}
	for _, step := range []struct {
		name    string
		gen     time.Time
		lagging bool
	}{
		{"behind", now.Add(-2 * time.Hour), true},
		{"synced", now.Add(-time.Minute), false},
		{"behind again", now.Add(-90 * time.Minute), true},
	} {
		t.Run(step.name, func(t *testing.T) {
			members[1].Generation = step.gen
			got, _ := rule.Judge(now, members, nil)
			if got[1].Lagging != step.lagging {
				t.Errorf("lagging %v, want %v", got[1].Lagging, step.lagging)
			}
		})
	}
}

// FuzzJudge: whatever the generations, the verdicts keep the rule's
// promises: one a member, lags never negative, nobody lagging without
// max_lag or within it, and never every answerable member out (fail open
// keeps the freshest of them, all of one generation).
func FuzzJudge(f *testing.F) {
	f.Add(int64(3600), int64(0), []byte{0, 0, 1, 1, 0, 2, 1, 0, 200, 1})
	f.Add(int64(60), int64(7200), []byte{10, 0, 0, 1, 20, 1, 30, 1})
	f.Add(int64(0), int64(0), []byte{1, 1, 2, 0})
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, maxLag, master int64, in []byte) {
		r := FreshnessRule{MaxLag: time.Duration(maxLag%86400) * time.Second, MaxSkew: time.Minute}
		if master != 0 {
			r.Master = now.Add(-time.Duration(master%86400) * time.Second)
		}
		var ms []Content
		for i := 0; i+1 < len(in) && len(ms) < 64; i += 2 {
			c := Content{Answerable: in[i+1]&1 == 1}
			if in[i] != 0 { // minutes behind now; 255: ahead of the clock
				c.Generation = now.Add(-time.Duration(in[i]) * time.Minute)
				if in[i] == 255 {
					c.Generation = now.Add(time.Hour)
				}
			}
			ms = append(ms, c)
		}
		out, failOpen := r.Judge(now, ms, nil)
		if len(out) != len(ms) {
			t.Fatalf("%d verdicts for %d members", len(out), len(ms))
		}
		answerable, answered := 0, 0
		var kept []time.Time
		for i, v := range out {
			switch {
			case v.Lag < 0:
				t.Fatalf("member %d: lag %v", i, v.Lag)
			case v.Lagging && (r.MaxLag <= 0 || v.Lag <= r.MaxLag):
				t.Fatalf("member %d lagging by %v with max_lag %v", i, v.Lag, r.MaxLag)
			case v.Lagging && !v.Known:
				t.Fatalf("member %d lagging without a known generation", i)
			}
			if ms[i].Answerable {
				answerable++
				if !v.Lagging {
					answered++
					if v.Lag > r.MaxLag && r.MaxLag > 0 {
						kept = append(kept, ms[i].Generation)
					}
				}
			}
		}
		if answerable > 0 && answered == 0 {
			t.Fatalf("every one of %d answerable members is out: %+v", answerable, out)
		}
		for _, g := range kept {
			if !failOpen || !g.Equal(kept[0]) {
				t.Fatalf("kept lagging members of generations %v (fail open %t)", kept, failOpen)
			}
		}
	})
}
