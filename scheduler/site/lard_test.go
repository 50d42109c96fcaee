package site

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestLARD(t *testing.T) {
	tests := []struct {
		name     string
		others   []int // Active of the three other back ends
		active   int   // Active of the assigned back end at the last pick
		wantMove bool
	}{
		{name: "at T_high stays", others: []int{0, 0, 0}, active: 65},
		{name: "over T_high with one under T_low moves", others: []int{30, 24, 30}, active: 66, wantMove: true},
		{name: "over T_high with none under T_low stays", others: []int{25, 25, 25}, active: 66},
		{name: "just under 2·T_high stays", others: []int{100, 100, 100}, active: 129},
		{name: "at 2·T_high moves anyway", others: []int{110, 100, 120}, active: 130, wantMove: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := mustNew(LARD, Params{}, 2)
			bs := backends(4, 0)
			first, err := pol.Pick(Request{Key: "/a"}, bs, t0)
			if err != nil {
				t.Fatal(err)
			}
			// Repeated requests stick while the load rises to T_high,
			// however idle the others are.
			for a := range 66 {
				bs[first].Active = a
				if i, _ := pol.Pick(Request{Key: "/a"}, bs, t0); i != first {
					t.Fatalf("at load %d moved from %d to %d", a, first, i)
				}
			}
			k := 0
			least, leastActive := -1, 1<<30
			for i := range bs {
				if i == first {
					continue
				}
				bs[i].Active = tt.others[k]
				if tt.others[k] < leastActive {
					least, leastActive = i, tt.others[k]
				}
				k++
			}
			bs[first].Active = tt.active
			got, _ := pol.Pick(Request{Key: "/a"}, bs, t0)
			want := first
			if tt.wantMove {
				want = least
			}
			if got != want {
				t.Fatalf("picked %d, want %d (loads %+v)", got, want, bs)
			}
			wantMoves := uint64(0)
			if tt.wantMove {
				wantMoves = 1
			}
			if n := pol.(Stater).State().LARD.Reassignments; n != wantMoves {
				t.Errorf("reassignments %d, want %d", n, wantMoves)
			}
			// The new assignment sticks once loads even out.
			for i := range bs {
				bs[i].Active = 0
			}
			if again, _ := pol.Pick(Request{Key: "/a"}, bs, t0); again != want {
				t.Errorf("next pick %d, want %d", again, want)
			}
		})
	}

	t.Run("new targets go to the least loaded", func(t *testing.T) {
		pol := mustNew(LARD, Params{}, 2)
		bs := backends(3, 0)
		bs[0].Active, bs[1].Active, bs[2].Active = 5, 1, 3
		for k := range 10 {
			if i, _ := pol.Pick(Request{Key: fmt.Sprint("/n", k)}, bs, t0); i != 1 {
				t.Fatalf("new target went to %d, want 1", i)
			}
		}
	})

	t.Run("down back end loses its targets", func(t *testing.T) {
		pol := mustNew(LARD, Params{}, 2)
		bs := backends(3, 0)
		first, _ := pol.Pick(Request{Key: "/a"}, bs, t0)
		bs[first].Up = false
		second, _ := pol.Pick(Request{Key: "/a"}, bs, t0)
		bs[first].Up = true
		if third, _ := pol.Pick(Request{Key: "/a"}, bs, t0); second == first || third != second {
			t.Errorf("picks %d, %d, %d: want a move that sticks", first, second, third)
		}
	})

	t.Run("LRU eviction forgets the oldest target", func(t *testing.T) {
		pol := mustNew(LARD, Params{MaxTargets: 3}, 2).(*lard)
		bs := backends(2, 0)
		for _, k := range []string{"/a", "/b", "/c", "/a", "/d"} {
			pol.Pick(Request{Key: k}, bs, t0)
		}
		var got []string
		for i := pol.targets.head; i >= 0; i = pol.targets.nodes[i].next {
			got = append(got, pol.targets.nodes[i].key)
		}
		if want := []string{"/d", "/a", "/c"}; !slices.Equal(got, want) {
			t.Errorf("targets %v, want %v", got, want)
		}
	})
}

// members returns the replica set of key, in order.
func members(l *lardR, key string) []string {
	i := l.targets.lookup(key)
	if i < 0 {
		return nil
	}
	return slices.Clone(l.targets.nodes[i].val.members)
}

func TestLARDR(t *testing.T) {
	type step struct {
		at      time.Duration // since t0
		active  []int
		want    string   // back end picked
		members []string // replica set afterwards
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "hot target replicates then shrinks after K",
			steps: []step{
				{0, []int{0, 1, 1, 1}, "b0", []string{"b0"}},
				{time.Second, []int{40, 30, 30, 30}, "b0", []string{"b0"}},           // over T_low, under T_high
				{2 * time.Second, []int{66, 30, 20, 30}, "b2", []string{"b0", "b2"}}, // over T_high, b2 under T_low
				{5 * time.Second, []int{70, 30, 20, 30}, "b2", []string{"b0", "b2"}}, // the least loaded member
				{15 * time.Second, []int{70, 30, 66, 10}, "b3", []string{"b0", "b2", "b3"}},
				{20 * time.Second, []int{50, 30, 40, 10}, "b3", []string{"b0", "b2", "b3"}}, // changed 5 s ago
				{35 * time.Second, []int{50, 30, 40, 10}, "b3", []string{"b0", "b2", "b3"}}, // exactly K: not yet
				{36 * time.Second, []int{50, 30, 40, 10}, "b3", []string{"b2", "b3"}},       // K passed: b0 leaves
				{40 * time.Second, []int{50, 30, 40, 10}, "b3", []string{"b2", "b3"}},       // held again for K
				{57 * time.Second, []int{50, 30, 40, 10}, "b3", []string{"b3"}},
				{90 * time.Second, []int{50, 30, 40, 10}, "b3", []string{"b3"}}, // one member stays
			},
		},
		{
			name: "at 2·T_high replicates even without an idle node",
			steps: []step{
				{0, []int{0, 5, 5, 5}, "b0", []string{"b0"}},
				{time.Second, []int{130, 100, 90, 120}, "b2", []string{"b0", "b2"}},
			},
		},
		{
			name: "down member leaves the set",
			steps: []step{
				{0, []int{0, 5, 5, 5}, "b0", []string{"b0"}},
				{time.Second, []int{66, 30, 20, 30}, "b2", []string{"b0", "b2"}},
				{2 * time.Second, []int{0, 30, -1, 30}, "b0", []string{"b0"}}, // -1: down
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pol := mustNew(LARDR, Params{}, 4).(*lardR)
			bs := backends(4, 0)
			for k, s := range tt.steps {
				for i, a := range s.active {
					bs[i].Up = a >= 0
					bs[i].Active = max(a, 0)
				}
				i, err := pol.Pick(Request{Key: "/hot"}, bs, t0.Add(s.at))
				if err != nil {
					t.Fatal(err)
				}
				if bs[i].Name != s.want {
					t.Errorf("step %d (%v): picked %s, want %s", k, s.at, bs[i].Name, s.want)
				}
				if got := members(pol, "/hot"); !slices.Equal(got, s.members) {
					t.Errorf("step %d (%v): set %v, want %v", k, s.at, got, s.members)
				}
			}
			// Every step that grew the set is one reassignment.
			grows, prev := uint64(0), 0
			for _, s := range tt.steps {
				if len(s.members) > prev && prev > 0 {
					grows++
				}
				prev = len(s.members)
			}
			if n := pol.State().LARD.Reassignments; n != grows {
				t.Errorf("reassignments %d, want %d", n, grows)
			}
		})
	}
}
