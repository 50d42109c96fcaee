package site

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPickHasNeverPicksWithout runs every policy over a stream of
// requests in which b1 lacks every file (Request.Has), with completions,
// loads and a flapping b2, and checks that b1 is never picked, that the
// others still are, and that a Has nobody serves is ErrNoBackend.
func TestPickHasNeverPicksWithout(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			pol := mustNew(name, Params{WardInterval: time.Second}, 7)
			bs := backends(3, 1<<20)
			has := []bool{true, false, true}
			rng := rand.New(rand.NewPCG(3, 4))
			now := t0
			picked := map[string]int{}
			for k := range 5000 {
				now = now.Add(10 * time.Millisecond)
				bs[2].Up = k%500 < 400 // b2 flaps: b0 alone has the file then
				req := Request{Key: fmt.Sprintf("/f/%d", rng.IntN(300)), Client: randomClient(rng), Size: 1000, Has: has}
				i, err := pol.Pick(req, bs, now)
				if err != nil {
					t.Fatalf("pick %d: %v", k, err)
				}
				if !has[i] || !bs[i].Up {
					t.Fatalf("pick %d of %q: %s, which lacks the file or is down", k, req.Key, bs[i].Name)
				}
				picked[bs[i].Name]++
				pol.Done(req, bs[i].Name, now)
			}
			if picked["b0"] == 0 || picked["b2"] == 0 {
				t.Errorf("picks %v: want both b0 and b2", picked)
			}
			for _, c := range []struct {
				name string
				has  []bool
				up   []bool
			}{
				{"nobody has it", []bool{false, false, false}, []bool{true, true, true}},
				{"who has it is down", []bool{false, true, false}, []bool{true, false, true}},
			} {
				for i := range bs {
					bs[i].Up = c.up[i]
				}
				if i, err := pol.Pick(Request{Key: "/f/1", Has: c.has}, bs, now); !errors.Is(err, ErrNoBackend) {
					t.Errorf("%s: Pick = %d, %v; want ErrNoBackend", c.name, i, err)
				}
			}
		})
	}
}

// TestPickHasSignals checks, per policy, that the state a policy keeps
// follows the picks that Request.Has restricts: the target moves, the set
// changes, the tag goes where the request went, the scores and the ring
// carry on. Each check gets a new policy and three back ends.
func TestPickHasSignals(t *testing.T) {
	tests := []struct {
		policy string
		check  func(t *testing.T, pol Policy, bs []Backend)
	}{
		{WRR, hasWRR},
		{LeastConn, hasLeastConn},
		{ClientHash, hasClientHash},
		{LARD, hasLARD},
		{LARDR, hasLARDR},
		{WARD, hasWARD},
		{TBCCRD, hasTBCCRD},
		{CHBL, hasCHBL},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			tt.check(t, mustNew(tt.policy, Params{}, 5), backends(3, 1<<20))
		})
	}
}

// only is a Has of n back ends in which only back end i has the file.
func only(n, i int) []bool {
	h := make([]bool, n)
	h[i] = true
	return h
}

func hasWRR(t *testing.T, pol Policy, bs []Backend) {
	// Over b0 and b2 the scores alternate; b1 keeps its own and
	// gets its turn once the file is everywhere.
	got := pickNames(t, pol, bs, Request{Key: "/a", Has: []bool{true, false, true}}, 6)
	if got != "b0 b2 b0 b2 b0 b2" && got != "b2 b0 b2 b0 b2 b0" {
		t.Errorf("restricted picks %q: want b0 and b2 in turn", got)
	}
	if got := pickNames(t, pol, bs, Request{Key: "/a"}, 3); !containsName(got, "b1") {
		t.Errorf("unrestricted picks %q: want b1 among them", got)
	}
}

func hasLeastConn(t *testing.T, pol Policy, bs []Backend) {
	bs[1].Active = 0
	bs[0].Active, bs[2].Active = 5, 3
	if got := pickNames(t, pol, bs, Request{Key: "/a", Has: []bool{true, false, true}}, 1); got != "b2" {
		t.Errorf("pick %q: want b2, the least loaded that has it", got)
	}
}

func hasClientHash(t *testing.T, pol Policy, bs []Backend) {
	// Clients of the owner without the file spread over the others;
	// the others' clients stay where they were.
	rng := rand.New(rand.NewPCG(1, 1))
	for range 200 {
		c := randomClient(rng)
		free, _ := pol.Pick(Request{Client: c}, bs, t0)
		got, _ := pol.Pick(Request{Client: c, Has: []bool{true, false, true}}, bs, t0)
		if free != 1 && got != free {
			t.Fatalf("client %v moved from %s to %s though its back end has the file", c, bs[free].Name, bs[got].Name)
		}
	}
}

