// Package probetest holds what every package's tests and e2e share: the
// one poll-until-deadline (Until: a condition is asked again and again
// until it holds or the time is up, and then the test fails with the
// condition's own last word on why not; no test sleeps for a fixed time to
// wait for something), the one free-port helper (FreeAddr) and the one
// throw-away certificate authority (NewCA). Tests only.
// It lives under probe, the lowest package that both daemons' tests and
// e2e may import.
package probetest

import (
	"testing"
	"time"
)

// Interval is how long Until waits between two asks of a condition.
const Interval = 20 * time.Millisecond

// Until asks cond every Interval until it returns "" (it holds), and fails
// the test with cond's last answer (why it does not hold yet) when it
// still does not hold within the deadline. cond is asked at least once,
// and once more after the deadline passed, so that a slow ask is not
// counted against it.
func Until(t testing.TB, within time.Duration, cond func() (whyNot string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, why)
		}
		time.Sleep(Interval) // between two asks, not a wait for the result
	}
}
