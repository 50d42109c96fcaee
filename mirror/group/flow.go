package group

import (
	"math"
	"sync"
	"time"
)

// DefaultTimeConstant is redirect.time_constant: the time constant of the
// FlowMeter's rates, the signal of the fair-share correction.
const DefaultTimeConstant = time.Second

// Flows are a mirror's request rates now, in requests per second, as a
// FlowMeter measures them: exponentially weighted, so a change of rate
// shows by 63% after one time constant.
type Flows struct {
	// Arrivals is every request that reached the mirror (on the group
	// name, on its own host name, redirected or not).
	Arrivals float64
	// Redirectable is the requests that could be redirected: on the group
	// name, GET or HEAD, with redirects enabled, not a never path and not
	// under min_size.
	Redirectable float64
	// Served is the requests served rather than redirected.
	Served float64
}

// FlowMeter measures a mirror's Flows from the requests the Redirector
// sees, at the moment it decides, as exponentially weighted rates with
// time constant τ: each request adds 1/τ, and the sum decays as e^(−t/τ).
// A steady stream of r requests per second reads r; the noise of a Poisson
// stream is √(r/2τ). The load report's sliding window (10 s) is too slow
// for the decision: a mirror would go on serving a hot spot for seconds
// after a resolver moved to it. A FlowMeter is safe for concurrent use.
type FlowMeter struct {
	tau float64 // seconds

	mu                             sync.Mutex
	at                             time.Time // when the sums were last decayed; zero: never
	arrivals, redirectable, served float64   // sums of 1/τ, as of at
}

// NewFlowMeter returns a FlowMeter with time constant tau
// (DefaultTimeConstant when tau ≤ 0).
func NewFlowMeter(tau time.Duration) *FlowMeter {
	if tau <= 0 {
		tau = DefaultTimeConstant
	}
	return &FlowMeter{tau: tau.Seconds()}
}

// TimeConstant returns the meter's time constant.
func (f *FlowMeter) TimeConstant() time.Duration {
	return time.Duration(f.tau * float64(time.Second))
}

// decay brings the sums to now; the caller holds mu. A time before the
// last one (a clock step back) decays nothing.
func (f *FlowMeter) decay(now time.Time) {
	if f.at.IsZero() {
		f.at = now
		return
	}
	dt := now.Sub(f.at).Seconds()
	if dt <= 0 {
		return
	}
	k := math.Exp(-dt / f.tau)
	f.arrivals *= k
	f.redirectable *= k
	f.served *= k
	f.at = now
}

// Note counts one request at now: an arrival, redirectable or not, and
// served or redirected.
func (f *FlowMeter) Note(now time.Time, redirectable, redirected bool) {
	x := 1 / f.tau
	f.mu.Lock()
	f.decay(now)
	f.arrivals += x
	if redirectable {
		f.redirectable += x
	}
	if !redirected {
		f.served += x
	}
	f.mu.Unlock()
}

// Flows returns the rates at now.
func (f *FlowMeter) Flows(now time.Time) Flows {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decay(now)
	return Flows{Arrivals: f.arrivals, Redirectable: f.redirectable, Served: f.served}
}

// Served returns the rate of requests served at now: the Reporter's
// serving figure (probe.ReporterConfig.Serving).
func (f *FlowMeter) Served(now time.Time) float64 { return f.Flows(now).Served }

// SentMeter measures the rate of redirects this mirror sends to each
// sibling, by member name, as exponentially weighted rates with the time
// constant of the siblings' serving load. It outlives the group views: a
// view shows a sibling's serving load with this mirror's redirects of
// the time of the view in it, so what the sibling serves now is that
// figure plus the change of this mirror's rate to it since
// (GroupSnapshot.Serving). Booking every redirect on top of the view's
// figure instead would count a steady stream twice. A SentMeter is safe
// for concurrent use.
type SentMeter struct {
	tau float64 // seconds

	mu sync.Mutex
	m  map[string]*sentRate
}

type sentRate struct {
	v  float64 // sum of 1/τ, as of at
	at time.Time
}

// NewSentMeter returns a SentMeter with time constant tau
// (DefaultTimeConstant when tau ≤ 0).
func NewSentMeter(tau time.Duration) *SentMeter {
	if tau <= 0 {
		tau = DefaultTimeConstant
	}
	return &SentMeter{tau: tau.Seconds(), m: make(map[string]*sentRate)}
}

// value returns s at now; the caller holds mu.
func (m *SentMeter) value(s *sentRate, now time.Time) float64 {
	if dt := now.Sub(s.at).Seconds(); dt > 0 {
		return s.v * math.Exp(-dt/m.tau)
	}
	return s.v
}

// Note counts one redirect to member at now.
func (m *SentMeter) Note(member string, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.m[member]
	if s == nil {
		s = &sentRate{at: now}
		m.m[member] = s
	}
	s.v = m.value(s, now) + 1/m.tau
	if now.After(s.at) {
		s.at = now
	}
}

// Rate returns the rate of redirects to member at now, per second.
func (m *SentMeter) Rate(member string, now time.Time) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.m[member]; s != nil {
		return m.value(s, now)
	}
	return 0
}

// Rates returns the rate of redirects to every member sent one, at now.
func (m *SentMeter) Rates(now time.Time) map[string]float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]float64, len(m.m))
	for name, s := range m.m {
		out[name] = m.value(s, now)
	}
	return out
}

// Retain forgets every member but those keep says to keep: the members
// of the current view, so that the table is bounded by the group.
func (m *SentMeter) Retain(keep func(member string) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.m {
		if !keep(name) {
			delete(m.m, name)
		}
	}
}
