package scheduler

import (
	"math"
	"net/netip"
	"sync"
	"time"
)

// The defaults of ScopeRatesConfig and the calibration's gains.
const (
	// defaultMaxScopes bounds the scopes a ScopeRates remembers.
	defaultMaxScopes = 1 << 16
	// defaultScopeHalfLife is the half-life of the decaying counters.
	defaultScopeHalfLife = 5 * time.Minute
	// defaultRatePerCachedAnswer is k, the assumed request rate (requests
	// per second) behind one cached copy of an answer while no load
	// report says better.
	defaultRatePerCachedAnswer = 1
	// calibrationGain is η, the damping of the calibration: a report
	// moves a scope's estimate by the report's ratio of seen to predicted
	// requests to the power η × the scope's exposure.
	calibrationGain = 0.15
	// stepGain is μ, the damping of the step equation: the change between
	// two reports of a member, not explained by the estimates of the
	// scopes that came or went, is shared among them in proportion to
	// their change of exposure, times μ.
	stepGain = 1
)

// MaxTrackedMembers is the number of members per group whose answers a
// ScopeRates attributes to scopes (member indexes 0..63). Answers that
// name members beyond it still count, but reports of those members do not
// calibrate the scopes.
const MaxTrackedMembers = 64

// Bounds of one calibration step and of an estimate.
const (
	maxCalibrationRatio = 4    // a report's seen/predicted ratio is clamped to [1/4, 4]
	minScopeRate        = 1e-3 // requests per second
	maxScopeRate        = 1e9
	restoredFor         = 2 * time.Minute // a restored group total stands in this long
	stepDrift           = 0.003           // per calibrating report, of a scope's rate: its standard deviation's growth
)

// ScopeEntryBytes is about the memory of one remembered scope: a 184-byte
// slot of the LRU table (a 32-byte netip.Prefix, the copies counter, the
// estimate and its variance, the last two answers of each address family,
// the links), allocated by NewScopeRates, plus 40-byte map slots (key and
// index) with their control bytes, of which the map holds between 8/7 and
// 16/7 per scope depending on how MaxScopes rounds to its table size, plus
// a 12-byte reference in the list of each member its answers name
// (allocated as the lists grow). Measured: 305 bytes at the default bound
// of 2¹⁶ scopes with 2-member answers, about 19 MiB.
const ScopeEntryBytes = 304

// ScopeRatesConfig configures NewScopeRates; zero fields take the defaults.
type ScopeRatesConfig struct {
	// MaxScopes is the most scopes remembered; the least recently seen
	// one is forgotten to make room.
	MaxScopes int

	// halfLife (tests only) is the half-life of the decaying copies
	// counters; several maximum TTLs is a good value.
	halfLife time.Duration
	// ratePerCachedAnswer (tests only) is k, the assumed request rate
	// behind one cached copy of an answer while no member has reported
	// (see the package documentation).
	ratePerCachedAnswer float64
}

// ScopeRates estimates the request rate r̂ₛ behind each client scope s (a
// resolver's address as a /32 or /128, or an EDNS Client Subnet) and in
// total. It remembers, per scope, the last two answers of each address
// family (which members, when, for how long), so that it knows which
// scopes sent clients to which member during each load report's window,
// and calibrates the estimates from the reports' group request rates (see
// the package documentation, "Hidden load and the adaptive TTL"). Without
// such reports it falls back to counting cached copies. It keeps an LRU
// table of fixed size, so its memory is bounded (MaxScopes ×
// ScopeEntryBytes) and mostly allocated up front. It is safe for
// concurrent use; the clock is passed in.
type ScopeRates struct {
	k        float64 // requests per second per cached copy
	halfLife float64 // seconds

	mu    sync.Mutex
	epoch time.Time // times are nanoseconds since epoch
	set   bool      // epoch is set
	index map[netip.Prefix]int32
	slots []scopeSlot
	head  int32 // most recently seen, -1 when empty
	tail  int32 // least recently seen, -1 when empty
	total decaying

	members    []memberCal // by member index, < MaxTrackedMembers
	memberSums memberSums  // of members' reports (sums)
	rateSum    float64     // Σ r̂ₛ over the slots with an estimate
	rated      int         // slots with an estimate
	errEWMA    float64     // calibration error, exponentially averaged
	errSet     bool
	scratch    []exposed // of Report

	restoredTotal float64 // the group total of a restored state
	restoredCal   bool
	restoredUntil int64
}

