package site

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// owners maps each client to the name of the back end client-hash picks.
func owners(t *testing.T, pol Policy, clients []netip.Addr, bs []Backend) []string {
	t.Helper()
	out := make([]string, len(clients))
	for k, c := range clients {
		i, err := pol.Pick(Request{Key: "/same", Client: c}, bs, t0)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = bs[i].Name
	}
	return out
}

func TestClientHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	clients := make([]netip.Addr, 10_000)
	for k := range clients {
		clients[k] = randomClient(rng)
	}
	pol := mustNew(ClientHash, Params{}, 1)

	t.Run("spread by weight", func(t *testing.T) {
		bs := backends(4, 0)
		bs[3].Weight = 2
		count := map[string]int{}
		for _, o := range owners(t, pol, clients, bs) {
			count[o]++
		}
		for i, b := range bs {
			want := float64(len(clients)) * weight(&bs[i]) / 5
			if got := float64(count[b.Name]); got < want*0.9 || got > want*1.1 {
				t.Errorf("%s has %v clients, want about %v", b.Name, got, want)
			}
		}
	})

	t.Run("failure moves only the failed back end's clients", func(t *testing.T) {
		bs := backends(5, 0)
		before := owners(t, pol, clients, bs)
		bs[2].Up = false
		after := owners(t, pol, clients, bs)
		moved, took := 0, map[string]int{}
		for k := range clients {
			switch {
			case before[k] != "b2" && after[k] != before[k]:
				t.Fatalf("client %v moved from %s to %s", clients[k], before[k], after[k])
			case before[k] == "b2":
				moved++
				took[after[k]]++
			}
		}
		// b2's clients spread over the four others.
		for _, b := range []string{"b0", "b1", "b3", "b4"} {
			if share := float64(took[b]) / float64(moved); share < 0.2 || share > 0.3 {
				t.Errorf("%s took %.2f of b2's %d clients, want about 0.25", b, share, moved)
			}
		}
		bs[2].Up = true
		back := owners(t, pol, clients, bs)
		for k := range clients {
			if back[k] != before[k] {
				t.Fatalf("client %v did not return to %s", clients[k], before[k])
			}
		}
	})

	t.Run("addition takes about 1/n, only for itself", func(t *testing.T) {
		bs := backends(4, 0)
		before := owners(t, pol, clients, bs)
		bs = append(bs, Backend{Name: "new", Weight: 1, Up: true})
		after := owners(t, pol, clients, bs)
		moved := 0
		for k := range clients {
			if after[k] != before[k] {
				moved++
				if after[k] != "new" {
					t.Fatalf("client %v moved from %s to %s", clients[k], before[k], after[k])
				}
			}
		}
		if share := float64(moved) / float64(len(clients)); share < 0.18 || share > 0.22 {
			t.Errorf("addition moved %.3f of the clients, want about 1/5", share)
		}
	})

	t.Run("prefix masking", func(t *testing.T) {
		tests := []struct {
			name   string
			params Params
			a, b   string
			same   bool
		}{
			{"same /24", Params{}, "198.51.100.7", "198.51.100.200", true},
			{"same /64", Params{}, "2001:db8:1:2::1", "2001:db8:1:2:ffff::9", true},
			{"mapped v4 is v4", Params{}, "::ffff:198.51.100.7", "198.51.100.9", true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				p := mustNew(ClientHash, tt.params, 1)
				bs := backends(16, 0)
				x := owners(t, p, []netip.Addr{netip.MustParseAddr(tt.a)}, bs)
				y := owners(t, p, []netip.Addr{netip.MustParseAddr(tt.b)}, bs)
				if (x[0] == y[0]) != tt.same {
					t.Errorf("%s → %s, %s → %s", tt.a, x[0], tt.b, y[0])
				}
			})
		}
		// With /32 the hosts of one /24 spread out.
		p := mustNew(ClientHash, Params{PrefixV4: 32}, 1)
		bs := backends(4, 0)
		seen := map[string]bool{}
		for h := range 64 {
			seen[owners(t, p, []netip.Addr{netip.AddrFrom4([4]byte{198, 51, 100, byte(h)})}, bs)[0]] = true
		}
		if len(seen) != 4 {
			t.Errorf("/32 hashing used %d back ends for 64 hosts, want 4", len(seen))
		}
	})
}
