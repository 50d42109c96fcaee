package scheduler

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultHorizon is the half-life of pending load when NewEstimator is given
// no positive horizon.
const DefaultHorizon = 30 * time.Second

// DefaultReportWindow is the window of a load report that says none: the
// mirrors' reports are averages over the last 10 seconds.
const DefaultReportWindow = 10 * time.Second

// MaxReportWindow bounds the report window a windowed Estimator ramps
// booked load over; longer windows are taken as this.
const MaxReportWindow = 60 * time.Second

// bookSlots is the number of one-second slots of a windowed Estimator's
// bookings per member: they cover MaxReportWindow and a few seconds of
// report delay.
const bookSlots = 64

// Estimator tracks, for each member of one group, the load of its last report
// and the pending load: the estimated load of the answers handed out that
// the report does not show yet. It is the mutable half of the load picture
// (the Group snapshot is the immutable half); dnsd owns one per group,
// address family and source of pending load (its answers, the
// dispatchers' redirects, the other nodes' shares), feeds them reports,
// answers and redirects, and passes them to Pick in Query.Load and
// Query.Also. A mirror owns one per group view, for the redirects it makes
// on that view.
//
// Members are the Group's indexes. The Estimator grows as needed; when the
// member list changes (not just states), make a new Estimator: pending load
// is short-lived and a report restores the load.
//
// It has two models of pending load. NewEstimator's decays exponentially
// with half-life horizon, and a report resets it to 0: right for bookings
// that the next report shows whole. NewWindowEstimator's follows the
// report's sliding window (see Move). An Estimator is safe for concurrent
// use.
type Estimator struct {
	halfLife float64 // seconds
	windowed bool    // NewWindowEstimator's model

	mu sync.RWMutex
	m  []estimate
	// utils[i] is member i's utilization as a pick last computed it;
	// picks write it under the read lock, so it is atomic. See view.util.
	utils []cachedUtil
}

// cachedUtil is a member's utilization computed by a pick at Unix ns at
// (0: none, or the member's figures changed since).
type cachedUtil struct {
	at   atomic.Int64
	bits atomic.Uint64 // math.Float64bits of the utilization
}

// changed drops member i's cached utilization; the caller holds mu.
func (e *Estimator) changed(i int) {
	if i < len(e.utils) {
		e.utils[i].at.Store(0)
	}
}

// estimate is one member's entry.
type estimate struct {
	load           float64   // last reported load
	bytesPerSecond float64   // last reported rate of response bytes
	reported       bool      // load and bytesPerSecond are set
	pending        float64   // pending load as of at (windowed: of the bookings in book)
	at             time.Time // when pending was last updated
	remote         float64   // pending load that others booked (SetRemote)

	// Windowed model only.
	rep     time.Time // time of the last report
	window  float64   // its window, seconds
	stale   float64   // bookings no report took in within bookSlots seconds, as of staleAt
	staleAt time.Time
	last    time.Time // the newest booking
	book    *bookRing
}

// bookRing holds a member's recent bookings by the second they start in:
// their sum and first moment (Σ load × seconds after the slot's start), so
// the share a report window has taken in is exact for a slot inside the
// window.
type bookRing struct {
	sec    [bookSlots]int64 // Unix second of the slot, 0: empty
	sum    [bookSlots]float64
	moment [bookSlots]float64
}

// Usage is what a load report says a member uses: its load, in load units
// (10·(r + m)), and the response bytes it sends per second.
type Usage struct {
	Load           float64
	BytesPerSecond float64
}

// NewEstimator returns an empty Estimator whose pending load halves every
// horizon (DefaultHorizon when horizon ≤ 0) and is reset by each report.
// A horizon of about the group's maximum TTL matches the life of the
// answers it stands for.
func NewEstimator(horizon time.Duration) *Estimator {
	if horizon <= 0 {
		horizon = DefaultHorizon
	}
	return &Estimator{halfLife: horizon.Seconds()}
}

// NewWindowEstimator returns an empty Estimator for members whose reports
// are averages over a sliding window: a load booked at time t is hidden
// from a report made at t_r in proportion 1 − (t_r − t)/W (W the report's
// window), so it ramps out of the pending load over one window after t
// instead of vanishing at the next report; booked load that leaves a
// member (negative) ramps out the same way. Bookings that no report takes
// in within about a minute (the member's reports stopped) decay with
// half-life horizon (DefaultHorizon when ≤ 0); the group's maximum TTL is
// a good horizon. A member's load plus pending never goes below 0.
func NewWindowEstimator(horizon time.Duration) *Estimator {
	e := NewEstimator(horizon)
	e.windowed = true
	return e
}

// entry returns member i's entry, growing the table; the caller holds mu.
func (e *Estimator) entry(i int) *estimate {
	if i >= len(e.m) {
		e.m = append(e.m, make([]estimate, i+1-len(e.m))...)
		e.utils = make([]cachedUtil, len(e.m))
	}
	en := &e.m[i]
	if e.windowed && en.book == nil {
		en.book = new(bookRing)
		en.window = DefaultReportWindow.Seconds()
	}
	return en
}

