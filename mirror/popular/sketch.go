package popular

import (
	"cmp"
	"math"
	"slices"
	"time"
)

const (
	// DefaultCounters is a Sketch's K, the counters it keeps.
	DefaultCounters = 64
	// HalfLife is how often a Sketch halves its counts.
	HalfLife = 5 * time.Minute
)

// Entry is one key of a Sketch's Top: Count is the estimate (never below
// the key's true decayed count) and Error how much of it may not be the
// key's (Count − Error never exceeds the true count).
type Entry struct {
	Key          string
	Count, Error float64
}

// Guaranteed returns Count − Error, the part of the count that is surely
// the key's.
func (e Entry) Guaranteed() float64 { return e.Count - e.Error }

// Sketch is a Space-Saving top-K sketch with counts halved every half
// life (see the package doc). It is not safe for concurrent use.
type Sketch struct {
	k        int
	halfLife time.Duration
	start    time.Time
	period   int64 // the halvings applied so far
	counters []Entry
	index    map[string]int // key → position in counters
}

// NewSketch returns a Sketch of k counters (DefaultCounters when k <= 0)
// halving its counts every halfLife (HalfLife when <= 0), from start.
func NewSketch(k int, halfLife time.Duration, start time.Time) *Sketch {
	if k <= 0 {
		k = DefaultCounters
	}
	if halfLife <= 0 {
		halfLife = HalfLife
	}
	return &Sketch{k: k, halfLife: halfLife, start: start, counters: make([]Entry, 0, k), index: make(map[string]int, k)}
}

// Add counts key once at now.
func (s *Sketch) Add(now time.Time, key string) {
	s.decay(now)
	if i, ok := s.index[key]; ok {
		s.counters[i].Count++
		return
	}
	if len(s.counters) < s.k {
		s.index[key] = len(s.counters)
		s.counters = append(s.counters, Entry{Key: key, Count: 1})
		return
	}
	m := 0
	for i, c := range s.counters {
		if c.Count < s.counters[m].Count {
			m = i
		}
	}
	low := s.counters[m]
	delete(s.index, low.Key)
	s.index[key] = m
	s.counters[m] = Entry{Key: key, Count: low.Count + 1, Error: low.Count}
}

// Top returns at most n entries at now, by guaranteed count (then count,
// then key) from the largest, leaving out those whose guaranteed count is
// not positive.
func (s *Sketch) Top(now time.Time, n int) []Entry {
	s.decay(now)
	out := make([]Entry, 0, len(s.counters))
	for _, c := range s.counters {
		if c.Guaranteed() > 0 {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		if c := cmp.Compare(b.Guaranteed(), a.Guaranteed()); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Key, b.Key)
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// Len returns the counters in use, at most K.
func (s *Sketch) Len() int { return len(s.counters) }

// decay applies the halvings due at now: one per half life since start
// that is not applied yet. Counts that reach 0 keep their counter, the
// first to be replaced.
func (s *Sketch) decay(now time.Time) {
	p := int64(now.Sub(s.start) / s.halfLife)
	if p <= s.period {
		return
	}
	f := math.Ldexp(1, -int(min(p-s.period, 1100)))
	s.period = p
	for i := range s.counters {
		s.counters[i].Count *= f
		s.counters[i].Error *= f
	}
}
