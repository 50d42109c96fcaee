package scheduler

// geoLoad weighs proximity and load together: among the nearest tier of
// members with room it draws in proportion to spare capacity, moving outward
// tier by tier, then to the members without room, nearest first.
type geoLoad struct{ p Params }

// spare is member i's geo-load weight: capacity × weight × (high − u) ×
// keep(u), 0 at or above the high watermark.
func (p geoLoad) spare(v *view, i int) float64 {
	m := &v.g.members[i]
	cw := m.Capacity * m.Weight
	if cw == 0 {
		return 0
	}
	u := v.util(i)
	k := p.p.keep(u)
	if k == 0 {
		return 0 // also for u = +Inf, where (high − u) × 0 would be NaN
	}
	return cw * (p.p.HighWatermark - u) * k
}

// tierBuf is how many tier weights Pick keeps on the stack; larger tiers
// recompute the rest for every draw.
const tierBuf = 64

// Pick implements Policy. Each member's weight is computed once per Pick
// (the view does not change during it), however many draws its tier
// takes.
func (p geoLoad) Pick(g *Group, q Query, dst []int) ([]int, bool) {
	v := begin(g, &q)
	defer v.end()
	c := g.candidates(q.Client.Loc)
	base := len(dst)
	var wbuf [tierBuf]float64
	for pos := 0; len(dst)-base < q.N; {
		// The tier starts at the nearest member with room not yet picked.
		pos = p.tierStart(&v, c, pos, dst[base:], &wbuf[0])
		if pos == len(c.idx) {
			break
		}
		end := pos + 1
		for end < len(c.idx) && c.dist[end] <= c.dist[pos]+p.p.TierSlackKm {
			end++
		}
		tier := c.idx[pos:end]
		for k := 1; k < min(len(tier), tierBuf); k++ {
			wbuf[k] = p.weight(&v, int(tier[k]), dst[base:])
		}
		for len(dst)-base < q.N {
			pick := p.draw(&v, tier, wbuf[:min(len(tier), tierBuf)], dst[base:], q.Rand.Float64)
			if pick < 0 {
				break
			}
			dst = append(dst, pick)
		}
		pos = end
	}
	if len(dst)-base < q.N {
		// No room anywhere for more: the members that are up, nearest first.
		w := walker{c: c, seed: q.Rand.Uint64()}
		for len(dst)-base < q.N {
			i := w.next()
			if i < 0 {
				break
			}
			if v.up(i) && !has(dst[base:], i) {
				dst = append(dst, i)
			}
		}
	}
	return dst, v.open
}

// tierStart returns the position in c from pos on of the nearest member
// with room that is up and not in picked, and stores its weight in *w;
// len(c.idx) when there is none.
func (p geoLoad) tierStart(v *view, c *candidates, pos int, picked []int, w *float64) int {
	for ; pos < len(c.idx); pos++ {
		i := int(c.idx[pos])
		if v.up(i) && !has(picked, i) {
			if *w = p.spare(v, i); *w > 0 {
				return pos
			}
		}
	}
	return pos
}

// weight is member i's weight in a draw: its spare capacity, 0 when it is
// down or already picked.
func (p geoLoad) weight(v *view, i int, picked []int) float64 {
	if !v.up(i) || has(picked, i) {
		return 0
	}
	return max(0, p.spare(v, i))
}

// draw picks a member of tier in proportion to its weight, w[k] for the
// first len(w) members (set to 0 once drawn), computed for the others;
// −1 when no weight is positive.
func (p geoLoad) draw(v *view, tier []int32, w []float64, picked []int, rand func() float64) int {
	weightOf := func(k int) float64 {
		if k < len(w) {
			return w[k]
		}
		return p.weight(v, int(tier[k]), picked)
	}
	sum := 0.0
	for k := range tier {
		sum += weightOf(k)
	}
	if sum == 0 {
		return -1
	}
	pick := roulette(len(tier), weightOf, rand()*sum)
	if pick < len(w) {
		w[pick] = 0
	}
	return int(tier[pick])
}

// DependsOn returns DependsOnLocation.
func (geoLoad) DependsOn() Dependence { return DependsOnLocation }