// Report records a new load report of member made at now: its usage
// replaces the previous one. In NewEstimator's model the pending load is
// reset to 0, since the report now includes the clients the earlier
// answers sent; in the windowed model it is ReportWindow with the default
// window. Negative or non-finite figures count as 0; a negative member is
// ignored.
func (e *Estimator) Report(member int, u Usage, now time.Time) {
	e.ReportWindow(member, u, now, DefaultReportWindow)
}

// ReportWindow records a new load report of member taken at at over a
// window of the given width (DefaultReportWindow when ≤ 0, at most
// MaxReportWindow). In the windowed model the pending load becomes what
// of the bookings the report does not show yet; NewEstimator's model
// ignores the window and resets the pending load.
func (e *Estimator) ReportWindow(member int, u Usage, at time.Time, window time.Duration) {
	if member < 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	en := e.entry(member)
	e.changed(member)
	en.load, en.bytesPerSecond, en.reported = sane(u.Load), sane(u.BytesPerSecond), true
	if !e.windowed {
		en.pending, en.at = 0, at
		return
	}
	if window <= 0 {
		window = DefaultReportWindow
	}
	en.rep, en.window = at, min(window, MaxReportWindow).Seconds()
	en.pending = 0
	for k := range en.book.sec {
		en.pending += en.slotHidden(k)
	}
}

// slotHidden returns the part of slot k's bookings that the last report
// does not show: all of a booking made after it, none of one made a
// window or more before it, and in between 1 − (t_r − t)/W.
func (en *estimate) slotHidden(k int) float64 {
	b := en.book
	if b.sec[k] == 0 || b.sum[k] == 0 {
		return 0
	}
	if en.rep.IsZero() {
		return b.sum[k]
	}
	// Seconds from the slot's start to the report.
	d := float64(en.rep.UnixNano()-b.sec[k]*1e9) / 1e9
	switch {
	case d <= 0:
		return b.sum[k]
	case d >= en.window+1:
		return 0
	}
	// Σ load × (1 − (d − offset)/W) = sum·(1 − d/W) + moment/W
	h := b.sum[k]*(1-d/en.window) + b.moment[k]/en.window
	if b.sum[k] > 0 {
		return min(max(h, 0), b.sum[k])
	}
	return max(min(h, 0), b.sum[k])
}

// Add records one answer at now that sent the given members a total hidden
// load of load units (see HiddenLoad), split evenly among them since clients
// spread over the addresses of an answer. Negative members are ignored.
func (e *Estimator) Add(members []int, load float64, now time.Time) {
	e.Move(members, nil, 0, load, now, now)
}

// Move books one answer that sends load units (see HiddenLoad) to the
// members in to, split evenly among them, from now on, and takes the same
// load off the members of from, each losing load/fromN, from left on (the
// previous answer of the same clients; fromN is the number of members it
// named, at least len(from)). Taking off is for the windowed model only:
// NewEstimator's model ignores from. Negative members are ignored.
func (e *Estimator) Move(to, from []int, fromN int, load float64, left, now time.Time) {
	load = sane(load)
	if load == 0 || (len(to) == 0 && (len(from) == 0 || !e.windowed)) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(to) > 0 {
		share := load / float64(len(to))
		for _, i := range to {
			if i >= 0 {
				e.book(e.entry(i), share, now, now)
				e.changed(i)
			}
		}
	}
	if !e.windowed || len(from) == 0 {
		return
	}
	share := -load / float64(max(fromN, len(from)))
	for _, i := range from {
		if i >= 0 {
			e.book(e.entry(i), share, left, now)
			e.changed(i)
		}
	}
}

// book adds x load units from at on en; the caller holds mu.
func (e *Estimator) book(en *estimate, x float64, at, now time.Time) {
	if !e.windowed {
		en.pending = en.decayed(now, e.halfLife) + x
		en.at = now
		return
	}
	sec := at.Unix()
	if sec <= 0 || sec <= now.Unix()-bookSlots+1 {
		// Too old for the ring: what the last report still shows of it.
		if en.rep.IsZero() || !at.Before(en.rep) {
			e.addStale(en, x, now)
		} else if d := en.rep.Sub(at).Seconds(); d < en.window {
			e.addStale(en, x*(1-d/en.window), now)
		}
		return
	}
	b := en.book
	k := int(sec % bookSlots)
	if b.sec[k] != sec {
		// Recycle the slot: what no report has taken in goes stale.
		if old := en.slotHidden(k); old != 0 {
			en.pending -= old
			e.addStale(en, old, now)
		}
		b.sec[k], b.sum[k], b.moment[k] = sec, 0, 0
	}
	before := en.slotHidden(k)
	if at.After(en.last) {
		en.last = at
	}
	b.sum[k] += x
	b.moment[k] += x * float64(at.UnixNano()-sec*1e9) / 1e9
	en.pending += en.slotHidden(k) - before
}

