package contentmap

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of transmirror_<daemon>_content_fetch_errors_total, a bounded set.
const (
	// ReasonConnect: the request failed (connection, TLS, timeout).
	ReasonConnect = "connect"
	// ReasonStatus: an answer other than 200, 304, 404 and 429.
	ReasonStatus = "status"
	// ReasonRefused: the index or change set was refused by the Replica.
	ReasonRefused = "refused"
	// ReasonRateLimited: the member answered 429.
	ReasonRateLimited = "rate_limited"
)

// Reasons lists every reason label.
var Reasons = [...]string{ReasonConnect, ReasonStatus, ReasonRefused, ReasonRateLimited}

type metrics struct {
	errors *prometheus.CounterVec
}

// newMetrics registers the map's metrics in reg (none when nil); the maps
// of one daemon share them, each with its groups' label values.
func newMetrics(reg prometheus.Registerer, subsystem string) (*metrics, error) {
	m := &metrics{errors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: subsystem, Name: "content_fetch_errors_total",
		Help: "Fetches of a member's content index that failed or were refused, by group and reason.",
	}, []string{"group", "reason"})}
	if reg == nil {
		return m, nil
	}
	err := reg.Register(m.errors)
	var dup prometheus.AlreadyRegisteredError
	switch {
	case errors.As(err, &dup): // another map of this daemon (a front end's of its back ends, beside its siblings')
		vec, ok := dup.ExistingCollector.(*prometheus.CounterVec)
		if !ok {
			return nil, fmt.Errorf("content: register metrics: %w", err)
		}
		m.errors = vec
	case err != nil:
		return nil, fmt.Errorf("content: register metrics: %w", err)
	}
	return m, nil
}

// failed counts a failed fetch of a member of group.
func (m *metrics) failed(group, reason string) {
	m.errors.WithLabelValues(group, reason).Inc()
}

// forget removes the label values of a group that has no member left.
func (m *metrics) forget(group string) {
	m.errors.DeletePartialMatch(prometheus.Labels{"group": group})
}
