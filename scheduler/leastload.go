package scheduler

// leastLoad is the server-group dispatcher: members that are up, in order of
// utilization including pending load; equal utilizations in random order.
type leastLoad struct{}

// Pick implements Policy.
func (leastLoad) Pick(g *Group, q Query, dst []int) ([]int, bool) {
	v := begin(g, &q)
	defer v.end()
	seed := q.Rand.Uint64()
	dst = rankAll(dst, q.N, v.eligible(), func(i int) (float64, uint64) {
		return -v.util(i), ^tieKey(seed, i) // lowest utilization, then key, first
	})
	return dst, v.open
}

// DependsOn returns DependsOnNothing.
func (leastLoad) DependsOn() Dependence { return DependsOnNothing }
