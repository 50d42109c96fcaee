package site

import "math"

// AdmissionLimit is the bound of the policy called name on the requests
// outstanding over all back ends, whose weights add up to weights (in
// units of the default weight 1; n = max(weights, 1)), with parameters
// p (zero fields take their defaults), or 0 when the policy has none.
//
// LARD's front end (Pai et al. 1998, §2.3) admits at most
// S = ⌊(n−1)·T_high + T_low − 1⌋ requests, at least 1, and holds the
// rest in a queue until one completes: with more in flight every back
// end could be above T_high at once, and the thresholds would lose their
// meaning. That is the bound of lard, lard-r and tb-ccrd, the policies
// that move load by T_low and T_high. The others (and a name that is not
// a policy) have none: 0.
func AdmissionLimit(name string, p Params, weights float64) int {
	switch name {
	case LARD, LARDR, TBCCRD:
	default:
		return 0
	}
	p = p.withDefaults()
	n := math.Max(weights, 1)
	return max(1, int(math.Floor((n-1)*p.THigh+p.TLow-1)))
}
