// Package group is level 2 of transmirror's dispatch, the correction: a
// mirror as a member of its group. It measures what comes in (FlowMeter,
// LoadMeter), keeps the group view that dnsd serves (ViewWatcher,
// GroupSnapshot), decides per request whether to serve or answer 302 to a
// sibling (Decide, the fair-share and watermark laws of correction.go, and
// the Redirector around it), pushes load and redirect reports to dnsd
// (Pusher, LOAD-INFORM) and joins and leaves the group (Joiner,
// GROUP-ADD / GROUP-EXIT).
//
// It serves no content: the Redirector wraps whatever handler comes next
// (a serve.FileServer, a site front end, or nothing for a dispatcher),
// reads what this mirror holds through Files and what its siblings hold
// through a ContentMap (their content indexes, see Holdings).
//
// The 302 correction (Decide, Redirector) picks a sibling with the group's
// own scheduler policy from a GroupSnapshot, the group view that a
// ViewWatcher refreshes from dnsd, and books every redirect on the
// sibling it goes to (GroupSnapshot.Book): in a scheduler.Estimator per
// view, the one dnsd books its answers in, one redirected request's load
// (10/W load units for a report window of W, see BookingFor), decaying,
// until the next view, whose loads include it. So the redirects between
// two views spread over the siblings by their room instead of all going
// to the least loaded one. A dispatcher books the same way on the members
// and counts its redirects by target member.
//
// # The fair-share law
//
// A resolver caches one answer for a whole TTL, so DNS can send one
// mirror far more than its share; the 302 correction gives the excess
// back. Under redirect.law fair_share (the default) mirror i measures, as
// exponentially weighted rates with time constant τ (redirect.time_constant,
// 1 s; a FlowMeter), R, every request that comes in, and A, those it may
// redirect (on the group name, GET or HEAD, not a never path, not under
// min_size). From the group view it takes the fair utilization
//
//	u* = Σⱼ servedⱼ / Σⱼ Cⱼ     (members up or unknown, itself included)
//
// where servedⱼ = loadⱼ − 10·redirectsⱼ is the load of what member j
// serves over its report window. The sum is the group's offered load: a
// request is served once, wherever it lands, so u* does not move when the
// members pass requests among themselves, and the window's slowness costs
// nothing. The mirror steers to u_T = max(u*, low_watermark) and redirects
// the share
//
//	p = clamp((10·(R + m) − u_T·C) / (10·A), 0, max_share)
//
// of its redirectable requests (FairShareRedirect), which leaves it
// serving R − p·A, exactly its target. A redirect goes, in the order of the
// group's policy, to the first sibling whose serving utilization is below
// max(u_T, what this mirror serves) (SiblingLimit, GroupSnapshot.PickBelow):
// the sibling's serving_load from the view (the same fast rate, published
// in its load report), plus 10 for every redirect per second that this
// mirror sends it more than when the view was made (SentMeter). With none,
// the request is served.
//
// Stability. p is a function of what comes in, not of what the mirror
// serves: the law is feed-forward (the exact excess fraction), there is no
// loop through the mirror's own output, and nothing to ring. A change of
// arrivals shows in R and A with the filter's lag alone: after a step from
// λ₀ to λ₁ above the target T the mirror serves T·λ₁/R̂(t), with
// R̂(t) = λ₁ − (λ₁ − λ₀)·e^(−t/τ), so it approaches T from above without
// crossing it, and what it serves over the target in all is
//
//	∫ (T·λ₁/R̂ − T) dt = T·τ·ln(λ₁/λ₀)
//
// (77 requests for a step from 70 to 210 per second with τ = 1 s;
// TestFairShareSettles measures exactly that, and one sign change at most
// after a step, a ramp and a resolver that leaves and comes back). The
// loops that remain go through the siblings. They receive redirects only
// while they serve less than the sender's limit, which rises with what the
// sender serves: so the redirects stop at the point where sender and
// receivers serve alike, not before (where the mirror with the hot spot
// would carry everyone's noise) and not after (where the receivers would
// go over their fair share). Σⱼ u_T·Cⱼ ≥ Σⱼ servedⱼ, so there is always room
// for the excess in the group as a whole. What the view shows of a
// sibling lags by the push and view intervals; the SentMeter bridges this
// mirror's own part of it, and max_share bounds what any mirror can send
// away. A mirror below the low watermark sends nobody away, however uneven
// the group. The loop through DNS (dnsd reads the reports, which count
// every request that arrives, redirected or not) is slower still.
//
// In the in-process skew scenario (TestSkewCorrection: four mirrors at 70%
// of the group's capacity, one resolver with half the requests and a 20 s
// TTL, 19 with a 45 s TTL, views every 250 ms) the busiest mirror serves
// 1.011× its fair share over 150 s and 1.10× in its worst 10 s bin; the
// watermark law, 1.046× and 1.25×; no correction, 1.10× and 2.7×.
package group

import (
	"errors"
	"time"
)

// Defaults and bounds of level 2 (the mirror config's dnsd and join keys).
const (
	// DefaultPushInterval is dnsd.push_interval. With 2 s, the skew
	// scenario meets its targets (≤ 1.05× a fair share over a minute, ≤
	// 1.25× in every 10 s bin) for every global policy with no interval or
	// law key set (TestSkewDefaults; 5 s gave 1.24× to 1.32× in the worst
	// bin), at half a push per second to each dnsd per mirror.
	DefaultPushInterval = 2 * time.Second
	// DefaultViewInterval is dnsd.view_interval: a group view fetched
	// every 2 s is half a request per second to dnsd per mirror.
	DefaultViewInterval = 2 * time.Second
	// DefaultMaxShare is redirect.max_share. The mirror the heavy resolver
	// of the skew scenario is on must send away more than half of what
	// comes in to reach its fair share; 0.5 left it at 1.38× to 1.44× in
	// the worst bin.
	DefaultMaxShare = 0.8
	// MaxLeaveWait bounds join.leave_wait, and the group's ttl.max when
	// leave_wait is 0: a leave never keeps a stopping mirror longer.
	MaxLeaveWait = time.Hour
)

// Errors of level 2.
var (
	// ErrPushRefused is returned when dnsd answers a load push with a
	// status other than 2xx.
	ErrPushRefused = errors.New("mirror: push refused")
	// ErrNotServing is why a site front end with no back end up answers
	// its health and load report endpoints 503 and skips its pushes.
	ErrNotServing = errors.New("mirror: no back end is up: not serving")
	// ErrBadView is returned when dnsd's group view can not be used: an
	// error status, too large, not JSON, another group, unknown policy.
	ErrBadView = errors.New("mirror: bad group view")
)
