package scheduler

import (
	"math"
	"math/bits"
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
	// second) behind one cached copy of an answer while no load report
	// says better.
	DefaultRatePerCachedAnswer = 1
	// DefaultCalibrationGain is η, the damping of the calibration: a
	// report moves a scope's estimate by the report's ratio of seen to
	// predicted requests to the power η × the scope's exposure.
	DefaultCalibrationGain = 0.15
	// DefaultStepGain is μ, the damping of the step equation: the change
	// between two reports of a member, not explained by the estimates of
	// the scopes that came or went, is shared among them in proportion
	// to their change of exposure, times μ.
	DefaultStepGain = 1
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
	// HalfLife is the half-life of the decaying copies counters; several
	// maximum TTLs is a good value.
	HalfLife time.Duration
	// RatePerCachedAnswer is k, the assumed request rate behind one cached
	// copy of an answer while no member has reported (see the package
	// documentation).
	RatePerCachedAnswer float64
	// Gain is η of the calibration (DefaultCalibrationGain when 0; at
	// most 1) and StepGain μ of its step equation (DefaultStepGain when
	// 0; at most 1).
	Gain, StepGain float64
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
	k        float64 // RatePerCachedAnswer
	halfLife float64 // seconds
	gain     float64
	stepGain float64

	mu    sync.Mutex
	epoch time.Time // times are nanoseconds since epoch
	set   bool      // epoch is set
	index map[netip.Prefix]int32
	slots []scopeSlot
	head  int32 // most recently seen, -1 when empty
	tail  int32 // least recently seen, -1 when empty
	total decaying

	members []memberCal // by member index, < MaxTrackedMembers
	rateSum float64     // Σ r̂ₛ over the slots with an estimate
	rated   int         // slots with an estimate
	errEWMA float64     // calibration error, exponentially averaged
	errSet  bool
	scratch []exposed // of Report

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
}

// scopeRef names a slot in a member's touch list, with the scope's
// exposure to the member at the member's last report.
type scopeRef struct {
	slot int32
	gen  uint32
	a    float32
}

