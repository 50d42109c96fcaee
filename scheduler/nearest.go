package scheduler

// nearest answers the nearest members that are up, spilling over from
// members above the low watermark: such a member is kept with probability
// keep(u) and otherwise passed over for the next nearest.
type nearest struct{ p Params }

// Pick implements Policy.
func (p nearest) Pick(g *Group, q Query, dst []int) ([]int, bool) {
	v := begin(g, &q)
	defer v.end()
	c := g.candidates(q.Client.Loc)
	base := len(dst)
	seed := q.Rand.Uint64()
	w := walker{c: c, seed: seed}
	for len(dst)-base < q.N {
		i := w.next()
		if i < 0 {
			break
		}
		if !v.up(i) {
			continue
		}
		k := p.p.keep(v.util(i))
		if k <= 0 || (k < 1 && q.Rand.Float64() >= k) {
			continue
		}
		dst = append(dst, i)
	}
	// Too few: first the members passed over below the high watermark,
	// then the ones above it, nearest first.
	for pass := 0; pass < 2 && len(dst)-base < q.N; pass++ {
		w = walker{c: c, seed: seed}
		for len(dst)-base < q.N {
			i := w.next()
			if i < 0 {
				break
			}
			if !v.up(i) || has(dst[base:], i) || (pass == 0 && v.util(i) >= p.p.HighWatermark) {
				continue
			}
			dst = append(dst, i)
		}
	}
	return dst, v.open
}

// walker yields the candidates nearest first; members at exactly the same
// distance (common with coarse, country-only locations) come in a random
// order fixed by seed, so none of them is favoured by its index.
type walker struct {
	c       *candidates
	seed    uint64
	a, b    int    // the current tie group is c.idx[a:b]
	k       int    // members of the group yielded so far
	lastKey uint64 // tie key of the last one yielded
}

// next returns the next member index, or -1 at the end.
func (w *walker) next() int {
	if w.k == w.b-w.a {
		w.a = w.b
		if w.a >= len(w.c.idx) {
			return -1
		}
		w.b, w.k = w.a+1, 0
		for w.b < len(w.c.idx) && w.c.dist[w.b] == w.c.dist[w.a] {
			w.b++
		}
	}
	if w.b-w.a == 1 {
		w.k = 1
		return int(w.c.idx[w.a])
	}
	best, bk := -1, uint64(0)
	for _, i32 := range w.c.idx[w.a:w.b] {
		i := int(i32)
		key := tieKey(w.seed, i)
		if w.k > 0 && key <= w.lastKey {
			continue
		}
		if best < 0 || key < bk {
			best, bk = i, key
		}
	}
	w.k++
	w.lastKey = bk
	return best
}

// DependsOn returns DependsOnLocation.
func (nearest) DependsOn() Dependence { return DependsOnLocation }
