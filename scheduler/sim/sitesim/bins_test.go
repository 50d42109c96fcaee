package sitesim

import (
	"slices"
	"testing"
	"time"

	"github.com/transmirror/transmirror/scheduler/site"
)

// TestBinsAddUp: the bins hold every counted request once, by back
// end and hit, and tile the measured time.
func TestBinsAddUp(t *testing.T) {
	w, ws := synthetic(t, 30_000)
	c := site4(site.LARD, ws)
	c.Bin = 100 * time.Millisecond
	res, err := Run(c, w)
	if err != nil {
		t.Fatal(err)
	}
	if want := int((res.Elapsed + c.Bin - 1) / c.Bin); len(res.Bins) != want {
		t.Fatalf("%d bins over %v, want %d", len(res.Bins), res.Elapsed, want)
	}
	n, hits, per := 0, 0.0, make([]int, c.Backends)
	for i, b := range res.Bins {
		if b.Start != time.Duration(i)*c.Bin {
			t.Errorf("bin %d starts at %v, want %v", i, b.Start, time.Duration(i)*c.Bin)
		}
		n += b.Requests
		hits += b.HitRatio * float64(b.Requests)
		for j, k := range b.PerBackend {
			per[j] += k
		}
	}
	if n != res.Requests || !slices.Equal(per, res.PerBackend) || !near(hits, res.HitRatio*float64(res.Requests), 1e-9) {
		t.Errorf("bins: %d requests, %v per back end, %.1f hits; want %d, %v, %.1f",
			n, per, hits, res.Requests, res.PerBackend, res.HitRatio*float64(res.Requests))
	}
}
