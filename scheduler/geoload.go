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
// recompute them.
const tierBuf = 32

// Pick implements Policy.
func (p geoLoad) Pick(g *Group, q Query, dst []int) ([]int, bool) {
	v := begin(g, &q)
	defer v.end()
	c := g.candidates(q.Client.Loc)
	base := len(dst)
	n := len(c.idx)
	var wbuf [tierBuf]float64
	for pos := 0; len(dst)-base < q.N; {
		// The tier starts at the nearest member with room not yet picked.
		for ; pos < n; pos++ {
			i := int(c.idx[pos])
			if v.up(i) && !has(dst[base:], i) && p.spare(&v, i) > 0 {
				break
			}
		}
		if pos == n {
			break
		}
		end := pos + 1
		for end < n && c.dist[end] <= c.dist[pos]+p.p.TierSlackKm {
			end++
		}
		tier := c.idx[pos:end]
		for len(dst)-base < q.N {
			sum := 0.0
			for k, i32 := range tier {
				w := 0.0
				if i := int(i32); v.up(i) && !has(dst[base:], i) {
					w = max(0, p.spare(&v, i))
				}
				if k < tierBuf {
					wbuf[k] = w
				}
				sum += w
			}
			if sum == 0 {
				break
			}
			x := q.Rand.Float64() * sum // [0, sum)
			pick := -1
			for k, i32 := range tier {
				i := int(i32)
				var w float64
				switch {
				case k < tierBuf:
					w = wbuf[k]
				case v.up(i) && !has(dst[base:], i):
					w = max(0, p.spare(&v, i))
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

// DependsOn returns DependsOnLocation.
func (geoLoad) DependsOn() Dependence { return DependsOnLocation }
