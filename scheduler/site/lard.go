package site

import (
	"math/rand/v2"
	"sync"
	"time"
)

// lardTarget is a lard target table entry: the assigned back end's name
// and where it was in bs last time.
type lardTarget struct {
	name string
	hint int
}

// lard is the locality-aware request distribution policy; see [LARD].
type lard struct {
	p       Params
	mu      sync.Mutex
	rng     *rand.Rand
	targets lru[lardTarget] // at most p.MaxTargets entries
	// moves counts the targets moved to another back end (for State).
	moves  uint64
	budget targetBudget // the new targets each client network may add
}

var _ Policy = (*lard)(nil)

func newLARD(p Params, rng *rand.Rand) *lard {
	l := &lard{p: p, rng: rng, budget: newTargetBudget(p)}
	l.targets.init()
	return l
}

func (l *lard) Name() string { return LARD }

func (l *lard) Pick(req Request, bs []Backend, now time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	least, minLoad := leastLoaded(bs, req.Has, l.rng)
	if least < 0 {
		return -1, ErrNoBackend
	}
	slot := l.targets.lookup(req.Key)
	if slot >= 0 {
		l.targets.touch(slot)
		t := &l.targets.nodes[slot].val
		i := indexOf(bs, t.name, t.hint)
		if i >= 0 && serves(bs, req.Has, i) && !overloaded(load(&bs[i]), minLoad, &l.p) {
			t.hint = i
			return i, nil
		}
		if t.name != bs[least].Name {
			l.moves++
		}
	} else {
		if !l.budget.allow(req.Client, now) {
			return untracked(&req, bs, least, minLoad, &l.p), nil
		}
		if l.targets.len() >= l.p.MaxTargets {
			l.targets.remove(l.targets.tail, true)
		}
		slot = l.targets.insert(req.Key)
	}
	l.targets.nodes[slot].val = lardTarget{name: bs[least].Name, hint: least}
	return least, nil
}

// Done does nothing: loads are the back ends' Active counts.
func (l *lard) Done(Request, string, time.Time) {}

// replicaSet is a lard-r target table entry.
type replicaSet struct {
	members []string
	changed time.Time // when members last changed
}

// lardR is LARD with replication; see [LARDR].
type lardR struct {
	p       Params
	mu      sync.Mutex
	rng     *rand.Rand
	targets lru[replicaSet] // at most p.MaxTargets entries
	// replicas is the number of members over all sets, for State.
	replicas int
	// grows counts the back ends added to an existing set (for State).
	grows  uint64
	budget targetBudget // the new targets each client network may add
}

var _ Policy = (*lardR)(nil)

func newLARDR(p Params, rng *rand.Rand) *lardR {
	l := &lardR{p: p, rng: rng, budget: newTargetBudget(p)}
	l.targets.init()
	return l
}

func (l *lardR) Name() string { return LARDR }

// Pick follows the paper's LARD/R pseudo-code:
//
//	if serverSet[target] = ∅ then n, serverSet[target] ← {least loaded node}
//	else
//	    n ← least loaded node in serverSet[target]
//	    m ← most loaded node in serverSet[target]
//	    if (n.load > T_high && ∃ node with load < T_low) || n.load ≥ 2·T_high then
//	        p ← least loaded node; add p to serverSet[target]; n ← p
//	    if |serverSet[target]| > 1 && time() − serverSet[target].lastMod > K then
//	        remove m from serverSet[target]
//	send target to n; if serverSet[target] changed, lastMod ← time()
//
// Members that are down or gone leave the set first, and so do those
// that lack the file (Request.Has): the set is the target's, and a back
// end without the target's file can not serve it.
func (l *lardR) Pick(req Request, bs []Backend, now time.Time) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	least, minLoad := leastLoaded(bs, req.Has, l.rng)
	if least < 0 {
		return -1, ErrNoBackend
	}
	slot := l.targets.lookup(req.Key)
	if slot < 0 {
		return l.add(req, bs, least, minLoad, now), nil
	}
	l.targets.touch(slot)
	s := &l.targets.nodes[slot].val
	// Runs before the deferred Unlock: s stays in place (nothing is
	// inserted below).
	before := len(s.members)
	defer func() { l.replicas += len(s.members) - before }()

	// Drop members that are down, gone or lack the file (req.Has).
	var buf [8]int
	idx := buf[:0]
	kept := s.members[:0]
	for _, name := range s.members {
		if i := indexOf(bs, name, -1); i >= 0 && serves(bs, req.Has, i) {
			kept = append(kept, name)
			idx = append(idx, i)
		}
	}
	changed := len(kept) != len(s.members)
	clear(s.members[len(kept):])
	s.members = kept
	if len(idx) == 0 {
		s.members = append(s.members, bs[least].Name)
		s.changed = now
		return least, nil
	}
	n, nLoad, m := extremes(bs, idx, l.rng)
	if overloaded(nLoad, minLoad, &l.p) && least != n && !contains(s.members, bs[least].Name) {
		s.members = append(s.members, bs[least].Name)
		n = least
		changed = true
		l.grows++
	}
	if len(s.members) > 1 && now.Sub(s.changed) > l.p.ReplicaHold {
		s.members = removeName(s.members, bs[m].Name)
		changed = true
	}
	if changed {
		s.changed = now
	}
	return n, nil
}

// add makes req's key a new target served by the least loaded back end,
// evicting the least recently used target when the table is full, unless
// the client's network has used its budget of new targets: then the
// request is dispatched without an entry (untracked).
func (l *lardR) add(req Request, bs []Backend, least int, minLoad float64, now time.Time) int {
	if !l.budget.allow(req.Client, now) {
		return untracked(&req, bs, least, minLoad, &l.p)
	}
	if l.targets.len() >= l.p.MaxTargets {
		// Keep the evicted set's slice for the new target.
		l.replicas -= len(l.targets.nodes[l.targets.tail].val.members)
		l.targets.remove(l.targets.tail, false)
	}
	slot := l.targets.insert(req.Key)
	s := &l.targets.nodes[slot].val
	s.members = append(s.members[:0], bs[least].Name)
	s.changed = now
	l.replicas++
	return least
}

// extremes returns n, the least loaded of the back ends idx, with its
// load, and m, the most loaded other one (n itself when idx has one).
// Ties are broken at random.
func extremes(bs []Backend, idx []int, rng *rand.Rand) (n int, nLoad float64, m int) {
	n, ties := -1, 0
	for _, i := range idx {
		switch ld := load(&bs[i]); {
		case n < 0 || ld < nLoad:
			n, nLoad, ties = i, ld, 1
		case ld == nLoad:
			ties++
			if rng.IntN(ties) == 0 {
				n = i
			}
		}
	}
	m, mLoad := -1, 0.0
	ties = 0
	for _, i := range idx {
		if i == n {
			continue
		}
		switch ld := load(&bs[i]); {
		case m < 0 || ld > mLoad:
			m, mLoad, ties = i, ld, 1
		case ld == mLoad:
			ties++
			if rng.IntN(ties) == 0 {
				m = i
			}
		}
	}
	if m < 0 {
		m = n // a single member
	}
	return n, nLoad, m
}

// Done does nothing: loads are the back ends' Active counts.
func (l *lardR) Done(Request, string, time.Time) {}

func contains(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// removeName deletes name from names in place, keeping the order.
func removeName(names []string, name string) []string {
	for i, n := range names {
		if n == name {
			copy(names[i:], names[i+1:])
			names[len(names)-1] = ""
			return names[:len(names)-1]
		}
	}
	return names
}
