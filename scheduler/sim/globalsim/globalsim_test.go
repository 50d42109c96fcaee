package globalsim

import (
	"reflect"
	"testing"
	"time"

	"github.com/transmirror/transmirror/scheduler/sim/workload"
)

// skewConfig is e2e TestSkew's scenario: four mirrors of equal capacity
// in one place, one member per answer, a TTL of 20 to 60 s, 280 requests
// per second (70% of the group's capacity), 20 resolvers.
func skewConfig(correct bool) Config {
	c := Config{Regions: []Region{{Name: "here", Lat: 50.1, Lon: 8.7}}, TTL: ttl(20, 60), Correct: correct,
		Warmup: 20 * time.Second, Bin: 10 * time.Second, Seed: 42}
	for _, n := range []string{"m1", "m2", "m3", "m4"} {
		c.Mirrors = append(c.Mirrors, Mirror{Name: n, Capacity: 1000})
	}
	return c
}

// skewWorkload is 80 s of Poisson requests at 280/s from 1,000 clients,
// heavy of them behind resolver 0.
func skewWorkload(t testing.TB, heavy float64) Workload {
	st, err := workload.Synthetic{Seed: 7, Requests: 280 * 80, Objects: 100, Clients: 1000, Rate: 280}.New()
	if err != nil {
		t.Fatal(err)
	}
	return Workload{Requests: st.Requests(), World: SkewedWorld(1000, 20, heavy)}
}

func TestSkew(t *testing.T) {
	tests := []struct {
		name     string
		correct  bool
		heavy    float64
		atMost   float64 // bound of Busiest over the window (0: none)
		worstBin float64 // bound of WorstBin (0: none)
		meanBin  float64 // MeanBin is at least this (the scenario is skewed)
	}{
		{"skew, correction off", false, 0.5, 0, 0, 1.6},
		{"skew, correction on", true, 0.5, 1.05, 1.25, 0},
		{"no skew, correction on", true, 0.05, 1.05, 1.25, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Run(skewConfig(tt.correct), skewWorkload(t, tt.heavy))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("served %v, arrived %v, busiest %.3f (arrived %.3f), bins mean %.3f worst %.3f, %d redirected of %d, %d queries",
				r.Served, r.Arrived, r.Busiest, r.ArrivedBusiest, r.MeanBin, r.WorstBin, r.Redirected, r.Requests, r.Queries)
			if tt.atMost > 0 && r.Busiest > tt.atMost {
				t.Errorf("busiest %.3f× its fair share, want ≤ %.2f", r.Busiest, tt.atMost)
			}
			if r.MeanBin < tt.meanBin {
				t.Errorf("bins mean %.3f, want ≥ %.2f: the scenario is not skewed", r.MeanBin, tt.meanBin)
			}
			if tt.worstBin > 0 && r.WorstBin > tt.worstBin {
				t.Errorf("worst bin %.3f, want ≤ %.2f", r.WorstBin, tt.worstBin)
			}
			if !tt.correct && r.Redirected != 0 {
				t.Errorf("%d redirects without correction", r.Redirected)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	a, err := Run(skewConfig(true), skewWorkload(t, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(skewConfig(true), skewWorkload(t, 0.5))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// TestPartialTrees: a mirror that lacks half of the objects answers 404
// for them without content indexes, about half of what DNS sends it;
// with them and the correction on every such request is rescued to a
// sibling that holds the file and none is a 404. With the correction off
// nothing is redirected, a rescue neither (the live rule: redirect
// enabled false sends no 302 at all).
func TestPartialTrees(t *testing.T) {
	tests := []struct {
		name    string
		index   bool
		correct bool
	}{
		{"no index, correction off", false, false},
		{"no index, correction on", false, true},
		{"index, correction off", true, false},
		{"index, correction on", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := skewConfig(tt.correct)
			c.ContentIndex = tt.index
			c.Mirrors[0].Missing = 0.5
			r, err := Run(c, skewWorkload(t, 0.05))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("served %v, arrived %v, %d not found, %d redirected of %d", r.Served, r.Arrived, r.NotFound, r.Redirected, r.Requests)
			switch {
			case tt.index && tt.correct && r.NotFound != 0:
				t.Errorf("%d requests ended in a 404 with content indexes", r.NotFound)
			case !tt.correct && r.Redirected != 0:
				t.Errorf("%d redirects with the correction off", r.Redirected)
			case !tt.index && !tt.correct && (float64(r.NotFound) < 0.4*float64(r.Arrived[0]) || float64(r.NotFound) > 0.6*float64(r.Arrived[0])):
				t.Errorf("%d 404s of the %d requests DNS sent the mirror that lacks half of the files, want about half", r.NotFound, r.Arrived[0])
			case !(tt.index && tt.correct) && r.NotFound == 0:
				t.Error("no 404 without content indexes or without the correction")
			}
		})
	}
}
