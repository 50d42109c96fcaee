// Package webtest is what the tests of mirror/group still take from here
// of mirror/webtest, where the helpers moved so that the daemon's wiring
// (cmd/mirror) can test with them too. Delete it once those tests import
// mirror/webtest.
package webtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/mirror/webtest"
)

// SyncBuffer is webtest.SyncBuffer.
type SyncBuffer = webtest.SyncBuffer

// CounterValue is webtest.CounterValue.
func CounterValue(t testing.TB, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	return webtest.CounterValue(t, reg, name, label, value)
}
