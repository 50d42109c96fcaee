package acmeclient

import (
	"math/rand/v2"
	"time"
)

// Defaults of the renewal and the retries.
const (
	// DefaultRetryBase is the wait after the first failed order; each
	// further failure doubles it.
	DefaultRetryBase = 30 * time.Second
	// DefaultRetryMax is the longest wait between two orders that fail.
	DefaultRetryMax = time.Hour
	// DefaultOrderTimeout bounds one order, from the account to the
	// certificate.
	DefaultOrderTimeout = 5 * time.Minute
)

// RenewAt is when a certificate valid from notBefore to notAfter is
// renewed: at two thirds of its lifetime L, earlier by jitter·L/20
// (jitter in [0, 1), clamped there), so within [notBefore + 0.617·L,
// notBefore + 2/3·L]. It is monotonic in notAfter; a certificate whose
// notAfter is not after notBefore is renewed at notBefore (at once).
func RenewAt(notBefore, notAfter time.Time, jitter float64) time.Time {
	life := notAfter.Sub(notBefore)
	if life <= 0 {
		return notBefore
	}
	jitter = min(max(jitter, 0), 1)
	return notBefore.Add(life*2/3 - time.Duration(jitter*float64(life/20)))
}

// Backoff is the wait after the n-th failed order in a row (n >= 1):
// base·2^(n-1), at most ceiling, then scaled by a factor in [0.5, 1)
// drawn from r, so that mirrors that failed together do not retry
// together. n < 1 is taken as 1.
func Backoff(n int, base, ceiling time.Duration, r *rand.Rand) time.Duration {
	d := base
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	return d/2 + time.Duration(r.Float64()*float64(d/2))
}
