package site

import (
	"fmt"
	"testing"
	"time"
)

func TestStater(t *testing.T) {
	for _, name := range Names() {
		t.Run(name+" implements Stater and names itself", func(t *testing.T) {
			pol := mustNew(name, Params{}, 1)
			st, ok := pol.(Stater)
			if !ok {
				t.Fatalf("%s does not implement Stater", name)
			}
			if got := st.State().Policy; got != name {
				t.Errorf("State().Policy = %q, want %q", got, name)
			}
		})
	}
}

// replicasOf counts lard-r's members by walking its table, the slow way
// that State avoids.
func replicasOf(l *lardR) int {
	n := 0
	for _, i := range l.targets.index {
		n += len(l.targets.nodes[i].val.members)
	}
	return n
}

func TestStats(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		params Params
		// check drives a fresh policy and checks its State.
		check func(t *testing.T, pol Policy)
	}{
		{
			name: "lard counts targets up to its bound", policy: LARD, params: Params{MaxTargets: 5},
			check: func(t *testing.T, pol Policy) {
				bs := backends(3, 1<<20)
				for i := range 8 {
					if _, err := pol.Pick(Request{Key: fmt.Sprint("/f", i)}, bs, t0); err != nil {
						t.Fatal(err)
					}
					want := min(i+1, 5)
					if s := pol.(Stater).State().LARD; s == nil || s.Targets != want || s.MaxTargets != 5 || s.Replicas != 0 {
						t.Fatalf("after %d keys: %+v, want %d targets of at most 5", i+1, s, want)
					}
				}
			},
		},
		{
			name: "lard-r counts replicas as its sets grow, shrink and are evicted", policy: LARDR,
			params: Params{MaxTargets: 4, ReplicaHold: time.Second},
			check: func(t *testing.T, pol Policy) {
				l := pol.(*lardR)
				bs := backends(3, 1<<20)
				now := t0
				pick := func(key string) {
					t.Helper()
					if _, err := pol.Pick(Request{Key: key}, bs, now); err != nil {
						t.Fatal(err)
					}
					s := pol.(Stater).State().LARD
					if s.Replicas != replicasOf(l) || s.Targets != l.targets.len() {
						t.Fatalf("%s: state %+v, table has %d targets and %d replicas", key, s, l.targets.len(), replicasOf(l))
					}
				}
				for i := range 3 {
					pick(fmt.Sprint("/f", i))
				}
				// Overload /f0's back end: the least loaded joins its set.
				for i := range bs {
					bs[i].Active = 0
				}
				owner := l.targets.nodes[l.targets.lookup("/f0")].val.members[0]
				bs[indexOf(bs, owner, -1)].Active = 200
				pick("/f0")
				if got := replicasOf(l); got != 4 {
					t.Fatalf("replicas %d after a join, want 4", got)
				}
				// After K the most loaded member leaves.
				bs[indexOf(bs, owner, -1)].Active = 0
				now = now.Add(2 * time.Second)
				pick("/f0")
				// A member going down leaves its sets.
				bs[0].Up = false
				for i := range 3 {
					pick(fmt.Sprint("/f", i))
				}
				bs[0].Up = true
				// Evictions.
				for i := range 10 {
					pick(fmt.Sprint("/g", i))
				}
			},
		},
		{
			name: "ward reports its core after an analysis", policy: WARD,
			params: Params{WardInterval: time.Minute},
			check: func(t *testing.T, pol Policy) {
				bs := backends(2, 1<<20)
				s := pol.(Stater).State().WARD
				if s == nil || s.CoreFiles != 0 || !s.LastAnalysis.IsZero() || s.SketchEntries != DefaultParams().SketchEntries || s.Interval != time.Minute {
					t.Fatalf("before any request: %+v", s)
				}
				// /hot0 too hot for one of the two back ends, the others once.
				for i, n := range []int{10, 1, 1, 1} {
					for range n {
						req := Request{Key: fmt.Sprint("/hot", i)}
						b, err := pol.Pick(req, bs, t0)
						if err != nil {
							t.Fatal(err)
						}
						req.Size = 1000
						pol.Done(req, bs[b].Name, t0)
					}
				}
				later := t0.Add(time.Minute)
				if _, err := pol.Pick(Request{Key: "/hot0"}, bs, later); err != nil {
					t.Fatal(err)
				}
				s = pol.(Stater).State().WARD
				if s.CoreFiles != 1 || s.CoreBytes != 1000 || !s.LastAnalysis.Equal(later) || s.SketchFiles != 4 {
					t.Errorf("after an analysis: %+v, want a core of /hot0's 1000 bytes at %v", s, later)
				}
			},
		},
		{
			name: "tb-ccrd reports each cache model", policy: TBCCRD,
			check: func(t *testing.T, pol Policy) {
				if s := pol.(Stater).State(); len(s.Caches) != 0 {
					t.Fatalf("before any pick: %+v", s.Caches)
				}
				bs := backends(2, 1<<20)
				for i := range 3 {
					req := Request{Key: fmt.Sprint("/f", i)}
					b, err := pol.Pick(req, bs, t0)
					if err != nil {
						t.Fatal(err)
					}
					req.Size = 100
					pol.Done(req, bs[b].Name, t0)
				}
				s := pol.(Stater).State()
				objects, bytes := 0, int64(0)
				for i, c := range s.Caches {
					if c.Backend != bs[i].Name || c.Capacity != 1<<20 {
						t.Errorf("cache %d: %+v", i, c)
					}
					objects += c.Objects
					bytes += c.Bytes
				}
				if len(s.Caches) != 2 || objects != 3 || bytes != 300 {
					t.Errorf("caches %+v, want 3 objects of 300 bytes over 2 models", s.Caches)
				}
			},
		},
		{
			name: "chbl reports the load and bound of the last pick", policy: CHBL,
			params: Params{BalanceFactor: 1.5, VirtualNodes: 10},
			check: func(t *testing.T, pol Policy) {
				bs := backends(2, 0)
				bs[0].Active, bs[1].Active = 3, 1
				if _, err := pol.Pick(Request{Key: "/x"}, bs, t0); err != nil {
					t.Fatal(err)
				}
				s := pol.(Stater).State().CHBL
				want := CHBLStats{BalanceFactor: 1.5, RingPoints: 20, AverageLoad: 2, Bound: 1.5 * 5 / 2}
				if s == nil || *s != want {
					t.Errorf("state %+v, want %+v", s, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, mustNew(tt.policy, tt.params, 7))
		})
	}
}
