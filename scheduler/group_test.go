package scheduler

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestNew(t *testing.T) {
	cases := []struct {
		name    string
		policy  string
		params  Params
		wantErr error
	}{
		{"default-name", "", Params{}, nil},
		{"every-name", "weighted", Params{}, nil},
		{"explicit-watermarks", "nearest", Params{LowWatermark: 0.5, HighWatermark: 1.2, TierSlackKm: 500}, nil},
		{"zero-low", "geo-load", Params{HighWatermark: 0.8}, nil},
		{"unknown", "round-robin", Params{}, ErrUnknownPolicy},
		{"low-above-high", "geo-load", Params{LowWatermark: 0.9, HighWatermark: 0.7}, ErrParams},
		{"equal-watermarks", "geo-load", Params{LowWatermark: 0.8, HighWatermark: 0.8}, ErrParams},
		{"negative-low", "nearest", Params{LowWatermark: -0.1, HighWatermark: 0.8}, ErrParams},
		{"nan", "nearest", Params{LowWatermark: math.NaN(), HighWatermark: 0.8}, ErrParams},
		{"negative-slack", "geo-load", Params{TierSlackKm: -1}, ErrParams},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.policy, tc.params)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("New(%q, %+v) error = %v, want %v", tc.policy, tc.params, err, tc.wantErr)
			}
		})
	}
	for _, n := range Names() {
		if _, err := New(n, Params{}); err != nil {
			t.Errorf("New(%q): %v", n, err)
		}
	}
}

func TestBuckets(t *testing.T) {
	cases := []struct {
		name string
		loc  Location
		want Location
	}{
		{"cell-centre", at(50.11, 8.68, "de", "eu"), at(50.5, 8.5, "DE", "EU")},
		{"negative", at(-33.87, 151.21, "AU", "OC"), at(-33.5, 151.5, "AU", "OC")},
		{"west", at(40.71, -74.01, "US", "NA"), at(40.5, -74.5, "US", "NA")},
		{"north-pole", at(90, 0, "", ""), at(89.5, 0.5, "", "")},
		{"date-line", at(0, 180, "", ""), at(0.5, -179.5, "", "")},
		{"country-only", Location{Country: "FR", Continent: "EU"}, Location{Country: "FR", Continent: "EU"}},
		{"bad-codes", Location{Country: "FRA", Continent: "4"}, Location{}},
		{"nan-coords", Location{Lat: math.NaN(), HasCoords: true, Country: "FR"}, Location{Country: "FR"}},
		{"unknown", Location{}, Location{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := bucketCentre(bucketOf(tc.loc)); got != tc.want {
				t.Errorf("bucketCentre(bucketOf(%+v)) = %+v, want %+v", tc.loc, got, tc.want)
			}
		})
	}
}

// TestCandidateCacheBounded fills the memo past its bound and checks that
// it is cleared and the answers stay right.
func TestCandidateCacheBounded(t *testing.T) {
	g := NewGroup(regionMembers())
	limit := g.cache.limit
	for lat := -60; lat < 60; lat++ {
		for lon := -180; lon < 180; lon += 10 {
			cs := g.candidates(at(float64(lat), float64(lon), "", ""))
			if len(cs.idx) != 6 {
				t.Fatalf("%d candidates, want 6", len(cs.idx))
			}
			if n := len(g.cache.m); n > limit {
				t.Fatalf("cache holds %d buckets, bound %d", n, limit)
			}
		}
	}
	cs := g.candidates(at(48.8566, 2.3522, "FR", "EU"))
	if got := names(g, intsOf(cs.idx)); !slices.Equal(got[:2], []string{"ams", "fra"}) {
		t.Errorf("nearest to Paris = %v, want ams, fra first", got)
	}
}

func intsOf(s []int32) []int {
	out := make([]int, len(s))
	for i, v := range s {
		out[i] = int(v)
	}
	return out
}

// TestTiesNotByIndex checks that members at the same distance share the
// first place evenly under nearest (country-only locations).
func TestTiesNotByIndex(t *testing.T) {
	ms := []Member{
		{Name: "a", Up: true, Capacity: 100, Weight: 1, Loc: Location{Country: "DE"}},
		{Name: "b", Up: true, Capacity: 100, Weight: 1, Loc: Location{Country: "DE"}},
		{Name: "down", Up: false, Capacity: 100, Weight: 1, Loc: Location{Country: "DE"}},
		{Name: "c", Up: true, Capacity: 100, Weight: 1, Loc: Location{Country: "DE"}},
	}
	g := NewGroup(ms)
	for _, polName := range []string{"nearest", "least-load"} {
		t.Run(polName, func(t *testing.T) {
			pol := mustPolicy(t, polName, Params{})
			rng := newRand(8)
			counts := map[string]int{}
			const n = 30000
			for range n {
				got, _ := pol.Pick(g, Query{Client: Client{Loc: Location{Country: "DE"}}, N: 1, Rand: rng}, nil)
				counts[g.Member(got[0]).Name]++
			}
			for _, name := range []string{"a", "b", "c"} {
				if f := float64(counts[name]) / n; math.Abs(f-1.0/3) > 0.02 {
					t.Errorf("%s: share %.4f, want 1/3 ± 0.02", name, f)
				}
			}
		})
	}
}
