package scheduler

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// Defaults of ScopeRatesConfig.
const (
	// DefaultMaxScopes bounds the scopes a ScopeRates remembers.
	DefaultMaxScopes = 1 << 16
	// DefaultScopeHalfLife is the half-life of the decaying counters.
	DefaultScopeHalfLife = 5 * time.Minute
	// DefaultRatePerCachedAnswer is the assumed request rate (requests per
	// second) behind one cached copy of an answer.
	DefaultRatePerCachedAnswer = 1
)

// ScopeEntryBytes is about the memory of one remembered scope, all of it
// allocated by NewScopeRates: a 56-byte slot of the LRU table (a 32-byte
// netip.Prefix, the counter, the links) plus 40-byte map slots (key and
// index) with their control bytes, of which the map holds between 8/7 and
// 16/7 per scope depending on how MaxScopes rounds to its table size.
// Measured: 152 bytes at the default bound of 2¹⁶ scopes, about 9.5 MiB.
const ScopeEntryBytes = 152

// ScopeRatesConfig configures NewScopeRates; zero fields take the defaults.
type ScopeRatesConfig struct {
	// MaxScopes is the most scopes remembered; the least recently seen
	// one is forgotten to make room.
	MaxScopes int
	// HalfLife is the half-life of the decaying counters; several maximum
	// TTLs is a good value.
	HalfLife time.Duration
	// RatePerCachedAnswer is k, the assumed request rate behind one cached
	// copy of an answer (see the package documentation).
	RatePerCachedAnswer float64
}

// ScopeRates estimates the request rate behind each client scope (a
// resolver's address as a /32 or /128, or an EDNS Client Subnet) and in
// total, from the queries dnsd sees and the TTLs it gives them. It keeps an
// exponentially decaying counter per scope in an LRU table of fixed size,
// so its memory is bounded (MaxScopes × ScopeEntryBytes) and allocated up
// front. It is safe for concurrent use; the clock is passed in.
type ScopeRates struct {
	k        float64 // RatePerCachedAnswer
	halfLife float64 // seconds

	mu    sync.Mutex
	epoch time.Time // counter times are nanoseconds since epoch
	set   bool      // epoch is set
	index map[netip.Prefix]int32
	slots []scopeSlot
	head  int32 // most recently seen, -1 when empty
	tail  int32 // least recently seen, -1 when empty
	total decaying
}

// scopeSlot is one remembered scope, linked in recency order.
type scopeSlot struct {
	key        netip.Prefix
	c          decaying
	prev, next int32
}

// decaying is an exponentially decaying sum.
type decaying struct {
	v  float64
	at int64 // ns since epoch
}

// value returns the sum at t (ns since epoch).
func (d decaying) value(t int64, halfLife float64) float64 {
	if dt := float64(t-d.at) / 1e9; dt > 0 {
		return d.v * math.Exp2(-dt/halfLife)
	}
	return d.v
}

// add adds x at t.
func (d *decaying) add(x float64, t int64, halfLife float64) {
	d.v = d.value(t, halfLife) + x
	d.at = max(d.at, t)
}

// NewScopeRates returns an empty ScopeRates.
func NewScopeRates(c ScopeRatesConfig) *ScopeRates {
	if c.MaxScopes <= 0 {
		c.MaxScopes = DefaultMaxScopes
	}
	if c.HalfLife <= 0 {
		c.HalfLife = DefaultScopeHalfLife
	}
	if !(c.RatePerCachedAnswer > 0) || math.IsInf(c.RatePerCachedAnswer, 0) {
		c.RatePerCachedAnswer = DefaultRatePerCachedAnswer
	}
	return &ScopeRates{
		k:        c.RatePerCachedAnswer,
		halfLife: c.HalfLife.Seconds(),
		index:    make(map[netip.Prefix]int32, c.MaxScopes),
		slots:    make([]scopeSlot, 0, c.MaxScopes),
		head:     -1,
		tail:     -1,
	}
}

