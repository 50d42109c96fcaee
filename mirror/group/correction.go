package group

import (
	"math"
	"time"
)

// Laws of redirect.law: how a mirror decides the share of its requests it
// redirects.
const (
	// LawFairShare redirects what comes in over the mirror's fair share of
	// the group's load (FairShareRedirect); the default.
	LawFairShare = "fair_share"
	// LawWatermark ramps the share between the low and the high watermark
	// of the mirror's own utilization (RedirectShare), whatever the others
	// carry: the law of earlier releases.
	LawWatermark = "watermark"
)

// Laws are the values redirect.law takes.
var Laws = []string{LawFairShare, LawWatermark}

// Correction is what the fair-share law needs to know at one moment.
type Correction struct {
	// Flows are this mirror's request rates (FlowMeter), requests per
	// second.
	Flows Flows
	// RunQueue is m, the run-queue length of the load report.
	RunQueue float64
	// Capacity is this mirror's capacity, in load units (> 0).
	Capacity float64
	// Fair is the group's fair utilization u*: what all the members serve
	// over all their capacity (GroupSnapshot.FairUtilization); NaN when
	// there is no view.
	Fair float64
	// Bandwidth is the utilization of this mirror's bandwidth (bytes per
	// second over bandwidth; 0 without a bandwidth).
	Bandwidth float64
	// TimeConstant is the FlowMeter's: the noise of its rates (Overloaded).
	TimeConstant time.Duration
}

// Share is what the law decides for the redirectable requests at one
// moment.
type Share struct {
	// P is the share of them to redirect.
	P float64
	// Limit is the serving utilization below which a sibling takes a
	// redirect under the fair-share law (SiblingLimit).
	Limit float64
	// Over is true when the mirror is measurably over its target
	// (Overloaded): when no sibling is below Limit, the group policy's
	// first below its high watermark takes the redirect.
	Over bool
}

// OverloadSigmas is how many standard deviations of the FlowMeter's
// arrival rate the load coming in must exceed the target by for Overloaded.
const OverloadSigmas = 3

// Overloaded reports whether what comes in is over the target load by more
// than the noise of its measure: 10·(R + m) − u_T·C > k·10·√(R/2τ), with
// k = OverloadSigmas and √(R/2τ) the standard deviation of a FlowMeter's
// rate of a Poisson stream of R requests per second.
//
// SiblingLimit keeps a mirror from sending its noise to siblings, but a
// limit read against noisy figures refuses some redirects of a mirror
// with a real hot spot: when every sibling's serving figure happens to
// read above it, the hot mirror serves what it should send, and ends a
// few per cent above its fair share (3–5% over a minute in the e2e skew
// scenario with the weighted policy, whose order ignores load). Such a
// mirror sends the redirect to the policy's first sibling below the high
// watermark instead; one whose excess is within the noise does not.
func Overloaded(rules RedirectRules, c Correction) bool {
	f := c.Flows
	if !(c.Capacity > 0) || !(f.Arrivals > 0) || math.IsInf(f.Arrivals, 0) || c.TimeConstant <= 0 {
		return false
	}
	excess := 10*(f.Arrivals+max(c.RunQueue, 0)) - Target(rules, c.Fair)*c.Capacity
	return excess > OverloadSigmas*10*math.Sqrt(f.Arrivals/(2*c.TimeConstant.Seconds()))
}

// Target returns the utilization a mirror steers to under the fair-share
// law: the group's fair utilization u*, but never below the low
// watermark (a mirror with room does not send clients away to even out
// light loads), nor above it when u* is unknown:
//
//	u_T = max(u*, low)
func Target(rules RedirectRules, fair float64) float64 {
	if !(fair >= 0) || math.IsInf(fair, 0) {
		return rules.LowWatermark
	}
	return max(fair, rules.LowWatermark)
}

// FairShareRedirect is the share of the redirectable requests that the
// fair-share law redirects: the excess of what comes in over the target
// load u_T·C, as a fraction of what may be redirected,
//
//	p = clamp((10·(R + m) − u_T·C) / (10·A), 0, max_share)
//
// with R every request coming in per second, A the redirectable ones and
// m the run queue (the load report's figures, but measured over the
// FlowMeter's time constant), and C the capacity. A mirror that redirects
// p·A then serves R − p·A, whose load is the target exactly. When the
// bandwidth is what is over the target, the bytes are shed instead:
// p ≥ (1 − u_T/b)·R/A for a bandwidth utilization b > u_T (redirected
// requests are assumed to be of the mean size). Nothing comes in, no
// capacity: 0.
func FairShareRedirect(rules RedirectRules, c Correction) float64 {
	f := c.Flows
	if !(f.Redirectable > 0) || !(c.Capacity > 0) || math.IsInf(f.Arrivals, 0) {
		return 0
	}
	target := Target(rules, c.Fair)
	p := (10*(f.Arrivals+max(c.RunQueue, 0)) - target*c.Capacity) / (10 * f.Redirectable)
	if b := c.Bandwidth; b > target && !math.IsInf(b, 0) {
		p = max(p, (1-target/b)*f.Arrivals/f.Redirectable)
	}
	switch {
	case !(p > 0):
		return 0
	case p > rules.MaxShare:
		return rules.MaxShare
	}
	return p
}

// SiblingLimit is the serving utilization below which a sibling is sent
// the redirects of the fair-share law: its target, or what this mirror
// serves now if that is more,
//
//	limit = max(u_T, 10·(S + m)/C)
//
// with S the requests this mirror serves per second. A sibling at its
// target takes no redirect from a mirror at its own target, so the
// redirects never push the receivers over their fair share; but when the
// whole group sits at u* the mirror with the hot spot would alone carry
// the noise of everyone's figures (a sibling a little over u* refuses,
// the hot mirror can not), and settle above the others. With the second
// term the redirects go on to any sibling that serves less than this
// mirror, so the hot mirror ends level with the siblings instead.
func SiblingLimit(rules RedirectRules, c Correction) float64 {
	target := Target(rules, c.Fair)
	if !(c.Capacity > 0) {
		return target
	}
	own := 10 * (max(c.Flows.Served, 0) + max(c.RunQueue, 0)) / c.Capacity
	if math.IsInf(own, 0) || math.IsNaN(own) {
		return target
	}
	return max(target, own)
}
