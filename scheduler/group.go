package scheduler

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"sync"
)

// Member is one member of a group as dnsd knows it when it builds a Group
// snapshot. Policies refer to members by their index in the slice given to
// NewGroup.
type Member struct {
	// Name is the member's stable identity; it seeds the hash policy, so
	// renaming a member moves its clients.
	Name string
	// Up is the prober's verdict (after rise/fall hysteresis).
	Up bool
	// Load is the last reported load in load units, load = 10·(r+m). An
	// Estimator that has a newer report for the member overrides it.
	Load float64
	// Capacity is the member's capacity in the same units as Load. A member
	// with no positive capacity counts as always full.
	Capacity float64
	// BytesPerSecond is the last reported rate of response bytes; an
	// Estimator that has a newer report for the member overrides it.
	BytesPerSecond float64
	// Bandwidth is what the member's uplink carries, in bytes per second;
	// 0 is no limit. See Figures.Utilization.
	Bandwidth float64
	// Weight is the static weight (weighted, hash, geo-load). Negative or
	// non-finite weights count as 0.
	Weight float64
	// Loc is where the member is.
	Loc Location
}

// Client is the asker of one DNS question, as far as a policy cares.
type Client struct {
	// Loc is where the client is (from ECS or the resolver's address).
	Loc Location
	// Key is a stable hash of the client scope (see ScopeKey), used by
	// the hash policy. It must not change between restarts.
	Key uint64
}

// Group is an immutable snapshot of a group's members, built with NewGroup
// whenever membership, up/down state or static attributes change (not per
// query and not per load report: live load goes to an Estimator). It is safe
// for concurrent use. Besides the members it holds a bounded, lazily filled
// memo of the members sorted by distance from each client location bucket,
// so the per-query path never sorts.
type Group struct {
	members []Member
	seeds   []uint64  // per-member seed of the hash policy
	up      []int     // indexes of the members that are up
	all     []int     // 0..len-1, the candidates when failing open
	equalW  bool      // every member has the same weight
	cumUp   []float64 // running sums of the weights over up (weighted's draws)
	cumAll  []float64 // over all
	cache   *distanceCache
}

// NewGroup builds a snapshot of members. The slice is copied; country and
// continent codes are upper-cased, non-finite or negative numbers are
// replaced by 0.
func NewGroup(members []Member) *Group {
	g := &Group{
		members: make([]Member, len(members)),
		seeds:   make([]uint64, len(members)),
		all:     make([]int, len(members)),
		equalW:  true,
	}
	for i, m := range members {
		m.Load = sane(m.Load)
		m.Capacity = sane(m.Capacity)
		m.BytesPerSecond = sane(m.BytesPerSecond)
		m.Bandwidth = sane(m.Bandwidth)
		m.Weight = sane(m.Weight)
		m.Loc.Country = strings.ToUpper(m.Loc.Country)
		m.Loc.Continent = strings.ToUpper(m.Loc.Continent)
		g.members[i] = m
		g.seeds[i] = mix64(fnv1a(m.Name))
		g.all[i] = i
		if m.Up {
			g.up = append(g.up, i)
		}
		if m.Weight != g.members[0].Weight {
			g.equalW = false
		}
	}
	g.cumUp, g.cumAll = g.cumulative(g.up), g.cumulative(g.all)
	limit := maxCachedSlots / max(1, len(members))
	g.cache = &distanceCache{limit: max(minCachedBuckets, limit), m: make(map[uint64]*candidates)}
	return g
}

// cumulative returns the running sums of the weights of members idx.
func (g *Group) cumulative(idx []int) []float64 {
	out := make([]float64, len(idx))
	sum := 0.0
	for k, i := range idx {
		sum += g.members[i].Weight
		out[k] = sum
	}
	return out
}

// sane maps NaN, ±Inf and negative numbers to 0.
func sane(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return 0
	}
	return x
}

// Len returns the number of members.
func (g *Group) Len() int { return len(g.members) }

// Member returns member i as stored in the snapshot.
func (g *Group) Member(i int) Member { return g.members[i] }

// FailOpen reports whether no member is up, in which case every policy
// answers from all members, ignoring their state.
func (g *Group) FailOpen() bool { return len(g.up) == 0 }

