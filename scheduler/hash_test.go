package scheduler

import (
	"math"
	"net/netip"
	"testing"
)

// hashKeys returns n client keys of distinct /24 scopes.
func hashKeys(n int) []uint64 {
	keys := make([]uint64, n)
	for i := range keys {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		keys[i] = ScopeKey(p)
	}
	return keys
}

// firstChoices returns the hash policy's first choice for every key.
func firstChoices(t *testing.T, g *Group, keys []uint64) []string {
	t.Helper()
	pol := mustPolicy(t, "hash", Params{})
	out := make([]string, len(keys))
	buf := make([]int, 0, 1)
	for k, key := range keys {
		got, _ := pol.Pick(g, Query{Client: Client{Key: key}, N: 1}, buf[:0])
		out[k] = g.Member(got[0]).Name
	}
	return out
}

func TestHashMemberFails(t *testing.T) {
	keys := hashKeys(10000)
	before := firstChoices(t, NewGroup(regionMembers()), keys)
	for failed, m := range regionMembers() {
		t.Run(m.Name, func(t *testing.T) {
			ms := regionMembers()
			ms[failed].Up = false
			after := firstChoices(t, NewGroup(ms), keys)
			moved := 0
			for k := range keys {
				switch {
				case before[k] != m.Name && after[k] != before[k]:
					t.Fatalf("key %d moved from %s to %s although %s failed", k, before[k], after[k], m.Name)
				case before[k] == m.Name:
					moved++
				}
			}
			// Its own clients (≈ 1/6) are the only ones that move.
			if f := float64(moved) / float64(len(keys)); math.Abs(f-1.0/6) > 0.1/6 {
				t.Errorf("%s had %.4f of the keys, want 1/6 ± 10%%", m.Name, f)
			}
		})
	}
}

func TestHashMemberAdded(t *testing.T) {
	keys := hashKeys(10000)
	cases := []struct {
		name   string
		weight float64
		want   float64 // share of keys the new member takes
	}{
		{"equal-weight", 1, 1.0 / 7},
		{"double-weight", 2, 2.0 / 8},
		{"half-weight", 0.5, 0.5 / 6.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := regionMembers()
			if tc.weight != 1 {
				for i := range ms {
					ms[i].Weight = 1 // keep the others equal, exercise the weighted scores
				}
			}
			before := firstChoices(t, NewGroup(ms), keys)
			ms = append(ms, Member{Name: "lon", Up: true, Capacity: 100, Weight: tc.weight, Loc: at(51.5074, -0.1278, "GB", "EU")})
			after := firstChoices(t, NewGroup(ms), keys)
			moved := 0
			for k := range keys {
				if after[k] != before[k] {
					if after[k] != "lon" {
						t.Fatalf("key %d moved from %s to %s, not to the new member", k, before[k], after[k])
					}
					moved++
				}
			}
			f := float64(moved) / float64(len(keys))
			t.Logf("moved %.4f of the keys, want %.4f", f, tc.want)
			if math.Abs(f-tc.want) > 0.1*tc.want {
				t.Errorf("moved %.4f of the keys, want %.4f ± 10%%", f, tc.want)
			}
		})
	}
}

func TestHashWeights(t *testing.T) {
	keys := hashKeys(10000)
	ms := regionMembers()[:3]
	for i := range ms {
		ms[i].Weight = float64(i + 1) // 1:2:3
	}
	got := map[string]int{}
	for _, n := range firstChoices(t, NewGroup(ms), keys) {
		got[n]++
	}
	for i, m := range ms {
		want := float64(i+1) / 6
		if f := float64(got[m.Name]) / float64(len(keys)); math.Abs(f-want) > 0.1*want {
			t.Errorf("%s: share %.4f, want %.4f ± 10%%", m.Name, f, want)
		}
	}
}