// scopeSlot is one remembered scope, linked in recency order.
type scopeSlot struct {
	key    netip.Prefix
	c      decaying        // Σ TTL, for the copies in cache
	rate   float64         // r̂ₛ, requests per second; 0: none yet
	v      float64         // its variance, (requests per second)²
	ans    [2][2]answerRec // by family: the current answer, the previous one
	listed uint64          // members whose touch list holds this slot
	gen    uint32          // changes when the slot is reused
	prev   int32           // recency links
	next   int32
}

// answerRec is one answer remembered for a scope: when it was given (ns
// since epoch), for how long, and the members it named.
type answerRec struct {
	at   int64
	mask uint64 // members named, by index
	ttl  uint32
	n    uint16 // members named, 0: no answer
}

// end returns when the answer stopped being used: its expiry, or the next
// answer of the family (at next, 0 for none), whichever is first.
func (a answerRec) end(next int64) int64 {
	e := a.at + int64(a.ttl)*1e9
	if next != 0 && next < e {
		return next
	}
	return e
}

// memberCal is what the calibration keeps of one member.
type memberCal struct {
	r, g     float64 // last reported requests per second, of them on the group name
	reported bool
	hasG     bool          // reported group requests at least once: a mirror that says them
	at       int64         // the last calibrating report's time
	w        time.Duration // and window
	touch    []scopeRef
	// pred is Ĝ of the last calibrating report, what this node's scopes
	// explain of g (Explained); remote what the other nodes of an NS set
	// said theirs explain (SetRemoteExplained); own this node's part of
	// g at that report (ownShare).
	pred, remote, own float64
}

// scopeRef names a slot in a member's touch list, with the scope's
// exposure to the member at the member's last report.
type scopeRef struct {
	slot int32
	gen  uint32
	a    float32
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

// advance decays the sum to t (a later t), so that value at t costs no
// exponential however often an answer reads it.
func (d *decaying) advance(t int64, halfLife float64) {
	if t > d.at {
		d.v, d.at = d.value(t, halfLife), t
	}
}

// add adds x at t.
func (d *decaying) add(x float64, t int64, halfLife float64) {
	d.v = d.value(t, halfLife) + x
	d.at = max(d.at, t)
}

// NewScopeRates returns an empty ScopeRates.
func NewScopeRates(c ScopeRatesConfig) *ScopeRates {
	if c.MaxScopes <= 0 {
		c.MaxScopes = defaultMaxScopes
	}
	if c.halfLife <= 0 {
		c.halfLife = defaultScopeHalfLife
	}
	if !(c.ratePerCachedAnswer > 0) || math.IsInf(c.ratePerCachedAnswer, 0) {
		c.ratePerCachedAnswer = defaultRatePerCachedAnswer
	}
	return &ScopeRates{
		k:        c.ratePerCachedAnswer,
		halfLife: c.halfLife.Seconds(),
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

// setRate sets sl's estimate, keeping the sum behind the prior; the caller
// holds mu.
func (s *ScopeRates) setRate(sl *scopeSlot, r float64) {
	if sl.rate > 0 {
		s.rateSum -= sl.rate
		s.rated--
	}
	if sl.rate <= 0 && r > 0 {
		sl.v = r * r // a prior: as uncertain as it is large
	}
	sl.rate = r
	if r > 0 {
		s.rateSum += r
		s.rated++
	}
	if s.rated == 0 {
		s.rateSum = 0
	}
}

// Rate returns the estimated request rate behind scope at now, 0 for a
// scope not remembered. It does not change the recency order.
func (s *ScopeRates) Rate(scope netip.Prefix, now time.Time) float64 {
	scope = scope.Masked()
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[scope]
	if !ok {
		return 0
	}
	return s.rateOf(&s.slots[i], s.ns(now))
}

// Total returns the group's estimated request rate at now (see Answer's
// ScopeAnswered.Total), including that of forgotten scopes.
func (s *ScopeRates) Total(now time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groupTotal(s.ns(now))
}

// Len returns the number of scopes remembered.
func (s *ScopeRates) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.index)
}