// ns converts now to nanoseconds since the epoch, setting it on first use;
// the caller holds mu.
func (s *ScopeRates) ns(now time.Time) int64 {
	if !s.set {
		s.epoch, s.set = now, true
	}
	return int64(now.Sub(s.epoch))
}

// Observe records a query from scope answered at now with ttl seconds and
// returns the scope's estimated request rate afterwards (requests per
// second). The scope becomes the most recently seen; if it is new and the
// table is full, the least recently seen scope is forgotten (the total
// keeps its queries).
func (s *ScopeRates) Observe(scope netip.Prefix, ttl uint32, now time.Time) float64 {
	scope = scope.Masked()
	x := float64(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ns(now)
	s.total.add(x, t, s.halfLife)
	i, ok := s.index[scope]
	switch {
	case ok:
		s.unlink(i)
	case len(s.slots) < cap(s.slots):
		i = int32(len(s.slots))
		s.slots = append(s.slots, scopeSlot{})
	default:
		i = s.tail
		s.unlink(i)
		delete(s.index, s.slots[i].key)
	}
	if !ok {
		s.slots[i] = scopeSlot{key: scope}
		s.index[scope] = i
	}
	sl := &s.slots[i]
	sl.c.add(x, t, s.halfLife)
	s.pushFront(i)
	return s.rate(sl.c.value(t, s.halfLife))
}

// rate converts a decayed TTL sum into a request rate: the sum's mean rate
// (sum × ln 2 / half-life) is the average number of cached copies, times k.
func (s *ScopeRates) rate(sum float64) float64 { return sum * math.Ln2 / s.halfLife * s.k }

// Rate returns the estimated request rate behind scope at now, 0 for a scope
// not remembered. It does not change the recency order.
func (s *ScopeRates) Rate(scope netip.Prefix, now time.Time) float64 {
	scope = scope.Masked()
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[scope]
	if !ok {
		return 0
	}
	return s.rate(s.slots[i].c.value(s.ns(now), s.halfLife))
}

// Total returns the estimated request rate behind all queries at now,
// including those of forgotten scopes.
func (s *ScopeRates) Total(now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rate(s.total.value(s.ns(now), s.halfLife))
}

// Share returns scope's share of the total rate at now (0..1), the input of
// TTL; 0 while nothing is known.
func (s *ScopeRates) Share(scope netip.Prefix, now time.Time) float64 {
	scope = scope.Masked()
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[scope]
	if !ok {
		return 0
	}
	t := s.ns(now)
	total := s.total.value(t, s.halfLife)
	if total <= 0 {
		return 0
	}
	return min(1, s.slots[i].c.value(t, s.halfLife)/total)
}

// Len returns the number of scopes remembered.
func (s *ScopeRates) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.index)
}

// unlink takes slot i out of the recency list.
func (s *ScopeRates) unlink(i int32) {
	sl := &s.slots[i]
	if sl.prev >= 0 {
		s.slots[sl.prev].next = sl.next
	} else {
		s.head = sl.next
	}
	if sl.next >= 0 {
		s.slots[sl.next].prev = sl.prev
	} else {
		s.tail = sl.prev
	}
	sl.prev, sl.next = -1, -1
}

// pushFront makes slot i the most recently seen.
func (s *ScopeRates) pushFront(i int32) {
	sl := &s.slots[i]
	sl.prev, sl.next = -1, s.head
	if s.head >= 0 {
		s.slots[s.head].prev = i
	}
	s.head = i
	if s.tail < 0 {
		s.tail = i
	}
}

// ScopeKey returns a stable 64-bit hash of a client scope for Client.Key:
// the same prefix gives the same key in every process and release, so the
// hash policy keeps a scope on its member across restarts and replicas.
func ScopeKey(scope netip.Prefix) uint64 {
	scope = scope.Masked()
	a := scope.Addr().As16()
	h := uint64(14695981039346656037)
	for _, b := range a {
		h ^= uint64(b)
		h *= 1099511628211
	}
	h ^= uint64(scope.Bits()+1) | boolBit(scope.Addr().Is4())<<8
	h *= 1099511628211
	return mix64(h)
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
