// Package scheduler holds transmirror's global dispatch policies as pure,
// deterministic functions: the clock and randomness are passed in, so the
// simulator and the tests replay every decision exactly.
//
// # Use
//
// dnsd builds, per group and config snapshot, a Policy with New, and keeps
// an Estimator and a ScopeRates per group. It rebuilds the Group snapshot
// with NewGroup whenever membership or up/down state changes, and feeds load
// reports to Estimator.Report. Per query, with one *rand.Rand per goroutine:
//
//	share := rates.Share(scope, now)
//	ttl := scheduler.TTL(share, minTTL, maxTTL)
//	idx, failOpen := policy.Pick(group, scheduler.Query{
//		Client: scheduler.Client{Loc: loc, Key: scheduler.ScopeKey(scope)},
//		N: n, Rand: rng, Now: now, Load: est,
//	}, buf[:0])
//	rate := rates.Observe(scope, ttl, now)
//	est.Add(idx, scheduler.HiddenLoad(scheduler.AnswerRate(rate, k)), now)
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
// all its clients to the same member meanwhile. What dnsd observes per scope
// s (a resolver address, or an ECS subnet) is its queries and the TTL T it
// gave each. From them ScopeRates keeps the decaying sum Σ T over the
// queries (half-life H), whose mean rate
//
//	oₛ = (Σ T) · ln 2 / H  ≈  query rate × TTL
//
// is the average number of copies of our answer the scope holds in cache
// (≈ 1 for a busy resolver, which asks again as soon as its copy expires;
// < 1 for a quiet one). How many requests the clients send while a copy is
// cached is not observable in DNS. ScopeRates assumes a constant k requests
// per second per cached copy (RatePerCachedAnswer, default 1):
//
//	rₛ = k · oₛ          (requests per second)
//
// In particular all busy resolvers look alike, whatever the number of
// clients behind them. k can be calibrated from the load reports: k =
// Σ reported r / Σₛ oₛ. Evicted scopes stay in the total.
//
// The hidden load of an answer is the request rate that one cached copy
// carries, for T seconds (rₐ · T requests):
//
//	rₐ = rₛ / max(1, oₛ)   (= k for a scope that holds a copy all the time)
//
// A scope that holds several copies at once (many resolvers behind one ECS
// subnet, or a resolver that does not cache) splits its rate over them,
// instead of booking its whole rate once per answer. In load units that is
// LoadPerRequestRate · rₐ = 10 · rₐ (HiddenLoad): what the Estimator's
// pending load grows by, split evenly among the members of the answer.
//
// The adaptive TTL of an answer to a scope with share σ = rₛ / Σ r is
//
//	TTL = clamp(⌊max / (1 + σ/σ₀)⌋, min, max),   σ₀ = TTLShareScale = 0.01
//
// so a quiet scope gets max, a scope with 1% of the traffic max/2, and for
// σ ≫ σ₀ the hidden load of one answer, σ · Σr · TTL ≈ σ₀ · Σr · max,
// no longer grows with σ (until min).
//
// # Concurrency
//
// Groups and policies are immutable and safe for concurrent use; Estimator
// and ScopeRates lock internally; a *rand.Rand is not safe for concurrent
// use, so each goroutine needs its own.
package scheduler
