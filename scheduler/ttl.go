package scheduler

import "math"

// TTLRateScale is x₀, the scope rate (in units of one member's fair share
// of the group's traffic) at which TTL halves the maximum TTL: a scope
// that alone brings a tenth of what one member should carry gets max/2.
const TTLRateScale = 0.1

// LoadPerRequestRate converts a request rate into load units the way the
// load report does (load = 10·(r + m)): r requests per second add 10·r.
const LoadPerRequestRate = 10

// TTL returns the adaptive TTL of an answer to a scope whose estimated
// request rate is x times one member's fair share of the group's traffic
// (x = r̂ₛ / (Σ r̂ / n), see ScopeRates.Answer):
//
//	ttl = ⌊maxTTL / (1 + x/TTLRateScale)⌋ clamped to [minTTL, maxTTL]
//
// It is maxTTL for x = 0 (and for NaN or negative x, treated as 0),
// non-increasing in x, and never outside [minTTL, maxTTL]; if minTTL >
// maxTTL the two are swapped. For x ≫ x₀ the member-seconds one answer
// pins, x · ttl ≈ x₀ · maxTTL, no longer grow with x (until minTTL).
func TTL(x float64, minTTL, maxTTL uint32) uint32 {
	if minTTL > maxTTL {
		minTTL, maxTTL = maxTTL, minTTL
	}
	if !(x > 0) { // NaN too
		return maxTTL
	}
	t := math.Floor(float64(maxTTL) / (1 + x/TTLRateScale))
	if t <= float64(minTTL) {
		return minTTL
	}
	return uint32(t) // t ≤ maxTTL: the divisor is ≥ 1
}

// HiddenLoad is the load, in load units, that an answer to a scope with an
// estimated request rate (requests per second, see ScopeRates.Rate) brings
// to the members it names while resolvers cache it: LoadPerRequestRate ×
// rate. It is what Estimator.Move should be given.
func HiddenLoad(rate float64) float64 { return LoadPerRequestRate * sane(rate) }

// AnswerRate is rₐ = r̂ₛ / max(1, oₛ), the request rate that one answer to
// a scope of estimated rate r̂ₛ carries, with oₛ the copies of the group's
// answers the scope holds in cache (ScopeAnswered.Copies): a busy resolver
// holds one, so its answer carries its whole rate; many resolvers behind
// one ECS subnet hold several, and each answer carries a part.
func AnswerRate(scopeRate, copies float64) float64 {
	scopeRate = sane(scopeRate)
	if copies = sane(copies); copies > 1 {
		return scopeRate / copies
	}
	return scopeRate
}
