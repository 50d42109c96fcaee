package scheduler

import (
	"math"
	"math/bits"
	"net/netip"
	"time"
)

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
	s.total.advance(t, s.halfLife)
	var r ScopeAnswered
	if ok {
		s.slots[i].c.advance(t, s.halfLife)
		r = s.peek(&s.slots[i], a, t)
	} else {
		r = s.peek(nil, a, t)
	}
	s.total.add(float64(r.TTL), t, s.halfLife)
	if ok {
		s.unlink(i)
	} else {
		i = s.freeSlot()
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
