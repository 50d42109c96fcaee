package site

import (
	"testing"
)

// holds reports whether tb-ccrd's model of back end name holds key.
func holds(t *tbccrd, name, key string) bool {
	for i, n := range t.models.names {
		if n == name {
			return t.models.vals[i].Contains(key)
		}
	}
	return false
}

func TestTBCCRD(t *testing.T) {
	t.Run("repeated URL goes to its holder", func(t *testing.T) {
		pol := mustNew(TBCCRD, Params{}, 3).(*tbccrd)
		bs := backends(4, 1<<20)
		req := Request{Key: "/a", Size: 1000}
		first, _ := pol.Pick(req, bs, t0)
		pol.Done(req, bs[first].Name, t0)
		if !holds(pol, bs[first].Name, "/a") {
			t.Fatal("the server of /a does not hold it")
		}
		// The holder stays the choice while it is busier than the
		// others but not overloaded.
		for a := range 66 {
			bs[first].Active = a
			if i, _ := pol.Pick(req, bs, t0); i != first {
				t.Fatalf("at load %d went to %d, not holder %d", a, i, first)
			}
		}
	})

	t.Run("overloaded holder: least loaded, which becomes a holder", func(t *testing.T) {
		pol := mustNew(TBCCRD, Params{}, 3).(*tbccrd)
		bs := backends(3, 1<<20)
		req := Request{Key: "/a", Size: 1000}
		pol.Pick(Request{Key: "/x"}, bs, t0) // learn the set
		pol.Done(req, "b0", t0)
		bs[0].Active, bs[1].Active, bs[2].Active = 66, 10, 30
		i, _ := pol.Pick(req, bs, t0)
		if i != 1 {
			t.Fatalf("picked %d, want 1", i)
		}
		pol.Done(req, bs[i].Name, t0)
		if !holds(pol, "b0", "/a") || !holds(pol, "b1", "/a") {
			t.Fatal("want both b0 and b1 to hold /a")
		}
		// Now the least loaded holder wins, even over a less loaded
		// back end that does not hold it.
		bs[0].Active, bs[1].Active, bs[2].Active = 20, 30, 0
		if i, _ := pol.Pick(req, bs, t0); i != 0 {
			t.Errorf("picked %d, want holder 0", i)
		}
		bs[0].Up = false
		if i, _ := pol.Pick(req, bs, t0); i != 1 {
			t.Errorf("picked %d, want holder 1 when 0 is down", i)
		}
	})

	t.Run("eviction by bytes", func(t *testing.T) {
		pol := mustNew(TBCCRD, Params{}, 3).(*tbccrd)
		bs := backends(2, 1000)
		pol.Pick(Request{Key: "/x"}, bs, t0) // learn the set
		for _, k := range []string{"/a", "/b", "/c"} {
			pol.Done(Request{Key: k, Size: 400}, "b1", t0)
		}
		if holds(pol, "b1", "/a") || !holds(pol, "b1", "/b") || !holds(pol, "b1", "/c") {
			t.Fatal("want /a evicted from b1, /b and /c kept")
		}
		bs[0].Active, bs[1].Active = 0, 10
		if i, _ := pol.Pick(Request{Key: "/a"}, bs, t0); i != 0 {
			t.Errorf("evicted /a went to %d, want least loaded 0", i)
		}
		if i, _ := pol.Pick(Request{Key: "/b"}, bs, t0); i != 1 {
			t.Errorf("/b went to %d, want holder 1", i)
		}
		// Less memory evicts at the next pick.
		bs[1].MemoryBytes = 500
		pol.Pick(Request{Key: "/x"}, bs, t0)
		if holds(pol, "b1", "/b") || !holds(pol, "b1", "/c") {
			t.Error("after shrinking to 500 bytes want only /c")
		}
	})

	t.Run("oversize never cached", func(t *testing.T) {
		pol := mustNew(TBCCRD, Params{MaxObjectBytes: 4096}, 3).(*tbccrd)
		bs := backends(2, 1<<30)
		big := Request{Key: "/big", Size: 4097}
		for range 20 {
			i, _ := pol.Pick(big, bs, t0)
			pol.Done(big, bs[i].Name, t0)
		}
		if holds(pol, "b0", "/big") || holds(pol, "b1", "/big") {
			t.Fatal("an object over the limit is in the table")
		}
		unknown := Request{Key: "/unknown"}
		pol.Done(unknown, "b0", t0)
		if holds(pol, "b0", "/unknown") {
			t.Fatal("an object of unknown size is in the table")
		}
		ok := Request{Key: "/ok", Size: 4096}
		pol.Done(ok, "b1", t0)
		if !holds(pol, "b1", "/ok") {
			t.Fatal("an object at the limit is not in the table")
		}
	})
}
