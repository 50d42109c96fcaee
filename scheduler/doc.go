// Package scheduler holds transmirror's global dispatch policies as pure,
// deterministic functions: the clock and randomness are passed in, so the
// simulator and the tests replay every decision exactly.
//
// # Use
//
// dnsd builds, per group and config snapshot, a Policy with New, and keeps
// a ScopeRates per group and a windowed Estimator (NewWindowEstimator) per
// group and address family. It rebuilds the Group snapshot with NewGroup
// whenever membership or up/down state changes, and feeds each load report
// to Estimator.ReportWindow and ScopeRates.Report. Per query, with one
// *rand.Rand per goroutine:
//
//	idx, failOpen := policy.Pick(group, scheduler.Query{
//		Client: scheduler.Client{Loc: loc, Key: scheduler.ScopeKey(scope)},
//		N: n, Rand: rng, Now: now, Load: est,
//	}, buf[:0])
//	a := rates.Answer(scope, scheduler.ScopeAnswer{Members: mask(idx), N: len(idx),
//		Min: minTTL, Max: maxTTL, Unseen: unseenTTL, Fair: membersUp}, now)
//	// a.TTL is the answer's TTL
//	est.Move(idx, members(a.Prev), a.PrevN,
//		scheduler.HiddenLoad(scheduler.AnswerRate(a.Rate, a.Copies)), a.PrevEnd, now)
//
// Members are named by their index in the Group. Pick appends up to N
// distinct indexes, best first, and allocates nothing when buf has room
// (except to memoise a location bucket seen for the first time).
//
// # Utilization
//
// The utilization of member i is the larger of its two fractions, of its
// capacity and of its uplink:
//
//	uᵢ = max((Lᵢ + Pᵢ(now)) / Cᵢ,  Bᵢ / BWᵢ)
//
// with Lᵢ the last reported load (the Estimator's latest report, else
// Member.Load), Cᵢ the capacity in the same units (load = 10·(r + m)), and
// Pᵢ the pending load: the sum of the hidden loads of the answers naming i
// since its last report, each decayed as 2^(−age/horizon). A report sets
// Pᵢ to 0, since it now shows those clients. Bᵢ is the last reported rate
// of response bytes and BWᵢ the member's bandwidth, both in bytes per
// second; without a bandwidth (BWᵢ = 0) the second fraction is 0, so a
// member that serves large files from a full uplink is full however few
// requests it serves. A member with no capacity has uᵢ = +Inf.
// Figures.Utilization is this definition, the one that dnsd's views and
// the mirrors' 302 correction use too.
//
// The watermarks low < high (defaults 0.7 and 0.9) define the taper
//
//	keep(u) = 1 for u ≤ low, (high − u)/(high − low) between, 0 for u ≥ high
//
// # Policies
//
// weighted: members that are up, drawn with probability Wᵢ/ΣW among those
// not drawn yet (without replacement); x is drawn from [0, ΣW) and the
// first member whose cumulative weight exceeds x wins, so no position is
// favoured. Only zero weights left: uniform.
//
// least-load: members that are up by ascending uᵢ (ties in random order).
// Every answer adds its hidden load to Pᵢ, so a burst of answers between two
// reports fills members in proportion to their capacities instead of all
// landing on the least loaded one.
//
// nearest: members by great-circle distance from the client. A member that
// is down is skipped; with u ≥ high it is skipped for the next nearest;
// between the watermarks it is kept with probability keep(u), else passed to
// the next nearest, so its share shrinks smoothly, with no cliff. If that
// leaves fewer than N, the passed-over members below high follow, then those
// above high (nearest first): load never empties an answer, only Up does.
//
// hash: weighted rendezvous hashing. Member i scores
// Wᵢ / −ln(hᵢ), hᵢ = hash(Client.Key, Name) mapped to (0, 1); the highest
// scores among the members that are up win. A key goes to i with probability
// Wᵢ/ΣW; when a member fails only its keys move, and a new member takes
// ≈ W_new/ΣW of the keys (1/n with equal weights), each from whoever had it.
// Load is ignored, by design: the point is stability.
//
// geo-load (the default): among the members that are up and below high,
// the nearest tier — every member within TierSlackKm (default 1000 km) of
// the nearest such member — is drawn from with weights
//
//	wᵢ = Cᵢ · Wᵢ · (high − uᵢ) · keep(uᵢ)
//
// spare capacity up to the high watermark, tapered a second time between
// the watermarks so it reaches 0 at high with zero slope. Below low a
// member's share is proportional to its spare capacity; a full member gets
// nothing; a tier with no room left hands on to the next tier outward.
// Beyond all tiers, the remaining members that are up follow, nearest first.
// With coarse locations (see DistanceKm) the slack makes a tier the client's
// country (distance 0), since the same continent is 2000 km away.
//
// Members at exactly the same distance (common with country-only
// locations) are ordered at random by nearest and the fill-ups, never by
// index.
//
// # Failing open
//
// When no member is up, every policy treats all members as up with no
// reported load (pending load still counts) and Pick reports failOpen, so
// dnsd can log and count it.
//
// # Location buckets
//
// Distances are measured from the centre of the client's 1°×1° cell (at
// most ≈ 80 km off), or from its country and continent when it has no
// coordinates. Each Group memoises the members sorted by distance for every
// bucket it is asked about, up to 2²⁰ member entries in all (at least 64
// buckets), then starts over; so the answer depends on the client's cell,
// which bounds the ECS scope the answer needs.
//
// # TTL skew
//
// An answer is not one request: a resolver caches it for the TTL and sends
// all its clients to the same member meanwhile. Three things follow: the
// TTL should be short for a scope s (a resolver address, or an ECS subnet)
// with many clients behind it and long for a quiet one; the load an answer
// brings is the scope's request rate r̂ₛ, which DNS does not show; and a
// member's report, a sliding average over its window W (10 s), shows a
// new scope's clients only gradually.
//
// Exposure. ScopeRates remembers, per scope, the last two answers of each
// address family: when, for how long, which members. So for a report of
// member j over [t − W, t] it knows aₛⱼ ∈ [0, 1], the fraction of the
// window during which s's cached answer named j, divided by the members
// the answer named, and by two while answers of both families were in use
// (an answer stops being used at its expiry or at the next answer of its
// family). Each member keeps the list of scopes whose answers named it;
// a scope leaves the list once its last answer to the member ended a
// window before the report, so a report costs time in proportion to the
// scopes that sent clients to that member, not to all scopes.
//
// Calibration. A report of Gⱼ requests per second on the group name (the
// mirrors' group_requests_per_second) is predicted by Ĝⱼ = Σₛ aₛⱼ·r̂ₛ, and
// corrects the estimates in two steps:
//
//	level:  r̂ₛ ← r̂ₛ · (Gⱼ/Ĝⱼ)^(η·aₛⱼ),   Gⱼ/Ĝⱼ clamped to [1/4, 4], η = 0.15
//	step:   r̂ₛ ← r̂ₛ + μ · vₛ·Δaₛⱼ / S · (ΔGⱼ − Σ Δaₛⱼ·r̂ₛ),   μ = 1
//	        S = Σ vₛ·Δaₛⱼ² + 2·Ḡⱼ·Δt/W²,   vₛ ← vₛ·(1 − μ·vₛ·Δaₛⱼ²/S) + (0.003·r̂ₛ)²
//
// The level step is a damped, online Richardson–Lucy (Poisson maximum
// likelihood) step: it fixes the sum on each member but moves the scopes
// that share a member by the same factor, so on its own it took 25 to 40
// minutes to separate 19 similar resolvers. The step equation compares a
// report with the member's previous one (windows overlapping, Δt < W):
// ΔGⱼ = Σ Δaₛⱼ·rₛ names only the scopes that came or went, and shares
// what their estimates do not explain among them, a diagonal Kalman update
// with each scope's variance vₛ and the Poisson noise of the requests that
// entered and left the window; vₛ grows back a little at every report so
// the estimates keep following. A new scope starts from the mean estimate
// of the scopes that have one (at first the group's total over the scopes
// remembered) with variance r̂ₛ². Estimates stay within [0.001, 10⁹].
//
// Measured (TestScopeRatesCalibration: 20 resolvers, one with 200 of the
// 400 requests per second, 19 with 10.5 each; 4 members reporting every
// second over 10 s; each answer re-drawn at random at its expiry):
//
//	answers            counts         heavy resolver     all 20 resolvers    at 40 min: worst, heavy
//	1 member, TTL 30   exact          ±5% from 2m18s     ±10% from 13m10s    0.1%, 0.0%
//	1 member, TTL 30   Poisson        ±10% from 2m39s    ±25% from 23m38s    15.5%, 1.3%
//	2 members, 20–300  exact          ±5% from 3m17s     ±10% from 28m43s    2.8%, 0.0%
//
// With the adaptive TTL the light resolvers keep an answer for about 145 s,
// so they move, and are measured, less often. Through dnsd's dispatcher (6
// members, 1-member answers, TTL 20–300) the heavy resolver is at 200.0
// and a light one at 10.38 after 20 minutes (TestScopesSurviveRestart).
//
// Without group requests (older mirrors) the rates fall back to the copies
// in cache: ScopeRates keeps the decaying sum Σ T of the TTLs given to s
// (half-life H), whose mean rate oₛ = (Σ T)·ln 2 / H ≈ query rate × TTL is
// the average number of copies s holds (≈ 1 for a busy resolver), and
//
//	rₛ = k · oₛ,   k = Σ reported r / Σₛ oₛ
//
// with k = 1 while no member has reported at all.
// All busy resolvers then look alike, whatever the number of their clients.
//
// Hidden load. An answer to s brings the members it names the load
// HiddenLoad(rₐ) = 10·rₐ, rₐ = r̂ₛ / max(1, oₛ) (a scope that holds several
// copies at once, many resolvers behind one ECS subnet, splits its rate
// over them), split evenly among them, from the answer's time t_a on; and
// when s's previous answer named other members, the same load leaves them
// from the time e it stopped being used. The windowed Estimator books both
// (Move) and counts of each booking of x load units at t₀ what the member's
// last report, made at t_r over W, does not show yet:
//
//	x · clamp(1 − (t_r − t₀)/W, 0, 1)
//
// so a booking ramps out over one window after the answer instead of
// vanishing at the next report, and a resolver that asks again moves its
// load instead of adding it. A member's load + pending never goes below 0.
// Bookings no report takes in within 64 s (reports lost) decay with the
// Estimator's horizon, the group's maximum TTL. In the dispatcher test a
// burst of 40 new resolvers in one region puts 18 on its two members of
// capacity 100 (10 load units each, up to the 0.9 watermark) and the rest
// on the next region; 40 more answers to one resolver leave the group's
// pending load at 400 ± 10.
//
// The adaptive TTL compares a scope with one member's fair share of the
// group's traffic, xₛ = r̂ₛ / (Σ r / n), with Σ r the members' group
// requests (or, falling back, their requests) and n the members up:
//
//	TTL = clamp(⌊max / (1 + xₛ/x₀)⌋, min, max),   x₀ = TTLRateScale = 0.1
//
// A scope that alone brings a tenth of a member's fair share gets max/2;
// for xₛ ≫ x₀ the member-seconds one answer pins, xₛ·TTL ≈ x₀·max, no
// longer grow with xₛ (until min). With 4 members and max 300, a resolver
// with 2.6% of the traffic (x = 0.104) gets 147 s and one with 50% (x = 2)
// gets min. A scope never seen gets the group's ttl.unseen (default min):
// it might be large, and what is not known is not made long.
//
// # Concurrency
//
// Groups and policies are immutable and safe for concurrent use; Estimator
// and ScopeRates lock internally; a *rand.Rand is not safe for concurrent
// use, so each goroutine needs its own.
package scheduler
