package scheduler

// weighted draws members that are up at random in proportion to their
// static weights, without replacement.
type weighted struct{}

// Pick implements Policy.
func (weighted) Pick(g *Group, q Query, dst []int) ([]int, bool) {
	open := g.FailOpen()
	elig := g.up
	if open {
		elig = g.all
	}
	base := len(dst)
	for len(dst)-base < q.N {
		picked := dst[base:]
		sum, cnt := 0.0, 0
		for _, i := range elig {
			if !has(picked, i) {
				sum += g.members[i].Weight
				cnt++
			}
		}
		if cnt == 0 {
			break
		}
		uniform := sum == 0 // only zero weights left: draw uniformly
		if uniform {
			sum = float64(cnt)
		}
		x := q.Rand.Float64() * sum // [0, sum)
		pick := -1
		for _, i := range elig {
			if has(picked, i) {
				continue
			}
			w := g.members[i].Weight
			if uniform {
				w = 1
			}
			if w <= 0 {
				continue
			}
			pick = i // the last positive one absorbs rounding
			if x < w {
				break
			}
			x -= w
		}
		dst = append(dst, pick)
	}
	return dst, open
}

// DependsOn returns DependsOnNothing.
func (weighted) DependsOn() Dependence { return DependsOnNothing }