// Cache bounds: at most maxCachedSlots member indexes in all memoised
// candidate lists of a group (12 bytes each, so about 12 MiB), but at least
// minCachedBuckets buckets. When the bound is reached the memo is cleared.
const (
	maxCachedSlots   = 1 << 20
	minCachedBuckets = 64
)

// candidates is every member sorted by distance (then index) from the centre
// of one location bucket.
type candidates struct {
	idx  []int32
	dist []float64
}

// distanceCache memoises candidates per location bucket.
type distanceCache struct {
	mu    sync.RWMutex
	limit int
	m     map[uint64]*candidates
}

// candidates returns the members sorted by distance from loc's bucket.
func (g *Group) candidates(loc Location) *candidates {
	key := bucketOf(loc)
	c := g.cache
	c.mu.RLock()
	cs := c.m[key]
	c.mu.RUnlock()
	if cs != nil {
		return cs
	}
	cs = g.sortFrom(bucketCentre(key))
	c.mu.Lock()
	if len(c.m) >= c.limit {
		clear(c.m)
	}
	c.m[key] = cs
	c.mu.Unlock()
	return cs
}

// sortFrom sorts all members by distance from l, ties by index.
func (g *Group) sortFrom(l Location) *candidates {
	n := len(g.members)
	type pair struct {
		d float64
		i int32
	}
	ps := make([]pair, n)
	for i := range g.members {
		ps[i] = pair{DistanceKm(l, g.members[i].Loc), int32(i)}
	}
	slices.SortFunc(ps, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.d, b.d), cmp.Compare(a.i, b.i))
	})
	cs := &candidates{idx: make([]int32, n), dist: make([]float64, n)}
	for k, p := range ps {
		cs.idx[k], cs.dist[k] = p.i, p.d
	}
	return cs
}

// Location buckets. A bucket key packs, from the high bit down: a
// has-coordinates flag, the 1° latitude cell (0..179), the 1° longitude cell
// (0..359), the country code and the continent code (two letters, 5 bits
// each; anything else counts as unknown).
const (
	bucketCoords = 1 << 63
	latShift     = 40
	lonShift     = 24
	countryShift = 12
	codeMask     = 1<<10 - 1
	cellMask     = 1<<9 - 1
)

// bucketOf returns the bucket key of l.
func bucketOf(l Location) uint64 {
	key := code2(l.Country)<<countryShift | code2(l.Continent)
	if l.HasCoords && !math.IsNaN(l.Lat) && !math.IsNaN(l.Lon) && !math.IsInf(l.Lat, 0) && !math.IsInf(l.Lon, 0) {
		lat := min(max(math.Floor(l.Lat)+90, 0), 179)
		lon := math.Mod(l.Lon+180, 360)
		if lon < 0 {
			lon += 360
		}
		key |= bucketCoords | uint64(lat)<<latShift | uint64(min(math.Floor(lon), 359))<<lonShift
	}
	return key
}

// bucketCentre is the location a bucket's candidates are sorted from: the
// centre of its cell, with its country and continent codes.
func bucketCentre(key uint64) Location {
	l := Location{
		Country:   decode2(key >> countryShift & codeMask),
		Continent: decode2(key & codeMask),
	}
	if key&bucketCoords != 0 {
		l.HasCoords = true
		l.Lat = float64(key>>latShift&cellMask) - 90 + 0.5
		l.Lon = float64(key>>lonShift&cellMask) - 180 + 0.5
	}
	return l
}

// code2 packs a two-letter code into 10 bits (0 = unknown).
func code2(s string) uint64 {
	if len(s) != 2 {
		return 0
	}
	var c uint64
	for i := range 2 {
		b := s[i] | 0x20 // lower case
		if b < 'a' || b > 'z' {
			return 0
		}
		c = c<<5 | uint64(b-'a'+1)
	}
	return c
}

// decode2 is the inverse of code2, in upper case.
func decode2(c uint64) string {
	if c == 0 {
		return ""
	}
	return string([]byte{byte(c>>5) - 1 + 'A', byte(c&31) - 1 + 'A'})
}

// fnv1a is the 64-bit FNV-1a hash of s.
func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is the splitmix64 finalizer: a bijective, well-mixing 64-bit hash.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