// exposed is one scope's exposure to a member over a report window, and
// its change since the member's previous report.
type exposed struct {
	slot  int32
	a, da float64
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
	if !(c.Gain > 0) || c.Gain > 1 {
		c.Gain = DefaultCalibrationGain
	}
	if !(c.StepGain > 0) || c.StepGain > 1 {
		c.StepGain = DefaultStepGain
	}
	return &ScopeRates{
		k:        c.RatePerCachedAnswer,
		halfLife: c.HalfLife.Seconds(),
		gain:     c.Gain,
		stepGain: c.StepGain,
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

// ScopeAnswer is one answer to a scope, as Answer records it, and the
// bounds of its TTL.
type ScopeAnswer struct {
	// Family is the answer's address family: 0 for A, 1 for AAAA.
	Family int
	// Members are the members named, as a set of member indexes (bit i
	// for member i < MaxTrackedMembers), and N how many were named.
	Members uint64
	N       int
	// Min and Max bound the TTL; Unseen is the TTL of a scope never seen
	// before (clamped to the bounds; 0 means Min).
	Min, Max, Unseen uint32
	// Fair is n, the number of members the group's traffic is shared by
	// (those that are up); the TTL compares a scope with one member's
	// fair share of the total. At least 1.
	Fair int
}

// ScopeAnswered is what Answer and Peek say of an answer to a scope.
type ScopeAnswered struct {
	// TTL is the answer's adaptive TTL.
	TTL uint32
	// Rate is r̂ₛ, the scope's estimated request rate (requests per
	// second), and Total the group's.
	Rate, Total float64
	// X is the scope's rate in units of one member's fair share,
	// Rate / (Total / Fair), the input of TTL.
	X float64
	// Copies is oₛ, the mean number of copies of the group's answers the
	// scope held in cache (see AnswerRate).
	Copies float64
	// Seen: the scope was remembered before this answer; an unseen one
	// gets the Unseen TTL.
	Seen bool
	// Calibrated: Rate comes from the members' reports of group requests,
	// not from the count of cached copies.
	Calibrated bool
	// Prev is the previous answer of the family to this scope (Members,
	// N), when there was one (PrevN > 0), and PrevEnd when its clients
	// stopped using it: its expiry or now, whichever is first.
	Prev    uint64
	PrevN   int
	PrevEnd time.Time
}

// Answer computes the adaptive TTL of an answer to scope at now from what
// is known before it, records the answer with that TTL and returns what it
// knew, in one lock round trip. The scope becomes the most recently seen;
// if it is new and the table is full, the least recently seen scope is
// forgotten (the total keeps its queries).
func (s *ScopeRates) Answer(scope netip.Prefix, a ScopeAnswer, now time.Time) ScopeAnswered {
	scope = scope.Masked()
	fam := a.Family & 1
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ns(now)
	i, ok := s.index[scope]
	var r ScopeAnswered
	if ok {
		r = s.peek(&s.slots[i], a, t)
	} else {
		r = s.peek(nil, a, t)
	}
	s.total.add(float64(r.TTL), t, s.halfLife)
	switch {
	case ok:
		s.unlink(i)
	case len(s.slots) < cap(s.slots):
		i = int32(len(s.slots))
		s.slots = append(s.slots, scopeSlot{gen: 1})
	default:
		i = s.tail
		s.unlink(i)
		s.forget(i)
	}
	sl := &s.slots[i]
	if !ok {
		*sl = scopeSlot{key: scope, gen: sl.gen + 1}
		s.index[scope] = i
		if r.Calibrated {
			s.setRate(sl, r.Rate)
		}
	}
	sl.c.add(float64(r.TTL), t, s.halfLife)
	s.pushFront(i)

	f := &sl.ans[fam]
	if p := f[0]; p.n > 0 {
		r.Prev, r.PrevN = p.mask, int(p.n)
		r.PrevEnd = s.epoch.Add(time.Duration(min(p.end(0), t)))
	}
	mask := a.Members
	f[1], f[0] = f[0], answerRec{at: t, mask: mask, ttl: r.TTL, n: uint16(min(a.N, math.MaxUint16))}
	for m := mask &^ sl.listed; m != 0; m &= m - 1 {
		j := bits.TrailingZeros64(m)
		s.touch(j, i, t)
	}
	sl.listed |= mask
	return r
}

// Peek is Answer without recording anything: what an answer to scope at
// now would get.
func (s *ScopeRates) Peek(scope netip.Prefix, a ScopeAnswer, now time.Time) ScopeAnswered {
	scope = scope.Masked()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ns(now)
	if i, ok := s.index[scope]; ok {
		return s.peek(&s.slots[i], a, t)
	}
	return s.peek(nil, a, t)
}

// peek computes the answer to slot sl (nil: an unseen scope); the caller
// holds mu.
func (s *ScopeRates) peek(sl *scopeSlot, a ScopeAnswer, t int64) ScopeAnswered {
	lo, hi := min(a.Min, a.Max), max(a.Min, a.Max)
	r := ScopeAnswered{Calibrated: s.calibrated(t), Total: s.groupTotal(t), Seen: sl != nil}
	if sl == nil {
		r.Rate = s.prior(t)
		r.TTL = min(max(a.Unseen, lo), hi)
	} else {
		r.Rate = s.rateOf(sl, t)
		r.Copies = s.copies(sl.c.value(t, s.halfLife))
	}
	if r.Total > 0 {
		r.X = r.Rate / (r.Total / float64(max(a.Fair, 1)))
	}
	if sl != nil {
		r.TTL = TTL(r.X, lo, hi)
	}
	return r
}

// touch adds slot i to member j's touch list; the caller holds mu.
func (s *ScopeRates) touch(j int, i int32, t int64) {
	if j >= len(s.members) {
		s.members = append(s.members, make([]memberCal, j+1-len(s.members))...)
	}
	m := &s.members[j]
	if len(m.touch) >= 2*cap(s.slots)+64 {
		s.compact(j, t-int64(MaxReportWindow))
	}
	m.touch = append(m.touch, scopeRef{slot: i, gen: s.slots[i].gen})
}

// compact drops from member j's touch list the slots reused since and
// those whose answers to j all ended before from; the caller holds mu.
func (s *ScopeRates) compact(j int, from int64) {
	m := &s.members[j]
	keep := m.touch[:0]
	for _, ref := range m.touch {
		sl := &s.slots[ref.slot]
		if sl.gen != ref.gen {
			continue
		}
		if lastEnd(sl, j) < from {
			sl.listed &^= 1 << j
			continue
		}
		keep = append(keep, ref)
	}
	clear(m.touch[len(keep):])
	m.touch = keep
}

// lastEnd returns when the last of sl's remembered answers naming member
// j stopped being used (0 for none).
func lastEnd(sl *scopeSlot, j int) int64 {
	var e int64
	for f := range sl.ans {
		cur, prev := sl.ans[f][0], sl.ans[f][1]
		if cur.n > 0 && cur.mask&(1<<j) != 0 {
			e = max(e, cur.end(0))
		}
		if prev.n > 0 && prev.mask&(1<<j) != 0 {
			e = max(e, prev.end(cur.at))
		}
	}
	return e
}

// forget clears slot i for reuse; the caller holds mu.
func (s *ScopeRates) forget(i int32) {
	sl := &s.slots[i]
	delete(s.index, sl.key)
	s.setRate(sl, 0)
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

// calibrated reports whether the estimates come from reports of group
// requests; the caller holds mu.
func (s *ScopeRates) calibrated(t int64) bool {
	for i := range s.members {
		if s.members[i].hasG {
			return true
		}
	}
	return s.restoredCal && s.restoredTotal > 0 && t < s.restoredUntil
}

// groupTotal returns the group's request rate; the caller holds mu.
// Calibrated: the sum of the members' group requests (their requests for
// members that do not report them); else the sum of the reported requests;
// with no report at all, k × the copies in cache.
func (s *ScopeRates) groupTotal(t int64) float64 {
	var sum float64
	reported := false
	for i := range s.members {
		m := &s.members[i]
		switch {
		case m.hasG:
			sum += m.g
		case m.reported:
			sum += m.r
		}
		reported = reported || m.reported
	}
	if s.restoredTotal > 0 && t < s.restoredUntil {
		sum = max(sum, s.restoredTotal)
		reported = true
	}
	if !reported {
		return s.k * s.copies(s.total.value(t, s.halfLife))
	}
	return sum
}

// copies converts a decayed TTL sum into the mean number of copies in
// cache: sum × ln 2 / half-life.
func (s *ScopeRates) copies(sum float64) float64 { return sum * math.Ln2 / s.halfLife }

// prior is the estimate a scope starts from: the mean estimate of the
// scopes that have one, else the group total over the scopes remembered,
// else (no report) k; the caller holds mu.
func (s *ScopeRates) prior(t int64) float64 {
	if s.rated > 0 {
		return s.rateSum / float64(s.rated)
	}
	if s.calibrated(t) {
		if n := len(s.index); n > 0 {
			return max(s.groupTotal(t)/float64(n), minScopeRate)
		}
		return max(s.groupTotal(t), minScopeRate)
	}
	return s.k
}

// rateOf returns slot sl's estimated request rate; the caller holds mu.
// Calibrated: its estimate (the prior until it has one); else the copies it
// holds in cache times k, with k = total / copies of all scopes once the
// members have reported (Σ reported r over Σ copies).
func (s *ScopeRates) rateOf(sl *scopeSlot, t int64) float64 {
	if s.calibrated(t) {
		if sl.rate > 0 {
			return sl.rate
		}
		return s.prior(t)
	}
	own := s.copies(sl.c.value(t, s.halfLife))
	all := s.copies(s.total.value(t, s.halfLife))
	if all <= 0 {
		return 0
	}
	return own / all * s.groupTotal(t)
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

// Calibrated reports whether the estimates come from the members' reports
// of group requests (or a restored state that did), not from counting
// cached copies.
func (s *ScopeRates) Calibrated(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calibrated(s.ns(now))
}

// CalibrationError returns the calibration's recent relative error: the
// exponential average (over about ten reports) of |G − Ĝ| / max(G, Ĝ),
// with G a member's reported group requests and Ĝ what the estimates of
// the scopes that sent clients to it predicted; ok is false before any
// such report.
func (s *ScopeRates) CalibrationError() (ratio float64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errEWMA, s.errSet
}

// Len returns the number of scopes remembered.
func (s *ScopeRates) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.index)
}

// MemberReport is what a load report of one member says, for calibration.
type MemberReport struct {
	// Requests is the member's requests per second (r) and
	// GroupRequests those that came in on the group name, sent by DNS
	// answers (0: the member does not say, unless it said before).
	Requests, GroupRequests float64
	// Window is the report's window (DefaultReportWindow when ≤ 0, at
	// most MaxReportWindow) and At the end of the window, on the
	// ScopeRates' clock.
	Window time.Duration
	At     time.Time
}

// Report takes a load report of member (its index; members ≥
// MaxTrackedMembers and negative ones are ignored). Once a member has
// reported group requests, each of its reports calibrates the scopes whose
// answers named it during the report's window [At − W, At]: with aₛ ∈
// [0, 1] the fraction of the window during which s's answer named it
// (divided by the members the answer named, and by two while both address
// families' answers were in use), the prediction is Ĝ = Σ aₛ·r̂ₛ and each
// estimate moves as r̂ₛ ← r̂ₛ · (G/Ĝ)^(η·aₛ), the ratio clamped to [1/4, 4].
// The cost is proportional to the scopes in the member's list.
func (s *ScopeRates) Report(member int, rep MemberReport) {
	if member < 0 || member >= MaxTrackedMembers {
		return
	}
	w := rep.Window
	if w <= 0 {
		w = DefaultReportWindow
	}
	w = min(w, MaxReportWindow)
	s.mu.Lock()
	defer s.mu.Unlock()
	if member >= len(s.members) {
		s.members = append(s.members, make([]memberCal, member+1-len(s.members))...)
	}
	t := s.ns(rep.At)
	m := &s.members[member]
	prevG, prevAt, prevW, had := m.g, m.at, m.w, m.hasG
	m.r, m.g, m.reported = sane(rep.Requests), sane(rep.GroupRequests), true
	if m.g > 0 {
		m.hasG = true
	}
	if !m.hasG {
		return
	}
	m.at, m.w = t, w
	// The step from the previous report is worth its own equation when
	// the two windows overlap: ΔG = Σ Δaₛ·rₛ names only the scopes that
	// came or went.
	step := had && prevW == w && t > prevAt && t-prevAt < int64(w)
	from := t - int64(w)
	prior := s.prior(t)
	sc := s.scratch[:0]
	var predicted, dpred, dnorm float64
	for k := 0; k < len(m.touch); {
		ref := &m.touch[k]
		sl := &s.slots[ref.slot]
		if sl.gen != ref.gen {
			m.touch[k] = m.touch[len(m.touch)-1]
			m.touch = m.touch[:len(m.touch)-1]
			continue
		}
		a := exposure(sl, member, from, t)
		da := a - float64(ref.a)
		ref.a = float32(a)
		if a > 0 || da != 0 {
			if sl.rate <= 0 {
				s.setRate(sl, prior)
			}
			sc = append(sc, exposed{slot: ref.slot, a: a, da: da})
			predicted += a * sl.rate
			dpred += da * sl.rate
			dnorm += da * da
		}
		if lastEnd(sl, member) < from {
			sl.listed &^= 1 << member
			m.touch[k] = m.touch[len(m.touch)-1]
			m.touch = m.touch[:len(m.touch)-1]
			continue
		}
		k++
	}
	s.scratch = sc
	if predicted <= 0 {
		return
	}
	e := math.Abs(m.g-predicted) / max(m.g, predicted)
	if s.errSet {
		s.errEWMA += 0.1 * (e - s.errEWMA)
	} else {
		s.errEWMA, s.errSet = e, true
	}
	ratio := min(max(m.g/predicted, 1.0/maxCalibrationRatio), maxCalibrationRatio)
	lr := math.Log(ratio) * s.gain
	// The step equation, a Kalman update with each scope's variance vₛ
	// and the Poisson noise of the step (the requests that entered and
	// left the window, 2·G·Δt/W²): S = Σ vₛ·Δaₛ² + noise, and each scope
	// takes μ·vₛ·Δaₛ/S of what the estimates do not explain.
	var resid, sv float64
	if step && dnorm > 0 {
		var pd2 float64
		for _, x := range sc {
			pd2 += s.slots[x.slot].v * x.da * x.da
		}
		ws := w.Seconds()
		noise := (m.g + prevG) * float64(t-prevAt) / 1e9 / (ws * ws)
		resid, sv = (m.g-prevG)-dpred, pd2+max(noise, 1e-9)
	}
	for _, x := range sc {
		sl := &s.slots[x.slot]
		r := sl.rate
		if sv > 0 && x.da != 0 {
			r += s.stepGain * sl.v * x.da * resid / sv
			sl.v *= max(1-s.stepGain*sl.v*x.da*x.da/sv, 0)
		}
		r *= math.Exp(lr * x.a)
		r = min(max(r, minScopeRate), maxScopeRate)
		// Drift: the variance grows back, so the estimate keeps following.
		sl.v += (stepDrift * r) * (stepDrift * r)
		s.setRate(sl, r)
	}
}

// exposure returns aₛⱼ: the fraction of [from, to] during which scope
// sl's clients were sent to member j, each answer's share split evenly
// among the members it named and, while answers of both address families
// were in use, between the families.
func exposure(sl *scopeSlot, j int, from, to int64) float64 {
	if to <= from {
		return 0
	}
	type seg struct {
		start, end int64
		share      float64 // 1/n if it names j, else 0
		fam        int
	}
	var segs [4]seg
	ns := 0
	var pts [10]int64
	np := 0
	pts[np], pts[np+1] = from, to
	np += 2
	for f := range sl.ans {
		cur, prev := sl.ans[f][0], sl.ans[f][1]
		for k, a := range [2]answerRec{cur, prev} {
			if a.n == 0 {
				continue
			}
			next := int64(0)
			if k == 1 {
				next = cur.at
			}
			sg := seg{start: a.at, end: a.end(next), fam: f}
			if sg.end <= from || sg.start >= to || sg.end <= sg.start {
				continue
			}
			if a.mask&(1<<j) != 0 {
				sg.share = 1 / float64(a.n)
			}
			segs[ns] = sg
			ns++
			for _, p := range [2]int64{sg.start, sg.end} {
				if p > from && p < to {
					pts[np] = p
					np++
				}
			}
		}
	}
	if ns == 0 {
		return 0
	}
	ps := pts[:np]
	for a := 1; a < len(ps); a++ { // insertion sort: at most 10 points
		for b := a; b > 0 && ps[b] < ps[b-1]; b-- {
			ps[b], ps[b-1] = ps[b-1], ps[b]
		}
	}
	var sum float64
	for k := 0; k+1 < len(ps); k++ {
		lo, hi := ps[k], ps[k+1]
		if hi <= lo {
			continue
		}
		mid := lo + (hi-lo)/2
		var live [2]bool
		var share [2]float64
		for _, sg := range segs[:ns] {
			if sg.start <= mid && mid < sg.end {
				live[sg.fam] = true
				share[sg.fam] += sg.share
			}
		}
		fams := 0
		for _, l := range live {
			if l {
				fams++
			}
		}
		if fams == 0 {
			continue
		}
		sum += float64(hi-lo) * (share[0] + share[1]) / float64(fams)
	}
	return min(sum/float64(to-from), 1)
}

// Remap follows a change of the group's member list: to[i] is the new
// index of the member that had index i (−1: removed). Reports and answers
// remembered of removed members are forgotten. It costs one pass over the
// scopes remembered.
func (s *ScopeRates) Remap(to []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	remap := func(mask uint64) uint64 {
		var out uint64
		for m := mask; m != 0; m &= m - 1 {
			i := bits.TrailingZeros64(m)
			if i < len(to) && to[i] >= 0 && to[i] < MaxTrackedMembers {
				out |= 1 << to[i]
			}
		}
		return out
	}
	var members []memberCal
	for i, m := range s.members {
		if i < len(to) && to[i] >= 0 && to[i] < MaxTrackedMembers {
			if to[i] >= len(members) {
				members = append(members, make([]memberCal, to[i]+1-len(members))...)
			}
			members[to[i]] = memberCal{r: m.r, g: m.g, reported: m.reported, hasG: m.hasG}
		}
	}
	s.members = members
	for i := range s.slots {
		sl := &s.slots[i]
		sl.listed = 0 // every slot is in use: slots are only reused by eviction
		for f := range sl.ans {
			for k := range sl.ans[f] {
				sl.ans[f][k].mask = remap(sl.ans[f][k].mask)
			}
		}
		var mask uint64
		for f := range sl.ans {
			mask |= sl.ans[f][0].mask | sl.ans[f][1].mask
		}
		for m := mask; m != 0; m &= m - 1 {
			j := bits.TrailingZeros64(m)
			if j >= len(s.members) {
				s.members = append(s.members, make([]memberCal, j+1-len(s.members))...)
			}
			s.members[j].touch = append(s.members[j].touch, scopeRef{slot: int32(i), gen: sl.gen})
		}
		sl.listed = mask
	}
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

// ScopeEstimate is one scope's estimate as it is saved across restarts.
type ScopeEstimate struct {
	// Prefix is the scope.
	Prefix netip.Prefix
	// Rate is r̂ₛ in requests per second (0: none, the scope was only
	// counted) and Copies oₛ, the copies it held in cache, both as of
	// Seen, the scope's last answer.
	Rate, Copies float64
	Seen         time.Time
}

// ScopeRatesState is what a ScopeRates saves across restarts: the group's
// total and whether it was calibrated, and the scopes, least recently seen
// first.
type ScopeRatesState struct {
	Total      float64
	Calibrated bool
	Scopes     []ScopeEstimate
}

// State returns what s knows at now, for a later Restore: at most
// MaxScopes entries, least recently seen first.
func (s *ScopeRates) State(now time.Time) ScopeRatesState {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ns(now)
	st := ScopeRatesState{Total: s.groupTotal(t), Calibrated: s.calibrated(t),
		Scopes: make([]ScopeEstimate, 0, len(s.index))}
	for i := s.tail; i >= 0; i = s.slots[i].prev {
		sl := &s.slots[i]
		st.Scopes = append(st.Scopes, ScopeEstimate{
			Prefix: sl.key, Rate: sl.rate,
			Copies: s.copies(sl.c.value(sl.c.at, s.halfLife)),
			Seen:   s.epoch.Add(time.Duration(sl.c.at)),
		})
	}
	return st
}

// Restore adds the scopes of st to s, as if seen at their Seen times
// (later than now: at now), and lets st's total and calibration stand in
// for the group's for two minutes after now, until the members' reports
// have come in. Invalid prefixes and non-finite or negative figures are
// skipped; scopes already known keep what s knows. If st has more scopes
// than fit, the least recently seen are forgotten, as usual.
func (s *ScopeRates) Restore(st ScopeRatesState, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.ns(now)
	if tot := sane(st.Total); tot > 0 {
		s.restoredTotal, s.restoredCal = tot, st.Calibrated
		s.restoredUntil = t + int64(restoredFor)
	}
	for _, e := range st.Scopes {
		if !e.Prefix.IsValid() || math.IsNaN(e.Rate) || math.IsInf(e.Rate, 0) || e.Rate < 0 || math.IsNaN(e.Copies) || e.Copies < 0 {
			continue
		}
		p := e.Prefix.Masked()
		if _, ok := s.index[p]; ok {
			continue
		}
		var i int32
		if len(s.slots) < cap(s.slots) {
			i = int32(len(s.slots))
			s.slots = append(s.slots, scopeSlot{gen: 1})
		} else {
			i = s.tail
			s.unlink(i)
			s.forget(i)
		}
		sl := &s.slots[i]
		at := min(s.ns(e.Seen), t)
		*sl = scopeSlot{key: p, gen: sl.gen + 1, c: decaying{v: sane(e.Copies) * s.halfLife / math.Ln2, at: at}}
		if e.Rate > 0 {
			s.setRate(sl, min(max(e.Rate, minScopeRate), maxScopeRate))
		}
		s.index[p] = i
		s.pushFront(i)
	}
}
