package scheduler

import (
	"math"
	"sync"
	"time"
)

// DefaultHorizon is the half-life of pending load when NewEstimator is given
// no positive horizon.
const DefaultHorizon = 30 * time.Second

// Estimator tracks, for each member of one group, the load of its last report
// and the pending load: the estimated load of the answers handed out since
// that report, which the report could not show yet. It is the mutable half of
// the load picture (the Group snapshot is the immutable half); dnsd owns one
// per group, feeds it reports and answers, and passes it to Pick in Query.Load.
// A mirror owns one per group view, for the redirects it makes on that view.
//
// Members are the Group's indexes. The Estimator grows as needed; when the
// member list changes (not just states), make a new Estimator: pending load
// is short-lived and a report restores the load.
//
// Pending load decays exponentially with half-life horizon, so a member
// whose reports are lost is not kept out forever. An Estimator is safe for
// concurrent use.
type Estimator struct {
	halfLife float64 // seconds

	mu sync.RWMutex
	m  []estimate
}

// estimate is one member's entry.
type estimate struct {
	load           float64   // last reported load
	bytesPerSecond float64   // last reported rate of response bytes
	reported       bool      // load and bytesPerSecond are set
	pending        float64   // pending load as of at
	at             time.Time // when pending was last updated
}

// Usage is what a load report says a member uses: its load, in load units
// (10·(r + m)), and the response bytes it sends per second.
type Usage struct {
	Load           float64
	BytesPerSecond float64
}

// NewEstimator returns an empty Estimator whose pending load halves every
// horizon (DefaultHorizon when horizon ≤ 0). A horizon of about the group's
// maximum TTL matches the life of the answers it stands for.
func NewEstimator(horizon time.Duration) *Estimator {
	if horizon <= 0 {
		horizon = DefaultHorizon
	}
	return &Estimator{halfLife: horizon.Seconds()}
}

// entry returns member i's entry, growing the table; the caller holds mu.
func (e *Estimator) entry(i int) *estimate {
	if i >= len(e.m) {
		e.m = append(e.m, make([]estimate, i+1-len(e.m))...)
	}
	return &e.m[i]
}

// Report records a new load report of member at now: its usage replaces
// the previous one and its pending load is reset to 0, since the report
// now includes the clients the earlier answers sent. Negative or
// non-finite figures count as 0; a negative member is ignored.
func (e *Estimator) Report(member int, u Usage, now time.Time) {
	if member < 0 {
		return
	}
	e.mu.Lock()
	en := e.entry(member)
	en.load, en.bytesPerSecond, en.reported = sane(u.Load), sane(u.BytesPerSecond), true
	en.pending, en.at = 0, now
	e.mu.Unlock()
}

// Add records one answer at now that sent the given members a total hidden
// load of load units (see HiddenLoad), split evenly among them since clients
// spread over the addresses of an answer. Negative members are ignored.
func (e *Estimator) Add(members []int, load float64, now time.Time) {
	load = sane(load)
	if len(members) == 0 || load == 0 {
		return
	}
	share := load / float64(len(members))
	e.mu.Lock()
	for _, i := range members {
		if i < 0 {
			continue
		}
		en := e.entry(i)
		en.pending = en.decayed(now, e.halfLife) + share
		en.at = now
	}
	e.mu.Unlock()
}

// Pending returns member's pending load at now.
func (e *Estimator) Pending(member int, now time.Time) float64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if member < 0 || member >= len(e.m) {
		return 0
	}
	return e.m[member].decayed(now, e.halfLife)
}

// decayed returns the pending load at now.
func (en *estimate) decayed(now time.Time, halfLife float64) float64 {
	if en.pending == 0 {
		return 0
	}
	dt := now.Sub(en.at).Seconds()
	if dt <= 0 {
		return en.pending
	}
	return en.pending * math.Exp2(-dt/halfLife)
}
