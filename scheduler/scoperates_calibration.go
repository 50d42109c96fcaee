package scheduler

import (
	"math"
	"time"
)

// exposed is one scope's exposure to a member over a report window, and
// its change since the member's previous report.
type exposed struct {
	slot  int32
	a, da float64
}

// calibrated reports whether the estimates come from reports of group
// requests; the caller holds mu.
func (s *ScopeRates) calibrated(t int64) bool {
	if s.sums().hasG {
		return true
	}
	return s.restoredCal && s.restoredTotal > 0 && t < s.restoredUntil
}

// memberSums is what groupTotal and calibrated read of all the members'
// reports, summed once after the reports change rather than per answer.
type memberSums struct {
	sum            float64 // Σ group requests, or requests where a member reports none
	reported, hasG bool    // some member reported; some reported group requests
	valid          bool
}

// sums returns the members' sums; the caller holds mu.
func (s *ScopeRates) sums() memberSums {
	if s.memberSums.valid {
		return s.memberSums
	}
	var ms memberSums
	for i := range s.members {
		m := &s.members[i]
		switch {
		case m.hasG:
			ms.sum += m.g
		case m.reported:
			ms.sum += m.r
		}
		ms.reported = ms.reported || m.reported
		ms.hasG = ms.hasG || m.hasG
	}
	ms.valid = true
	s.memberSums = ms
	return ms
}

// groupTotal returns the group's request rate; the caller holds mu.
// Calibrated: the sum of the members' group requests (their requests for
// members that do not report them); else the sum of the reported requests;
// with no report at all, k × the copies in cache.
func (s *ScopeRates) groupTotal(t int64) float64 {
	ms := s.sums()
	sum, reported := ms.sum, ms.reported
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
	prevG, prevAt, prevW, had := m.own, m.at, m.w, m.hasG
	m.r, m.g, m.reported = sane(rep.Requests), sane(rep.GroupRequests), true
	s.memberSums.valid = false
	if m.g > 0 {
		m.hasG = true
	}
	if !m.hasG {
		return
	}
	m.at, m.w = t, w
	sc, predicted, dpred, dnorm := s.exposures(m, member, t-int64(w), t)
	m.pred, m.own = predicted, ownShare(m.g, predicted, m.remote)
	if predicted <= 0 {
		return
	}
	s.noteError(m.own, predicted)
	// The step from the previous report is worth its own equation when
	// the two windows overlap: ΔG = Σ Δaₛ·rₛ names only the scopes that
	// came or went.
	var resid, sv float64
	if had && prevW == w && t > prevAt && t-prevAt < int64(w) && dnorm > 0 {
		resid, sv = s.stepInnovation(sc, m.own, prevG, dpred, t-prevAt, w)
	}
	s.calibrate(sc, m.own/predicted, resid, sv)
}

// ownShare is the part of a member's group requests g that this node's
// scopes must explain when they predict pred and the other nodes of an NS
// set say theirs explain remote: g · pred / (pred + remote), all of g for
// a node alone (remote 0).
//
// One calibration across the NS set: every node sees the whole g in the
// member's report but only the scopes that it answers, so a node that
// calibrated against all of g would scale its scopes up until they alone
// explain it (about N× too large with the resolvers spread over N nodes,
// and the hidden load and the TTLs with them). Each node shares its Ĝ per
// member instead (one number per member per node, beside its pending
// load), and calibrates against its share of g, in proportion to what each
// node's scopes predict: the shares add up to g, so the set is calibrated
// against g once, and a scope's estimate moves by the same ratio
// G/ΣĜ as on one node that answered every scope. Partitioning (rather
// than subtracting the others' Ĝ from g) never leaves a node a negative or
// zero share when the others overestimate. The others' figures are a
// round of reports late, which the damping η absorbs; it slows telling
// the light scopes apart (TestScopeRatesNSSet), not the sums.
func ownShare(g, pred, remote float64) float64 {
	if remote <= 0 || pred <= 0 {
		return g
	}
	return g * pred / (pred + remote)
}

// Explained returns what this node's scopes explained of member's group
// requests at its last calibrating report (Ĝ, requests per second; 0
// before one): what it shares with the other nodes of an NS set.
func (s *ScopeRates) Explained(member int) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if member < 0 || member >= len(s.members) {
		return 0
	}
	return s.members[member].pred
}

