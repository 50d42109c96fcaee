package scheduler

import "math"

// hashPolicy is weighted rendezvous (highest random weight) hashing of the
// client key over the members that are up. It ignores load.
type hashPolicy struct{}

// Pick implements Policy.
func (hashPolicy) Pick(g *Group, q Query, dst []int) ([]int, bool) {
	open := g.FailOpen()
	elig := g.up
	if open {
		elig = g.all
	}
	key := q.Client.Key
	dst = rankAll(dst, q.N, elig, func(i int) (float64, uint64) {
		h := mix64(key ^ g.seeds[i])
		if w := g.members[i].Weight; !g.equalW && w > 0 {
			return hrwScore(h, w), h
		}
		return 0, h
	})
	return dst, open
}

// hrwScore is the weighted rendezvous score w / -ln(u) of a hash h, with u
// = h mapped to (0, 1). A member wins a key with probability w / Σw. With
// equal weights the order of h alone is the same, so the logarithm is
// skipped.
func hrwScore(h uint64, w float64) float64 {
	u := (float64(h>>11) + 0.5) / (1 << 53)
	return w / -math.Log(u)
}

// DependsOn returns DependsOnPrefix.
func (hashPolicy) DependsOn() Dependence { return DependsOnPrefix }
