package scheduler

import "slices"

// weighted draws members that are up at random in proportion to their
// static weights, without replacement.
type weighted struct{}

// weightedTries is how many draws from all the eligible members' weights
// a pick makes before it draws from the ones not yet picked alone: a
// draw that hits a picked member is drawn again, which keeps each draw
// in proportion to the weights of those left and costs O(log n), not
// O(n), while the picked members hold little of the weight.
const weightedTries = 8

// weightedScan is the most eligible members a pick draws from with a
// scan of them all, which is cheaper than the search for so few.
const weightedScan = 16

// Pick implements Policy.
func (weighted) Pick(g *Group, q Query, dst []int) ([]int, bool) {
	open := g.FailOpen()
	elig, cum := g.up, g.cumUp
	if open {
		elig, cum = g.all, g.cumAll
	}
	base := len(dst)
	for len(dst)-base < q.N && len(dst)-base < len(elig) {
		pick := -1
		if len(elig) > weightedScan {
			pick = drawCumulative(elig, cum, dst[base:], q.Rand.Float64)
		}
		if pick < 0 {
			pick = drawLeft(g, elig, dst[base:], q.Rand.Float64)
		}
		dst = append(dst, pick)
	}
	return dst, open
}

// drawCumulative draws a member of elig in proportion to its weight (cum
// holds their running sums), again when it is in picked, up to
// weightedTries times; −1 when every try hit a picked member or no
// weight is positive.
func drawCumulative(elig []int, cum []float64, picked []int, rand func() float64) int {
	if len(cum) == 0 || !(cum[len(cum)-1] > 0) {
		return -1
	}
	total := cum[len(cum)-1]
	for range weightedTries {
		x := rand() * total // [0, total)
		k, _ := slices.BinarySearch(cum, x)
		for k < len(cum) && cum[k] <= x {
			k++ // x is where member k's share ends (or it has none)
		}
		if k == len(cum) {
			k = len(cum) - 1 // rounding
			for k > 0 && cum[k-1] == cum[k] {
				k-- // the last member with a positive weight
			}
		}
		if i := elig[k]; !has(picked, i) {
			return i
		}
	}
	return -1
}

// drawLeft draws one of the members of elig not in picked in proportion
// to its weight, uniformly when only zero weights are left.
func drawLeft(g *Group, elig, picked []int, rand func() float64) int {
	sum, cnt := 0.0, 0
	for _, i := range elig {
		if !has(picked, i) {
			sum += g.members[i].Weight
			cnt++
		}
	}
	uniform := sum == 0 // only zero weights left: draw uniformly
	if uniform {
		sum = float64(cnt)
	}
	k := roulette(len(elig), func(k int) float64 {
		switch {
		case has(picked, elig[k]):
			return 0
		case uniform:
			return 1
		}
		return g.members[elig[k]].Weight
	}, rand()*sum)
	if k < 0 {
		return -1
	}
	return elig[k]
}

// roulette returns where x, in [0, Σ w), falls when the weights w(k) of
// k < n are laid end to end; the last positive weight absorbs rounding;
// −1 when none is positive.
func roulette(n int, w func(k int) float64, x float64) int {
	pick := -1
	for k := range n {
		wk := w(k)
		if wk <= 0 {
			continue
		}
		pick = k
		if x < wk {
			break
		}
		x -= wk
	}
	return pick
}

// DependsOn returns DependsOnNothing.
func (weighted) DependsOn() Dependence { return DependsOnNothing }
