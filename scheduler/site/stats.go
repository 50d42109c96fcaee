package site

import "time"

// Stater is implemented by a [Policy] that can report its state. Every
// policy [New] returns implements it; a caller type-asserts for it, so
// that other Policy implementations need not. State is safe for
// concurrent use with Pick and Done, and cheap: it takes the policy's lock
// for a constant time (tb-ccrd: one step per back end) and never walks
// a target table, sketch or cache model.
type Stater interface {
	// State returns the policy's state now.
	State() Stats
}

// Stats is a policy's state as a status page shows it: a few bounded
// figures. Policy is always set; at most one of the other fields is, by
// the policy: LARD for lard and lard-r, WARD for ward, Caches for
// tb-ccrd, CHBL for chbl. wrr, least-conn and client-hash have nothing
// beyond their name.
type Stats struct {
	// Policy is the policy's name, one of [Names].
	Policy string `json:"policy"`
	// LARD is the target table of lard and lard-r.
	LARD *LARDStats `json:"lard,omitempty"`
	// WARD is ward's core and sketch.
	WARD *WARDStats `json:"ward,omitempty"`
	// Caches are tb-ccrd's models of the back ends' memory caches, in
	// the order of the last set of back ends seen (empty before the
	// first pick).
	Caches []CacheModelStats `json:"caches,omitempty"`
	// CHBL is chbl's ring and bound.
	CHBL *CHBLStats `json:"chbl,omitempty"`
}

// LARDStats describe a lard or lard-r target table.
type LARDStats struct {
	// Targets is the number of targets (distinct keys) in the table.
	Targets int `json:"targets"`
	// MaxTargets is the table's bound (Params.MaxTargets); the least
	// recently used target is forgotten beyond it.
	MaxTargets int `json:"max_targets"`
	// Replicas is, for lard-r, the number of back ends over all the
	// targets' sets (Replicas/Targets is the mean set size); 0 for lard,
	// whose targets have one back end each.
	Replicas int `json:"replicas,omitempty"`
	// Reassignments counts LARD's load-driven decisions since the start:
	// for lard the targets moved to another back end (because theirs was
	// overloaded, down, gone or without the file, Request.Has), for
	// lard-r the back ends added to a target's set because its members
	// were overloaded.
	Reassignments uint64 `json:"reassignments"`
	// Untracked counts the requests for a new key that added no target
	// because their client network had used its budget
	// (Params.ClientTargets per Params.ClientWindow).
	Untracked uint64 `json:"untracked,omitempty"`
}

// WARDStats describe ward's core and the sketch it is chosen from.
type WARDStats struct {
	// CoreFiles is the number of files in the core, which every back
	// end serves.
	CoreFiles int `json:"core_files"`
	// CoreBytes is the core files' total size, as far as it is known
	// (files whose size was never seen count 0).
	CoreBytes int64 `json:"core_bytes"`
	// SketchFiles is the number of files the sketch counts now, at most
	// SketchEntries.
	SketchFiles int `json:"sketch_files"`
	// SketchEntries is the sketch's bound (Params.SketchEntries).
	SketchEntries int `json:"sketch_entries"`
	// LastAnalysis is when the core was last chosen (by the injected
	// clock); zero before the first analysis.
	LastAnalysis time.Time `json:"last_analysis,omitzero"`
	// Interval is the time between analyses (Params.WardInterval).
	Interval time.Duration `json:"interval_ns"`
}

// CacheModelStats describe tb-ccrd's model of one back end's cache.
type CacheModelStats struct {
	// Backend is the back end's name.
	Backend string `json:"backend"`
	// Objects is the number of objects the model holds.
	Objects int `json:"objects"`
	// Bytes is their total size.
	Bytes int64 `json:"bytes"`
	// Capacity is the model's bound in bytes (the back end's MemoryBytes).
	Capacity int64 `json:"capacity"`
}

// CHBLStats describe chbl's ring and its load bound at the last pick.
type CHBLStats struct {
	// BalanceFactor is c (Params.BalanceFactor).
	BalanceFactor float64 `json:"balance_factor"`
	// RingPoints is the number of virtual nodes on the ring.
	RingPoints int `json:"ring_points"`
	// AverageLoad is the requests in flight per unit of weight over the
	// up back ends (that had the file, Request.Has), as the last pick
	// saw them.
	AverageLoad float64 `json:"average_load"`
	// Bound is the most requests in flight per unit of weight that a
	// back end could take at the last pick: c·(ΣActive+1)/Σweight.
	Bound float64 `json:"bound"`
}

var (
	_ Stater = (*wrr)(nil)
	_ Stater = (*leastConn)(nil)
	_ Stater = (*clientHash)(nil)
	_ Stater = (*lard)(nil)
	_ Stater = (*lardR)(nil)
	_ Stater = (*ward)(nil)
	_ Stater = (*tbccrd)(nil)
	_ Stater = (*chbl)(nil)
)

// State returns the policy's name: wrr keeps nothing worth showing.
func (w *wrr) State() Stats { return Stats{Policy: WRR} }

// State returns the policy's name: least-conn keeps no state.
func (l *leastConn) State() Stats { return Stats{Policy: LeastConn} }

// State returns the policy's name: client-hash keeps no state.
func (c *clientHash) State() Stats { return Stats{Policy: ClientHash} }

// State returns the size of the target table.
func (l *lard) State() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Policy: LARD, LARD: &LARDStats{
		Targets: l.targets.len(), MaxTargets: l.p.MaxTargets, Reassignments: l.moves, Untracked: l.budget.refused,
	}}
}

// State returns the size of the target table and the number of replicas
// over all its sets.
func (l *lardR) State() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Policy: LARDR, LARD: &LARDStats{
		Targets: l.targets.len(), MaxTargets: l.p.MaxTargets, Replicas: l.replicas, Reassignments: l.grows,
		Untracked: l.budget.refused,
	}}
}

// State returns the core chosen by the last analysis.
func (w *ward) State() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Stats{Policy: WARD, WARD: &WARDStats{
		CoreFiles:     len(w.core),
		CoreBytes:     w.coreBytes,
		SketchFiles:   len(w.sketch.entries),
		SketchEntries: w.sketch.cap,
		LastAnalysis:  w.analysed,
		Interval:      w.p.WardInterval,
	}}
}

// State returns the fill of each back end's cache model.
func (t *tbccrd) State() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := Stats{Policy: TBCCRD}
	if len(t.models.names) > 0 {
		st.Caches = make([]CacheModelStats, len(t.models.names))
	}
	for i, name := range t.models.names {
		m := t.models.vals[i]
		st.Caches[i] = CacheModelStats{Backend: name, Objects: m.Len(), Bytes: m.Bytes(), Capacity: m.Capacity()}
	}
	return st
}

// State returns the balance factor, the ring's size and the load and
// bound of the last pick.
func (c *chbl) State() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &CHBLStats{BalanceFactor: c.p.BalanceFactor, RingPoints: len(c.ring)}
	if c.lastWeight > 0 {
		s.AverageLoad = float64(c.lastActive) / c.lastWeight
		s.Bound = c.p.BalanceFactor * float64(c.lastActive+1) / c.lastWeight
	}
	return Stats{Policy: CHBL, CHBL: s}
}
