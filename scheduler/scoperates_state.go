package scheduler

import (
	"math"
	"net/netip"
	"time"
)

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
		i := s.freeSlot()
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
