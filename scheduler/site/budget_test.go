package site

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// TestTargetBudget checks the per-client bound on new targets of lard and
// lard-r (issue 21): one client network asking for unique paths adds at
// most ClientTargets per ClientWindow, and the others still add theirs.
func TestTargetBudget(t *testing.T) {
	attacker := netip.MustParseAddr("198.51.100.7")
	sameNet := netip.MustParseAddr("198.51.100.200") // the attacker's /24
	other := netip.MustParseAddr("203.0.113.9")
	v6a, v6b := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::9") // one /64
	type step struct {
		client netip.Addr
		n      int           // new keys asked for
		at     time.Duration // after t0
	}
	tests := []struct {
		name        string
		p           Params
		steps       []step
		wantTargets int
		wantRefused uint64
	}{
		{"one client capped at the default 100", Params{},
			[]step{{attacker, 10_000, 0}}, 100, 9_900},
		{"its /24 shares the budget", Params{ClientTargets: 10},
			[]step{{attacker, 10, 0}, {sameNet, 10, 0}}, 10, 10},
		{"others still insert while one is capped", Params{ClientTargets: 10},
			[]step{{attacker, 1000, 0}, {other, 10, 0}, {attacker, 1000, 0}}, 20, 1990},
		{"an IPv6 /64 shares one budget", Params{ClientTargets: 10},
			[]step{{v6a, 10, 0}, {v6b, 10, 0}}, 10, 10},
		{"a new window, a new budget", Params{ClientTargets: 10, ClientWindow: time.Minute},
			[]step{{attacker, 20, 0}, {attacker, 20, 59 * time.Second}, {attacker, 20, time.Minute}}, 20, 40},
		{"loopback is not bounded", Params{ClientTargets: 10},
			[]step{{netip.MustParseAddr("127.0.0.1"), 500, 0}, {netip.MustParseAddr("::1"), 500, 0}}, 1000, 0},
		{"no address is not bounded", Params{ClientTargets: 10},
			[]step{{netip.Addr{}, 500, 0}}, 500, 0},
		{"v4-mapped counts as its IPv4 network", Params{ClientTargets: 10},
			[]step{{attacker, 10, 0}, {netip.MustParseAddr("::ffff:198.51.100.9"), 10, 0}}, 10, 10},
	}
	for _, name := range []string{LARD, LARDR} {
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				pol := mustNew(name, tt.p, 7)
				bs := backends(4, 0)
				k := 0
				for _, st := range tt.steps {
					for range st.n {
						k++
						i, err := pol.Pick(Request{Key: fmt.Sprintf("/unique/%d", k), Client: st.client}, bs, t0.Add(st.at))
						if err != nil || !bs[i].Up {
							t.Fatalf("pick %d: %d, %v", k, i, err)
						}
					}
				}
				st := pol.(Stater).State().LARD
				if st.Targets != tt.wantTargets || st.Untracked != tt.wantRefused {
					t.Errorf("%d targets, %d untracked; want %d and %d", st.Targets, st.Untracked, tt.wantTargets, tt.wantRefused)
				}
			})
		}
	}
}

// TestUntrackedPick checks where a request goes that may add no target:
// the same key to the same back end every time, never a down one, and to
// the least loaded when its owner is overloaded; and that a known target
// is still served from the table past the budget.
func TestUntrackedPick(t *testing.T) {
	client := netip.MustParseAddr("198.51.100.7")
	for _, name := range []string{LARD, LARDR} {
		t.Run(name, func(t *testing.T) {
			pol := mustNew(name, Params{ClientTargets: 1}, 3)
			bs := backends(4, 0)
			known, _ := pol.Pick(Request{Key: "/known", Client: client}, bs, t0)
			first, _ := pol.Pick(Request{Key: "/over", Client: client}, bs, t0)
			for range 20 {
				if i, _ := pol.Pick(Request{Key: "/over", Client: client}, bs, t0); i != first {
					t.Fatalf("untracked key went to %d, then %d", first, i)
				}
				if i, _ := pol.Pick(Request{Key: "/known", Client: client}, bs, t0); i != known {
					t.Fatalf("known target went to %d, then %d", known, i)
				}
			}
			bs[first].Up = false
			if i, _ := pol.Pick(Request{Key: "/over", Client: client}, bs, t0); i == first || !bs[i].Up {
				t.Errorf("untracked key went to %d, down", i)
			}
			bs[first].Up = true
			bs[first].Active = 200 // ≥ 2·T_high
			if i, _ := pol.Pick(Request{Key: "/over", Client: client}, bs, t0); i == first {
				t.Errorf("untracked key went to its overloaded owner %d", i)
			}
			if n := pol.(Stater).State().LARD.Targets; n != 1 {
				t.Errorf("%d targets, want 1", n)
			}
		})
	}
}

// TestTargetBudgetForgetsClients checks that the budget remembers at most
// MaxBudgetClients networks.
func TestTargetBudgetForgetsClients(t *testing.T) {
	b := newTargetBudget(DefaultParams())
	for i := range MaxBudgetClients + 100 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1})
		if !b.allow(a, t0) {
			t.Fatalf("client %d refused its first target", i)
		}
	}
	if n := b.clients.len(); n != MaxBudgetClients {
		t.Errorf("%d networks remembered, want %d", n, MaxBudgetClients)
	}
}

// BenchmarkTargetBudget measures one budget check of a new target, from
// client networks that mostly repeat (1,000 of them) and from ever new
// ones (each check a new network, evicting the least recent at
// MaxBudgetClients).
func BenchmarkTargetBudget(b *testing.B) {
	for _, tt := range []struct {
		name     string
		networks int
	}{{"repeating", 1000}, {"ever-new", 1 << 20}} {
		b.Run(tt.name, func(b *testing.B) {
			bud := newTargetBudget(DefaultParams().withDefaults())
			b.ReportAllocs()
			k := 0
			for b.Loop() {
				n := k % tt.networks
				bud.allow(netip.AddrFrom4([4]byte{byte(16 + n>>16), byte(n >> 8), byte(n), 1}), t0)
				k++
			}
		})
	}
}