// addStale adds x to the member's stale bookings, which decay with the
// horizon; the caller holds mu.
func (e *Estimator) addStale(en *estimate, x float64, now time.Time) {
	en.stale = en.staleDecayed(now, e.halfLife) + x
	en.staleAt = now
}

// staleDecayed returns the stale bookings at now.
func (en *estimate) staleDecayed(now time.Time, halfLife float64) float64 {
	if en.stale == 0 {
		return 0
	}
	if dt := now.Sub(en.staleAt).Seconds(); dt > 0 {
		return en.stale * math.Exp2(-dt/halfLife)
	}
	return en.stale
}

// Pending returns member's pending load at now: what this Estimator
// booked (LocalPending) and what others did (SetRemote); load + pending is
// never below 0.
func (e *Estimator) Pending(member int, now time.Time) float64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if member < 0 || member >= len(e.m) {
		return 0
	}
	return e.m[member].total(now, e.halfLife)
}

// LocalPending returns the pending load at now of the bookings made on
// this Estimator alone, without SetRemote's: what dnsd shares with the
// other nodes of its NS set.
func (e *Estimator) LocalPending(member int, now time.Time) float64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if member < 0 || member >= len(e.m) {
		return 0
	}
	return e.m[member].decayed(now, e.halfLife)
}

// PendingSum returns member's pending load at now over several sources
// of it: load's (the Estimator that takes the member's reports) and
// also's (bookings of other sources on the same members, such as a dnsd's
// dispatchers' redirects and the other nodes' shares). Each source's
// bookings and remote figures are summed, and the sum is floored once at
// −load in the windowed model, so that load + pending is never below 0.
// It is the pending load a Pick sees given Query.Load and Query.Also.
func PendingSum(member int, now time.Time, load *Estimator, also []*Estimator) float64 {
	if load == nil {
		return 0
	}
	load.mu.RLock()
	defer load.mu.RUnlock()
	for _, e := range also {
		e.mu.RLock()
		defer e.mu.RUnlock()
	}
	return pendingSum(member, now, load, also)
}

// pendingSum is PendingSum with the estimators' read locks held.
func pendingSum(member int, now time.Time, load *Estimator, also []*Estimator) float64 {
	if member < 0 {
		return 0
	}
	var en *estimate
	if member < len(load.m) {
		en = &load.m[member]
	}
	if len(also) == 0 {
		if en == nil {
			return 0
		}
		return en.total(now, load.halfLife)
	}
	p, floor := 0.0, 0.0
	if en != nil {
		p, floor = en.unfloored(now, load.halfLife)+en.remote, -en.load
	}
	for _, e := range also {
		if member < len(e.m) {
			o := &e.m[member]
			p += o.unfloored(now, e.halfLife) + o.remote
		}
	}
	if load.windowed {
		p = max(p, floor)
	}
	return p
}

// SetRemote sets the pending load of member that others booked — the
// other dnsd nodes of an NS set, for the answers they gave — replacing
// what was set before. It is added to Pending as it is: the others' own
// estimators ramp it out, and say so when they share it again. A
// non-finite load counts as 0; a negative member is ignored.
func (e *Estimator) SetRemote(member int, load float64) {
	if member < 0 {
		return
	}
	if math.IsNaN(load) || math.IsInf(load, 0) {
		load = 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if load == 0 && member >= len(e.m) {
		return
	}
	e.entry(member).remote = load
	e.changed(member)
}

// total is the pending load at now with the remote one: decayed plus
// remote, at least −load in the windowed model.
func (en *estimate) total(now time.Time, halfLife float64) float64 {
	p := en.decayed(now, halfLife)
	if en.remote == 0 {
		return p
	}
	p += en.remote
	if en.book != nil {
		p = max(p, -en.load)
	}
	return p
}

// decayed returns the pending load at now: in NewEstimator's model the
// pending load decayed since it was booked, in the windowed model what
// the last report does not show (at least −load, so that load + pending is
// never negative).
func (en *estimate) decayed(now time.Time, halfLife float64) float64 {
	p := en.unfloored(now, halfLife)
	if en.book != nil {
		return max(p, -en.load)
	}
	return p
}

// unfloored is decayed without the floor at −load: what a sum over
// sources adds up before it floors the total once.
func (en *estimate) unfloored(now time.Time, halfLife float64) float64 {
	if en.book != nil {
		ring := en.pending
		// A ring that no booking has touched for its whole span is not
		// recycled until the next one: let it decay as stale meanwhile.
		if age := now.Sub(en.last).Seconds() - bookSlots; age > 0 && ring != 0 {
			ring *= math.Exp2(-age / halfLife)
		}
		p := ring + en.staleDecayed(now, halfLife)
		if math.Abs(p) < 1e-9 {
			return 0 // rounding left over from the ramp
		}
		return p
	}
	if en.pending == 0 {
		return 0
	}
	dt := now.Sub(en.at).Seconds()
	if dt <= 0 {
		return en.pending
	}
	return en.pending * math.Exp2(-dt/halfLife)
}
