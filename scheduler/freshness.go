package scheduler

import "time"

// Content is what the freshness rule knows of one member of a group.
type Content struct {
	// Generation is when the member's last complete sync was taken from
	// the master (its trace file); zero: the member does not say.
	Generation time.Time
	// Answerable: the member would go into answers but for its lag (it is
	// not down and not drained).
	Answerable bool
}

// Freshness is one member's verdict under the freshness rule.
type Freshness struct {
	// Known: the member has a believable generation, so Lag means
	// something.
	Known bool
	// Lag is how far the member's generation is behind the newest (0 for
	// the newest; never negative).
	Lag time.Duration
	// Lagging: the member leaves the answers.
	Lagging bool
}

// FreshnessRule is a group's freshness rule: its max_lag and, when the
// group names one, the master's generation.
type FreshnessRule struct {
	// MaxLag is how far a member's generation may be behind the newest
	// and still be answered; 0 turns the rule off (Lag is still given).
	MaxLag time.Duration
	// Master is the master's generation; zero: the newest is the freshest
	// member's.
	Master time.Time
	// MaxSkew is how far ahead of now a generation may be and still be
	// believed (a clock or a trace file that is wrong).
	MaxSkew time.Duration
}

// Judge applies the rule at now to members (by index) and writes their
// verdicts to out[:len(members)] (out is grown if short):
//
//	newest  = Master, else max Generation over the members that have one
//	lag     = max(0, newest − Generation)
//	lagging = lag > MaxLag (MaxLag > 0)
//
// Only believable generations count: a zero one, or one more than MaxSkew
// ahead of now, is none, and a member without a generation is never
// lagging. A lag of exactly MaxLag is not lagging. Fail open: when every
// answerable member is lagging (and one is), the freshest of them (all
// those of the newest generation among them) are not lagging, and
// failOpen is true. Drained and down members count for the newest (the
// master's trees are where they are) but not for failing open.
func (r FreshnessRule) Judge(now time.Time, members []Content, out []Freshness) (verdicts []Freshness, failOpen bool) {
	out = append(out[:0], make([]Freshness, len(members))...)
	newest := r.Master
	believed := func(g time.Time) bool { return !g.IsZero() && !g.After(now.Add(r.MaxSkew)) }
	if !believed(newest) {
		newest = time.Time{}
		for _, m := range members {
			if believed(m.Generation) && m.Generation.After(newest) {
				newest = m.Generation
			}
		}
	}
	answerable, lagging := 0, 0
	var freshest time.Time // among the answerable lagging members
	for i, m := range members {
		if !believed(m.Generation) || newest.IsZero() {
			continue
		}
		f := Freshness{Known: true, Lag: max(0, newest.Sub(m.Generation))}
		f.Lagging = r.MaxLag > 0 && f.Lag > r.MaxLag
		out[i] = f
		if m.Answerable && f.Lagging {
			lagging++
			if m.Generation.After(freshest) {
				freshest = m.Generation
			}
		}
	}
	for _, m := range members {
		if m.Answerable {
			answerable++
		}
	}
	if answerable == 0 || lagging < answerable {
		return out, false
	}
	for i, m := range members {
		if m.Answerable && m.Generation.Equal(freshest) {
			out[i].Lagging = false
		}
	}
	return out, true
}
