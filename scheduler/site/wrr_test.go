package site

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestWRR(t *testing.T) {
	tests := []struct {
		name    string
		weights []float64
		down    []int
		picks   int
		want    string // names' last letters, in order
	}{
		{name: "nginx 5,1,1", weights: []float64{5, 1, 1}, picks: 14, want: "aabacaa" + "aabacaa"},
		{name: "equal weights rotate", weights: []float64{1, 1, 1}, picks: 6, want: "abcabc"},
		{name: "zero weight counts as one", weights: []float64{0, 1}, picks: 4, want: "abab"},
		{name: "3,2 spread", weights: []float64{3, 2}, picks: 10, want: "ababa" + "ababa"},
		{name: "down skipped", weights: []float64{5, 1, 1}, down: []int{0}, picks: 4, want: "bcbc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := make([]Backend, len(tt.weights))
			for i, w := range tt.weights {
				bs[i] = Backend{Name: string(rune('a' + i)), Weight: w, Up: true}
			}
			for _, d := range tt.down {
				bs[d].Up = false
			}
			pol := mustNew(WRR, Params{}, 1)
			var got strings.Builder
			for range tt.picks {
				i, err := pol.Pick(Request{}, bs, t0)
				if err != nil {
					t.Fatal(err)
				}
				got.WriteString(bs[i].Name)
			}
			if got.String() != tt.want {
				t.Errorf("sequence %s, want %s", got.String(), tt.want)
			}
		})
	}
}

func TestWRRReorder(t *testing.T) {
	// The state follows names, not positions.
	bs := []Backend{{Name: "a", Weight: 2, Up: true}, {Name: "b", Weight: 1, Up: true}}
	pol := mustNew(WRR, Params{}, 1)
	var got strings.Builder
	for k := range 6 {
		if k == 3 {
			bs[0], bs[1] = bs[1], bs[0]
		}
		i, _ := pol.Pick(Request{}, bs, t0)
		got.WriteString(bs[i].Name)
	}
	if got.String() != "abaaba" {
		t.Errorf("sequence %s, want abaaba", got.String())
	}
}

func TestLeastConn(t *testing.T) {
	tests := []struct {
		name    string
		active  []int
		weights []float64
		down    []int
		want    []int // acceptable picks; each must come up when there are several
	}{
		{name: "fewest active", active: []int{3, 1, 2}, want: []int{1}},
		{name: "per weight", active: []int{4, 3, 2}, weights: []float64{4, 1, 1}, want: []int{0}},
		{name: "ties at random, not first", active: []int{1, 5, 1, 1}, want: []int{0, 2, 3}},
		{name: "equal ratios tie", active: []int{2, 1, 9}, weights: []float64{2, 1, 1}, want: []int{0, 1}},
		{name: "down never picked", active: []int{0, 5, 6}, down: []int{0}, want: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bs := backends(len(tt.active), 0)
			for i, a := range tt.active {
				bs[i].Active = a
				if tt.weights != nil {
					bs[i].Weight = tt.weights[i]
				}
			}
			for _, d := range tt.down {
				bs[d].Up = false
			}
			pol, _ := New(LeastConn, Params{}, rand.New(rand.NewPCG(3, 4)))
			seen := map[int]int{}
			const n = 3000
			for range n {
				i, err := pol.Pick(Request{}, bs, t0)
				if err != nil {
					t.Fatal(err)
				}
				seen[i]++
			}
			for i := range seen {
				ok := false
				for _, w := range tt.want {
					ok = ok || i == w
				}
				if !ok {
					t.Errorf("picked %d, want one of %v", i, tt.want)
				}
			}
			for _, w := range tt.want {
				share := float64(seen[w]) / n
				if want := 1 / float64(len(tt.want)); share < want*0.9 || share > want*1.1 {
					t.Errorf("back end %d got %.3f of the picks, want about %.3f", w, share, want)
				}
			}
		})
	}
}
