package scheduler

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"testing"
	"time"
)

// benchGroup returns a group of n members scattered over the globe (n = 6
// is the 3 regions × 2 group) with some load, and the estimator for it.
func benchGroup(n int, now time.Time) (*Group, *Estimator) {
	var ms []Member
	if n == 6 {
		ms = regionMembers()
	} else {
		rng := newRand(9)
		ms = make([]Member, n)
		for i := range ms {
			ms[i] = Member{
				Name:     fmt.Sprintf("m%03d", i),
				Up:       i%17 != 0,
				Capacity: 100 + float64(rng.IntN(400)),
				Weight:   1 + float64(rng.IntN(3)),
				Loc:      at(rng.Float64()*120-55, rng.Float64()*360-180, "", ""),
			}
		}
	}
	est := NewEstimator(time.Minute)
	rng := newRand(10)
	for i := range ms {
		est.Report(i, Usage{Load: rng.Float64() * 0.8 * ms[i].Capacity}, now)
	}
	return NewGroup(ms), est
}

// BenchmarkPick measures one Pick of 2 members with a reused dst, for 64
// client locations (memoised after the first round).
func BenchmarkPick(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	rng := newRand(11)
	clients := make([]Client, 64)
	for i := range clients {
		clients[i] = Client{Loc: at(rng.Float64()*120-55, rng.Float64()*360-180, "", ""), Key: rng.Uint64()}
	}
	for _, name := range Names() {
		for _, size := range []struct {
			name string
			n    int
		}{{"3x2", 6}, {"100", 100}, {"512", 512}} {
			b.Run(name+"/"+size.name, func(b *testing.B) {
				pol := mustPolicy(b, name, Params{})
				g, est := benchGroup(size.n, now)
				r := rand.New(rand.NewPCG(1, 2))
				dst := make([]int, 0, 4)
				for _, c := range clients { // warm the location memo
					dst, _ = pol.Pick(g, Query{Client: c, N: 2, Rand: r, Now: now, Load: est}, dst[:0])
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					dst, _ = pol.Pick(g, Query{Client: clients[i&63], N: 2, Rand: r, Now: now, Load: est}, dst[:0])
					i++
				}
			})
		}
	}
}

// BenchmarkQuery measures dnsd's whole per-query path: pick, the scope's
// TTL and answer record, the booking.
func BenchmarkQuery(b *testing.B) {
	t0 := time.Unix(1_700_000_000, 0)
	g, _ := benchGroup(100, t0)
	est := NewWindowEstimator(300 * time.Second)
	pol := mustPolicy(b, "geo-load", Params{})
	rates := NewScopeRates(ScopeRatesConfig{})
	r := rand.New(rand.NewPCG(1, 2))
	dst := make([]int, 0, 4)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// 4096 busy resolvers, each asking again when its copy expires
		// (about every 300 s); every member reports every 1,600 queries
		// (about 2 minutes).
		now := t0.Add(time.Duration(i) * 300 * time.Second / 4096)
		if i%16 == 0 {
			m := i / 16 % g.Len()
			est.Report(m, Usage{Load: 0.5 * g.Member(m).Capacity}, now)
			rates.Report(m, MemberReport{Requests: 50, GroupRequests: 40, At: now})
		}
		sc := scope(i & 4095)
		c := Client{Loc: at(float64(i&63)-30, float64(i&127)*2-127, "", ""), Key: ScopeKey(sc)}
		dst, _ = pol.Pick(g, Query{Client: c, N: 2, Rand: r, Now: now, Load: est}, dst[:0])
		var mask uint64
		for _, k := range dst {
			if k < MaxTrackedMembers {
				mask |= 1 << k
			}
		}
		a := rates.Answer(sc, ScopeAnswer{Members: mask, N: len(dst), Min: 20, Max: 300, Unseen: 20, Fair: g.Len()}, now)
		var from [8]int
		est.Move(dst, members(from[:0], a.Prev), a.PrevN, HiddenLoad(AnswerRate(a.Rate, a.Copies)), a.PrevEnd, now)
		i++
	}
}

// members appends the members of mask to dst.
func members(dst []int, mask uint64) []int {
	for ; mask != 0 && len(dst) < cap(dst); mask &= mask - 1 {
		dst = append(dst, bits.TrailingZeros64(mask))
	}
	return dst
}