// SetRemoteExplained takes what the other nodes of an NS set say their
// scopes explain of member's group requests, summed over them (0: none
// do, or this node is alone); the next reports of member calibrate this
// node's scopes against its share only (see ownShare). A value that is
// not a finite number ≥ 0 counts as 0.
func (s *ScopeRates) SetRemoteExplained(member int, v float64) {
	if member < 0 || member >= MaxTrackedMembers {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if member >= len(s.members) {
		s.members = append(s.members, make([]memberCal, member+1-len(s.members))...)
	}
	s.members[member].remote = sane(v)
}

// exposures returns the exposure to member j (whose calibration is m) of
// the scopes in its touch list over [from, t], with the prediction Ĝ =
// Σ aₛ·r̂ₛ, the predicted change Σ Δaₛ·r̂ₛ and Σ Δaₛ² since its previous
// report; scopes that start being exposed take the prior. It drops from
// the list the slots reused since and those whose answers to j all ended
// before from. The caller holds mu; the result is s.scratch.
func (s *ScopeRates) exposures(m *memberCal, j int, from, t int64) (sc []exposed, predicted, dpred, dnorm float64) {
	prior := s.prior(t)
	sc = s.scratch[:0]
	for k := 0; k < len(m.touch); {
		ref := &m.touch[k]
		sl := &s.slots[ref.slot]
		if sl.gen != ref.gen {
			m.touch[k] = m.touch[len(m.touch)-1]
			m.touch = m.touch[:len(m.touch)-1]
			continue
		}
		a := exposure(sl, j, from, t)
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
		if lastEnd(sl, j) < from {
			sl.listed &^= 1 << j
			m.touch[k] = m.touch[len(m.touch)-1]
			m.touch = m.touch[:len(m.touch)-1]
			continue
		}
		k++
	}
	s.scratch = sc
	return sc, predicted, dpred, dnorm
}

// noteError folds a report's relative error |G − Ĝ| / max(G, Ĝ) into the
// calibration error's exponential average; the caller holds mu.
func (s *ScopeRates) noteError(g, predicted float64) {
	e := math.Abs(g-predicted) / max(g, predicted)
	if s.errSet {
		s.errEWMA += 0.1 * (e - s.errEWMA)
	} else {
		s.errEWMA, s.errSet = e, true
	}
}

// stepInnovation returns the step equation's residual, what the estimates
// do not explain of the change g − prevG over dt, and its variance S =
// Σ vₛ·Δaₛ² + the Poisson noise of the step (the requests that entered
// and left the window w, 2·G·Δt/W²). The caller holds mu.
func (s *ScopeRates) stepInnovation(sc []exposed, g, prevG, dpred float64, dt int64, w time.Duration) (resid, sv float64) {
	var pd2 float64
	for _, x := range sc {
		pd2 += s.slots[x.slot].v * x.da * x.da
	}
	ws := w.Seconds()
	noise := (g + prevG) * float64(dt) / 1e9 / (ws * ws)
	return (g - prevG) - dpred, pd2 + max(noise, 1e-9)
}

// calibrate moves each exposed scope's estimate: by the step equation, a
// Kalman update in which each scope takes μ·vₛ·Δaₛ/S of the residual
// (when sv > 0), then by the report's ratio G/Ĝ (clamped to [1/4, 4]) to
// the power η·aₛ, within the bounds of an estimate; the variance grows
// back by the drift, so the estimate keeps following. The caller holds mu.
func (s *ScopeRates) calibrate(sc []exposed, ratio, resid, sv float64) {
	ratio = min(max(ratio, 1.0/maxCalibrationRatio), maxCalibrationRatio)
	lr := math.Log(ratio) * calibrationGain
	for _, x := range sc {
		sl := &s.slots[x.slot]
		r := sl.rate
		if sv > 0 && x.da != 0 {
			r += stepGain * sl.v * x.da * resid / sv
			sl.v *= max(1-stepGain*sl.v*x.da*x.da/sv, 0)
		}
		r *= math.Exp(lr * x.a)
		r = min(max(r, minScopeRate), maxScopeRate)
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
	var segs [4]answerSeg
	var pts [10]int64
	ns, np := answerSegs(sl, j, from, to, &segs, &pts)
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

// answerSeg is the time during which one remembered answer was in use.
type answerSeg struct {
	start, end int64
	share      float64 // 1/n if it names the member, else 0
	fam        int
}

// answerSegs puts into segs the uses of sl's remembered answers that
// overlap (from, to), with member j's share of each, and into pts from,
// to and the ends of those uses within; it returns how many of each.
func answerSegs(sl *scopeSlot, j int, from, to int64, segs *[4]answerSeg, pts *[10]int64) (ns, np int) {
	pts[0], pts[1] = from, to
	np = 2
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
			sg := answerSeg{start: a.at, end: a.end(next), fam: f}
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
	return ns, np
}
