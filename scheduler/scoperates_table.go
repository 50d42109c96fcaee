package scheduler

import (
	"math/bits"
)

// freeSlot returns a slot for a new scope, out of the recency list: a
// fresh one while the table has room, else the least recently seen one,
// forgotten (its gen is kept, the caller bumps it). The caller holds mu.
func (s *ScopeRates) freeSlot() int32 {
	if len(s.slots) < cap(s.slots) {
		s.slots = append(s.slots, scopeSlot{gen: 1})
		return int32(len(s.slots) - 1)
	}
	i := s.tail
	s.unlink(i)
	s.forget(i)
	return i
}

// forget clears slot i for reuse; the caller holds mu.
func (s *ScopeRates) forget(i int32) {
	sl := &s.slots[i]
	delete(s.index, sl.key)
	s.setRate(sl, 0)
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
	s.memberSums.valid = false
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
