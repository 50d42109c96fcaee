package scheduler

import "math"

// TTLShareScale is the traffic share s₀ at which TTL halves the maximum
// TTL: a scope carrying 1% of the group's requests gets max/2.
const TTLShareScale = 0.01

// LoadPerRequestRate converts a request rate into load units the way the
// load report does (load = 10·(r + m)): r requests per second add 10·r.
const LoadPerRequestRate = 10

// TTL returns the adaptive TTL of an answer to a scope carrying share
// (0..1) of the group's traffic:
//
//	ttl = ⌊maxTTL / (1 + share/TTLShareScale)⌋ clamped to [minTTL, maxTTL]
//
// It is maxTTL for share 0 (and for NaN or negative shares, treated as 0),
// non-increasing in share, and never outside [minTTL, maxTTL]; if minTTL >
// maxTTL the two are swapped.
func TTL(share float64, minTTL, maxTTL uint32) uint32 {
	if minTTL > maxTTL {
		minTTL, maxTTL = maxTTL, minTTL
	}
	if !(share > 0) { // NaN too
		return maxTTL
	}
	t := math.Floor(float64(maxTTL) / (1 + share/TTLShareScale))
	if t <= float64(minTTL) {
		return minTTL
	}
	return uint32(t) // t ≤ maxTTL: the divisor is ≥ 1
}

// HiddenLoad is the load, in load units, that one answer to a scope with an
// estimated request rate (requests per second, see ScopeRates.Rate) puts on
// the members it names while resolvers cache it: LoadPerRequestRate × rate,
// for as long as the TTL (rate × TTL requests in all). It is what
// Estimator.Add should be given.
func HiddenLoad(rate float64) float64 { return LoadPerRequestRate * sane(rate) }

// AnswerRate is rₐ = rₛ / max(1, rₛ/k), the request rate that one answer
// to a scope of estimated rate rₛ carries while cached, with k requests per
// second per cached copy (see the package doc, "TTL skew"). k ≤ 0 means
// DefaultRatePerCachedAnswer.
func AnswerRate(scopeRate, k float64) float64 {
	if !(k > 0) {
		k = DefaultRatePerCachedAnswer
	}
	scopeRate = sane(scopeRate)
	if copies := scopeRate / k; copies > 1 {
		return scopeRate / copies
	}
	return scopeRate
}
