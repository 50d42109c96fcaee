package scheduler

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

// TestShares draws 100,000 answers (fixed seed) and checks every member's
// share of first places against the intended share within 2% relative:
// |got − want| ≤ 0.02 × want. Members that should get nothing must get
// nothing.
func TestShares(t *testing.T) {
	paris := at(48.8566, 2.3522, "FR", "EU")
	cases := []struct {
		name    string
		policy  string
		members []Member
		client  Location
		want    map[string]float64
	}{
		{
			name:   "weighted",
			policy: "weighted",
			members: []Member{
				{Name: "w1", Up: true, Weight: 1},
				{Name: "w2", Up: true, Weight: 2},
				{Name: "down", Up: false, Weight: 5},
				{Name: "w3", Up: true, Weight: 3},
				{Name: "w4", Up: true, Weight: 4},
				{Name: "zero", Up: true, Weight: 0},
			},
			want: map[string]float64{"w1": 0.1, "w2": 0.2, "w3": 0.3, "w4": 0.4},
		},
		{
			name:   "weighted-equal",
			policy: "weighted",
			members: []Member{
				{Name: "a", Up: true, Weight: 1},
				{Name: "b", Up: true, Weight: 1},
			},
			want: map[string]float64{"a": 0.5, "b": 0.5},
		},
		{
			// Low 0.7, high 0.9. Weights C·W·(high − u)·keep(u):
			// fra 100·0.7·1 = 70, ams 200·0.4·1 = 80,
			// par 400·0.15·0.75 = 45 (between the watermarks),
			// bru 100·0·0 = 0 (full); nyc and tyo are outside the tier.
			name:   "geo-load",
			policy: "geo-load",
			client: paris,
			members: []Member{
				{Name: "fra", Up: true, Capacity: 100, Load: 20, Weight: 1, Loc: at(50.1109, 8.6821, "DE", "EU")},
				{Name: "ams", Up: true, Capacity: 200, Load: 100, Weight: 1, Loc: at(52.3676, 4.9041, "NL", "EU")},
				{Name: "par", Up: true, Capacity: 400, Load: 300, Weight: 1, Loc: at(48.8566, 2.3522, "FR", "EU")},
				{Name: "bru", Up: true, Capacity: 100, Load: 95, Weight: 1, Loc: at(50.8503, 4.3517, "BE", "EU")},
				{Name: "nyc", Up: true, Capacity: 100, Weight: 1, Loc: at(40.7128, -74.0060, "US", "NA")},
				{Name: "tyo", Up: true, Capacity: 100, Weight: 1, Loc: at(35.6762, 139.6503, "JP", "AS")},
			},
			want: map[string]float64{"fra": 70.0 / 195, "ams": 80.0 / 195, "par": 45.0 / 195},
		},
		{
			// Weights multiply: fra 100·3·0.9 = 270, ams 100·1·0.9 = 90.
			name:   "geo-load-static-weights",
			policy: "geo-load",
			client: paris,
			members: []Member{
				{Name: "fra", Up: true, Capacity: 100, Weight: 3, Loc: at(50.1109, 8.6821, "DE", "EU")},
				{Name: "ams", Up: true, Capacity: 100, Weight: 1, Loc: at(52.3676, 4.9041, "NL", "EU")},
				{Name: "nyc", Up: true, Capacity: 100, Weight: 1, Loc: at(40.7128, -74.0060, "US", "NA")},
			},
			want: map[string]float64{"fra": 0.75, "ams": 0.25},
		},
		{
			// No coordinates: country-level fallback puts both German
			// members at distance 0, the French one at 2000 km.
			name:   "geo-load-country-only",
			policy: "geo-load",
			client: Location{Country: "DE", Continent: "EU"},
			members: []Member{
				{Name: "ber", Up: true, Capacity: 100, Weight: 1, Loc: Location{Country: "DE", Continent: "EU"}},
				{Name: "muc", Up: true, Capacity: 300, Weight: 1, Loc: Location{Country: "DE", Continent: "EU"}},
				{Name: "par", Up: true, Capacity: 100, Weight: 1, Loc: Location{Country: "FR", Continent: "EU"}},
			},
			want: map[string]float64{"ber": 0.25, "muc": 0.75},
		},
	}
	const draws = 100000
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pol := mustPolicy(t, tc.policy, Params{LowWatermark: 0.7, HighWatermark: 0.9})
			g := NewGroup(tc.members)
			rng := newRand(7)
			now := time.Unix(1_700_000_000, 0)
			counts := map[string]int{}
			buf := make([]int, 0, 2)
			for range draws {
				got, _ := pol.Pick(g, Query{Client: Client{Loc: tc.client}, N: 2, Rand: rng, Now: now}, buf[:0])
				if len(got) != 2 || got[0] == got[1] {
					t.Fatalf("Pick(N=2) = %v, want two distinct members", names(g, got))
				}
				counts[g.Member(got[0]).Name]++
			}
			for _, m := range tc.members {
				want := tc.want[m.Name]
				got := float64(counts[m.Name]) / draws
				t.Logf("%s: share %.4f, want %.4f", m.Name, got, want)
				if math.Abs(got-want) > 0.02*want {
					t.Errorf("%s: share %.4f, want %.4f ± 2%% relative", m.Name, got, want)
				}
			}
		})
	}
}

