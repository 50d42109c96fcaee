package site

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"time"
)

// ringPoint is one virtual node: a point on the hash ring and the back end
// (by its index in the set the ring was built for) that owns it.
type ringPoint struct {
	hash    uint64
	backend int
}

// ringMember is what a ring depends on: a back end's name and weight.
type ringMember struct {
	name   string
	weight float64
}

// chbl is consistent hashing with bounded loads; see [CHBL].
type chbl struct {
	p       Params
	mu      sync.Mutex
	members []ringMember // the set the ring was built for, in bs order
	ring    []ringPoint  // sorted by hash
	// lastActive and lastWeight are ΣActive and Σweight over the up back
	// ends that had the file at the last pick (State).
	lastActive int
	lastWeight float64
}

var _ Policy = (*chbl)(nil)

func newCHBL(p Params) *chbl { return &chbl{p: p} }

func (c *chbl) Name() string { return CHBL }

// sync rebuilds the ring when the names or weights in bs changed. Down
// back ends stay on the ring (and are skipped), so a health flip moves
// only the keys of the back end that flipped.
func (c *chbl) sync(bs []Backend) {
	if len(c.members) == len(bs) {
		same := true
		for i := range bs {
			if c.members[i].name != bs[i].Name || c.members[i].weight != weight(&bs[i]) {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	c.members = c.members[:0]
	c.ring = c.ring[:0]
	var buf []byte
	for i := range bs {
		w := weight(&bs[i])
		c.members = append(c.members, ringMember{name: bs[i].Name, weight: w})
		v := max(1, int(math.Round(w*float64(c.p.VirtualNodes))))
		for j := range v {
			buf = append(append(buf[:0], bs[i].Name...), '#')
			buf = strconv.AppendInt(buf, int64(j), 10)
			c.ring = append(c.ring, ringPoint{hash: mix64(hashBytes(fnvOffset, buf)), backend: i})
		}
	}
	slices.SortFunc(c.ring, func(a, b ringPoint) int {
		if a.hash != b.hash {
			if a.hash < b.hash {
				return -1
			}
			return 1
		}
		return a.backend - b.backend
	})
}

func (c *chbl) Pick(req Request, bs []Backend, _ time.Time) (int, error) {
	total, sumW := 0, 0.0
	for i := range bs {
		if serves(bs, req.Has, i) {
			total += bs[i].Active
			sumW += weight(&bs[i])
		}
	}
	if sumW == 0 {
		return -1, ErrNoBackend
	}
	// Bound per unit of weight; the small slack keeps float rounding from
	// lifting an exact integer to the next one.
	perW := c.p.BalanceFactor * float64(total+1) / sumW
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastActive, c.lastWeight = total, sumW
	c.sync(bs)
	h := mix64(hashString(fnvOffset, req.Key))
	start, _ := slices.BinarySearchFunc(c.ring, h, func(p ringPoint, h uint64) int {
		if p.hash < h {
			return -1
		}
		if p.hash > h {
			return 1
		}
		return 0
	})
	for k := range c.ring {
		i := c.ring[(start+k)%len(c.ring)].backend
		b := &bs[i]
		if serves(bs, req.Has, i) && float64(b.Active+1) <= math.Ceil(perW*weight(b)-1e-9) {
			return i, nil
		}
	}
	// Unreachable while Active counts are not negative: the bounds add up
	// to more than the load. Fall back to the least loaded.
	best := -1
	for i := range bs {
		if serves(bs, req.Has, i) && (best < 0 || load(&bs[i]) < load(&bs[best])) {
			best = i
		}
	}
	return best, nil
}

// Done does nothing: loads are the back ends' Active counts.
func (c *chbl) Done(Request, string, time.Time) {}