func hasLARD(t *testing.T, pol Policy, bs []Backend) {
	req := Request{Key: "/a", Client: netip.MustParseAddr("192.0.2.1")}
	first := pickNames(t, pol, bs, Request{Key: "/a", Has: only(3, 1)}, 1)
	moved := pickNames(t, pol, bs, Request{Key: "/a", Has: only(3, 2)}, 1)
	if first != "b1" || moved != "b2" {
		t.Fatalf("picks %s then %s: want b1 then b2", first, moved)
	}
	// The target moved: the next requests stay on b2.
	if got := pickNames(t, pol, bs, req, 3); got != "b2 b2 b2" {
		t.Errorf("after the move %q: want b2 b2 b2", got)
	}
	if st := pol.(Stater).State().LARD; st.Reassignments != 1 || st.Targets != 1 {
		t.Errorf("state %+v: want 1 target moved once", *st)
	}
}

func hasLARDR(t *testing.T, pol Policy, bs []Backend) {
	pickNames(t, pol, bs, Request{Key: "/a", Has: only(3, 1)}, 1)
	// b1 leaves the set of /a once it lacks the file; b2 is all of it.
	if got := pickNames(t, pol, bs, Request{Key: "/a", Has: only(3, 2)}, 1); got != "b2" {
		t.Fatalf("pick %q: want b2", got)
	}
	if st := pol.(Stater).State().LARD; st.Replicas != 1 || st.Targets != 1 {
		t.Errorf("state %+v: want one target with a set of one", *st)
	}
	if got := pickNames(t, pol, bs, Request{Key: "/a", Has: []bool{true, true, true}}, 3); got != "b2 b2 b2" {
		t.Errorf("after the change %q: want b2 b2 b2", got)
	}
}

func hasWARD(t *testing.T, pol Policy, bs []Backend) {
	// The owner of /a lacks it: another takes it; Done still
	// learns the size.
	owner := pickNames(t, pol, bs, Request{Key: "/a"}, 1)
	has := []bool{owner != "b0", owner != "b1", owner != "b2"}
	got := pickNames(t, pol, bs, Request{Key: "/a", Size: 100, Has: has}, 1)
	if got == owner {
		t.Fatalf("pick %s: the owner, which lacks the file", got)
	}
	pol.Done(Request{Key: "/a", Size: 100}, got, t0)
	if st := pol.(Stater).State().WARD; st.SketchFiles != 1 {
		t.Errorf("state %+v: want /a in the sketch", *st)
	}
}

func hasTBCCRD(t *testing.T, pol Policy, bs []Backend) {
	// b1 holds the tag of /a but lacks the file: b0 or b2 take it
	// and, at Done, the tag too; then it stays with them.
	pickNames(t, pol, bs, Request{Key: "/a"}, 1)
	pol.Done(Request{Key: "/a", Size: 100}, "b1", t0)
	got := pickNames(t, pol, bs, Request{Key: "/a", Has: []bool{true, false, true}}, 1)
	if got == "b1" {
		t.Fatal("picked b1, which lacks the file")
	}
	pol.Done(Request{Key: "/a", Size: 100}, got, t0)
	bs[0].Active, bs[2].Active = 1, 1 // ties no longer decide
	if again := pickNames(t, pol, bs, Request{Key: "/a", Has: []bool{true, false, true}}, 4); again != got+" "+got+" "+got+" "+got {
		t.Errorf("picks %q: want the new holder %s each time", again, got)
	}
	if st := pol.(Stater).State().Caches; st[0].Objects+st[1].Objects+st[2].Objects != 2 {
		t.Errorf("cache models %+v: want /a on b1 and on %s", st, got)
	}
}

func hasCHBL(t *testing.T, pol Policy, bs []Backend) {
	// Only b1 has it: the bound is over those that have it, so b1
	// is not full however loaded.
	bs[1].Active = 50
	if got := pickNames(t, pol, bs, Request{Key: "/a", Has: only(3, 1)}, 1); got != "b1" {
		t.Errorf("pick %q: want b1, the only one with the file", got)
	}
	if st := pol.(Stater).State().CHBL; st.AverageLoad == 0 {
		t.Errorf("state %+v: want b1's load as the average", *st)
	}
}

// pickNames picks n times for req at t0 and returns the names picked,
// separated by spaces; it fails the test on an error.
func pickNames(t *testing.T, pol Policy, bs []Backend, req Request, n int) string {
	t.Helper()
	s := ""
	for k := range n {
		i, err := pol.Pick(req, bs, t0)
		if err != nil {
			t.Fatal(err)
		}
		if k > 0 {
			s += " "
		}
		s += bs[i].Name
	}
	return s
}

func containsName(names, name string) bool {
	return slices.Contains(strings.Fields(names), name)
}
