package site

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name    string
		policy  string
		params  Params
		rng     *rand.Rand
		wantErr error
		wantSub []string
	}{
		{name: "every name with defaults", policy: "", rng: rng},
		{name: "unknown name", policy: "random", rng: rng, wantErr: ErrUnknownPolicy, wantSub: []string{`"random"`}},
		{name: "nil rand", policy: WRR, wantErr: ErrNilRand},
		{name: "thresholds inverted", policy: LARD, rng: rng, params: Params{TLow: 70, THigh: 65},
			wantErr: ErrBadParams, wantSub: []string{"t_high 65 must be above t_low 70"}},
		{name: "all errors at once", policy: CHBL, rng: rng,
			params:  Params{BalanceFactor: 0.5, VirtualNodes: -1, PrefixV4: 33, MaxTargets: -5},
			wantErr: ErrBadParams, wantSub: []string{"balance_factor 0.5", "virtual_nodes -1", "prefix_v4 33", "max_targets -5"}},
		{name: "client budget", policy: LARD, rng: rng, params: Params{ClientTargets: -1, ClientWindow: -time.Second},
			wantErr: ErrBadParams, wantSub: []string{"client_targets -1", "client_window -1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := Names()
			if tt.policy != "" {
				names = []string{tt.policy}
			}
			for _, name := range names {
				pol, err := New(name, tt.params, tt.rng)
				if tt.wantErr == nil {
					if err != nil {
						t.Fatalf("New(%q): %v", name, err)
					}
					if pol.Name() != name {
						t.Errorf("Name() = %q, want %q", pol.Name(), name)
					}
					continue
				}
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("New(%q) error = %v, want %v", name, err, tt.wantErr)
				}
				for _, sub := range tt.wantSub {
					if !strings.Contains(err.Error(), sub) {
						t.Errorf("error %q lacks %q", err, sub)
					}
				}
			}
		})
	}
}

func TestNoBackend(t *testing.T) {
	down := backends(3, 1<<20)
	for i := range down {
		down[i].Up = false
		down[i].Active = i
	}
	sets := map[string][]Backend{"all down": down, "empty": nil}
	for _, name := range Names() {
		for setName, bs := range sets {
			t.Run(name+"/"+setName, func(t *testing.T) {
				pol := mustNew(name, Params{}, 1)
				req := Request{Key: "/x", Client: netip.MustParseAddr("192.0.2.1"), Size: 10}
				if i, err := pol.Pick(req, bs, t0); !errors.Is(err, ErrNoBackend) {
					t.Fatalf("Pick = %d, %v; want ErrNoBackend", i, err)
				}
				pol.Done(req, "b0", t0) // harmless
				pol.Done(req, "nobody", t0)
			})
		}
	}
}

// TestNeverPicksDown drives every policy with random loads, sizes and
// health flips and checks each pick: in range, up.
func TestNeverPicksDown(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 7))
			pol := mustNew(name, Params{WardInterval: time.Second, ReplicaHold: time.Second, TLow: 2, THigh: 4}, 3)
			bs := backends(6, 64<<10)
			now := t0
			for step := range 5000 {
				now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
				if step%7 == 0 {
					j := rng.IntN(len(bs))
					bs[j].Up = !bs[j].Up
				}
				bs[rng.IntN(len(bs))].Active = rng.IntN(12)
				if step%500 == 0 { // reorder: policies must go by name
					rng.Shuffle(len(bs), func(a, b int) { bs[a], bs[b] = bs[b], bs[a] })
				}
				req := Request{Key: fmt.Sprintf("/f%d", rng.IntN(40)), Client: randomClient(rng), Size: int64(rng.IntN(8 << 10))}
				i, err := pol.Pick(req, bs, now)
				anyUp := false
				for _, b := range bs {
					anyUp = anyUp || b.Up
				}
				if !anyUp {
					if !errors.Is(err, ErrNoBackend) {
						t.Fatalf("step %d: all down, Pick = %d, %v", step, i, err)
					}
					continue
				}
				if err != nil || i < 0 || i >= len(bs) || !bs[i].Up {
					t.Fatalf("step %d: Pick = %d, %v with %+v", step, i, err, bs)
				}
				pol.Done(req, bs[i].Name, now)
			}
		})
	}
}

// TestConcurrent runs Pick and Done from many goroutines; run with -race.
func TestConcurrent(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			pol := mustNew(name, Params{WardInterval: time.Millisecond, MaxTargets: 50, SketchEntries: 20}, 5)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 1))
					bs := backends(4, 32<<10)
					for k := range 500 {
						req := Request{Key: fmt.Sprintf("/f%d", rng.IntN(100)), Client: randomClient(rng), Size: 1000}
						now := t0.Add(time.Duration(k) * time.Millisecond)
						i, err := pol.Pick(req, bs, now)
						if err != nil {
							t.Error(err)
							return
						}
						bs[i].Active = rng.IntN(3)
						pol.Done(req, bs[i].Name, now)
					}
				})
			}
			wg.Wait()
		})
	}
}

// TestMemoryBound inserts ten times the bound of distinct keys and checks
// that every table stayed within it.
func TestMemoryBound(t *testing.T) {
	const bound = 500
	p := Params{MaxTargets: bound, SketchEntries: bound, WardInterval: time.Second}
	tests := []struct {
		policy string
		size   func(Policy) []int
	}{
		{LARD, func(pol Policy) []int { return []int{pol.(*lard).targets.len(), len(pol.(*lard).targets.nodes)} }},
		{LARDR, func(pol Policy) []int { return []int{pol.(*lardR).targets.len(), len(pol.(*lardR).targets.nodes)} }},
		{TBCCRD, func(pol Policy) []int {
			var out []int
			for _, m := range pol.(*tbccrd).models.vals {
				out = append(out, m.Len(), len(m.l.nodes))
			}
			return out
		}},
		{WARD, func(pol Policy) []int {
			w := pol.(*ward)
			return []int{len(w.sketch.entries), len(w.sketch.index), len(w.sketch.heap), len(w.core)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			pol := mustNew(tt.policy, p, 9)
			bs := backends(4, 1<<40) // memory never binds: the entry bound must
			for k := range 10 * bound {
				req := Request{Key: fmt.Sprintf("/distinct/%d", k), Size: 1}
				now := t0.Add(time.Duration(k) * time.Millisecond)
				i, err := pol.Pick(req, bs, now)
				if err != nil {
					t.Fatal(err)
				}
				pol.Done(req, bs[i].Name, now)
			}
			for _, n := range tt.size(pol) {
				if n > bound {
					t.Errorf("table sizes %v exceed %d", tt.size(pol), bound)
					break
				}
			}
		})
	}
}