// TestWeightedWithoutReplacement: weighted's second pick is in
// proportion to the weights of the members left (P(j second) =
// Σᵢ wᵢ/W · wⱼ/(W − wᵢ)), within 2% relative over 100,000 draws; once the
// members with a weight are all picked, those of weight 0 follow
// (uniformly), and no member that is down comes while one is up. With
// few members a pick scans them; with more than weightedScan it searches
// the running sums.
func TestWeightedWithoutReplacement(t *testing.T) {
	for _, zeros := range []int{2, weightedScan - 3} { // 6 and 17 up
		t.Run(fmt.Sprint(zeros+4, " up"), func(t *testing.T) {
			ms := []Member{
				{Name: "w1", Up: true, Weight: 1},
				{Name: "w2", Up: true, Weight: 2},
				{Name: "down", Up: false, Weight: 5},
				{Name: "w3", Up: true, Weight: 3},
				{Name: "w4", Up: true, Weight: 4},
			}
			for i := range zeros {
				ms = append(ms, Member{Name: fmt.Sprint("zero", i), Up: true})
			}
			second, fifth := weightedPlaces(t, NewGroup(ms))
			const total = 10.0
			for _, j := range []float64{1, 2, 3, 4} {
				want := 0.0
				for _, i := range []float64{1, 2, 3, 4} {
					if i != j {
						want += i / total * j / (total - i)
					}
				}
				name := fmt.Sprint("w", j)
				if got := second[name]; math.Abs(got-want) > 0.02*want {
					t.Errorf("%s second: share %.4f, want %.4f ± 2%% relative", name, got, want)
				}
			}
			for i := range zeros {
				name := fmt.Sprint("zero", i)
				if got, want := fifth[name], 1/float64(zeros); math.Abs(got-want) > 0.1*want {
					t.Errorf("%s fifth: share %.4f, want %.4f ± 10%% relative", name, got, want)
				}
			}
		})
	}
}

// weightedPlaces draws 100,000 weighted answers of 6 members of g and
// returns the shares of the second and the fifth places by name, after
// checking each answer: up members only, each once, those with a weight
// first.
func weightedPlaces(t *testing.T, g *Group) (second, fifth map[string]float64) {
	t.Helper()
	pol := mustPolicy(t, "weighted", Params{})
	rng := newRand(5)
	const draws = 100000
	second, fifth = map[string]float64{}, map[string]float64{}
	buf := make([]int, 0, 6)
	for range draws {
		got, _ := pol.Pick(g, Query{N: 6, Rand: rng}, buf[:0])
		if len(got) != 6 {
			t.Fatalf("Pick(N=6) = %v, want 6 members", names(g, got))
		}
		for k, i := range got {
			if slices.Contains(got[k+1:], i) {
				t.Fatalf("Pick = %v: %s twice", names(g, got), g.Member(i).Name)
			}
			if w := g.Member(i).Weight; !g.Member(i).Up || (k < 4) != (w > 0) {
				t.Fatalf("Pick = %v: weight %g at place %d", names(g, got), w, k+1)
			}
		}
		second[g.Member(got[1]).Name] += 1.0 / draws
		fifth[g.Member(got[4]).Name] += 1.0 / draws
	}
	return second, fifth
}
