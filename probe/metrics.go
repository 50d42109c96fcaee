package probe

import "github.com/prometheus/client_golang/prometheus"

// metrics are a Watcher's collectors, registered once in NewWatcher.
type metrics struct {
	probes   *prometheus.CounterVec
	failures *prometheus.CounterVec
	duration *prometheus.HistogramVec
	state    *prometheus.GaugeVec
	changes  *prometheus.CounterVec
	pushes   *prometheus.CounterVec
	retimed  *prometheus.CounterVec
	inFlight prometheus.Gauge
}

// memberMetrics are one member's children, looked up once.
type memberMetrics struct {
	ok, fail prometheus.Counter
	duration prometheus.Observer
	state    [len(stateNames)]prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "transmirror", "probe"
	m := &metrics{
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "probes_total",
			Help: "Pull probes of members' load reports, by group and result (success, failure).",
		}, []string{"group", "result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "failures_total",
			Help: "Failed probes by group and the phase that failed first (dns, connect, tls, response, status, body, decode, validate, stale).",
		}, []string{"group", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "duration_seconds",
			Help:    "Duration of pull probes, by group.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"group"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "member_state",
			Help: "Health of a member: 1 for its current state (unknown, up, down), 0 for the others.",
		}, []string{"group", "member", "state"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "state_changes_total",
			Help: "Health state changes of members, by group and the state changed to.",
		}, []string{"group", "to"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "pushes_total",
			Help: "Pushed load reports, by group (empty when unknown) and result (accepted; duplicate: the newest report again, taken with no effect; rejected).",
		}, []string{"group", "result"}),
		retimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "retimed_reports_total",
			Help: "Pulled load reports whose time was off the watcher's clock by more than the report limits, timed by the watcher's clock instead (the member's clock is off), by group.",
		}, []string{"group"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "in_flight_probes",
			Help: "Pull probes in flight.",
		}),
	}
	for _, c := range []prometheus.Collector{m.probes, m.failures, m.duration, m.state, m.changes, m.pushes, m.retimed, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) member(group, member string) memberMetrics {
	mm := memberMetrics{
		ok:       m.probes.WithLabelValues(group, "success"),
		fail:     m.probes.WithLabelValues(group, "failure"),
		duration: m.duration.WithLabelValues(group),
	}
	for i, s := range stateNames {
		mm.state[i] = m.state.WithLabelValues(group, member, s)
	}
	return mm
}

func (mm memberMetrics) setState(s State) {
	for i, g := range mm.state {
		if State(i) == s {
			g.Set(1)
		} else {
			g.Set(0)
		}
	}
}

// deleteMember removes a member's label values.
func (m *metrics) deleteMember(group, member string) {
	for _, s := range stateNames {
		m.state.DeleteLabelValues(group, member, s)
	}
}

// deleteGroup removes a group's label values once it has no member left.
func (m *metrics) deleteGroup(group string) {
	l := prometheus.Labels{"group": group}
	m.probes.DeletePartialMatch(l)
	m.failures.DeletePartialMatch(l)
	m.duration.DeletePartialMatch(l)
	m.changes.DeletePartialMatch(l)
	m.pushes.DeletePartialMatch(l)
	m.retimed.DeletePartialMatch(l)
	m.state.DeletePartialMatch(l)
}
