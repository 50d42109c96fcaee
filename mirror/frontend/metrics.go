package frontend

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/scheduler/site"
)

// Error kinds of transmirror_mirror_backend_errors_total.
const (
	errDial    = "dial"    // could not connect (other than refused)
	errRefused = "refused" // connection refused
	errReset   = "reset"   // connection reset or broken pipe
	errTimeout = "timeout" // dial, response header or body timeout
	errBody    = "body"    // the response body failed after the headers
	errHandoff = "handoff" // handing a connection off failed
	errHealth  = "health"  // an active health check failed
	errReport  = "report"  // fetching the back end's report failed
	errOther   = "other"
)

var errKinds = []string{errDial, errRefused, errReset, errTimeout, errBody, errHandoff, errHealth, errReport, errOther}

// Results of transmirror_mirror_handoffs_total.
const (
	handoffOK       = "ok"       // the back end took the connection
	handoffError    = "error"    // sending it failed after the hijack: 502
	handoffFallback = "fallback" // not handed off (TLS, HTTP/2, a body, socket down): proxied
)

// Reasons of transmirror_mirror_site_queue_rejected_total.
const (
	queueFull    = "full"
	queueTimeout = "timeout"
	queueGone    = "gone"
)

// metrics are the front end's collectors, one Collector so that a
// handler built from a reloaded config shares them (probe.RegisterShared). It
// counts which handlers use each back end name, so that a name's label
// values go away with the last handler that has it.
type metrics struct {
	picks        *prometheus.CounterVec
	inFlight     *prometheus.GaugeVec
	up           *prometheus.GaugeVec
	errors       *prometheus.CounterVec
	changes      *prometheus.CounterVec
	retries      prometheus.Counter
	handoffs     *prometheus.CounterVec
	proxiedBytes prometheus.Counter
	allDown      prometheus.Counter
	// Back ends that hold different files (site.content, content.go).
	contentLookups *prometheus.CounterVec
	contentMisses  prometheus.Counter
	// contentHoldersDown counts the held requests whose holders were all down.
	contentHoldersDown prometheus.Counter
	// Admission (see admission.go).
	admissionLimit prometheus.Gauge
	queued         prometheus.Gauge
	queueWait      prometheus.Histogram
	queueRejected  *prometheus.CounterVec
	// reassignments is fed at scrape time from the policies' states.
	reassignments *prometheus.CounterVec
	policies      map[*handler]uint64 // live handlers → Reassignments counted

	mu     sync.Mutex
	owners map[string]int    // back end name → handlers using it
	pairs  map[[2]string]int // (policy, back end) → handlers using it
}

func newMetrics() *metrics {
	const ns, sub = "transmirror", "mirror"
	m := &metrics{
		picks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "backend_picks_total",
			Help: "Back ends picked by the site policy, including retries.",
		}, []string{"policy", "backend"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "backend_requests_in_flight",
			Help: "Requests the front end has in flight on each back end (the policies' load).",
		}, []string{"backend"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "backend_up",
			Help: "1 when the back end takes requests (health up or not yet known), 0 when down.",
		}, []string{"backend"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "backend_errors_total",
			Help: "Failed requests, handoffs and health checks, by back end and kind.",
		}, []string{"backend", "kind"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "backend_health_changes_total",
			Help: "Flips of back-end health, by the state entered.",
		}, []string{"backend", "state"}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "retries_total",
			Help: "Idempotent requests retried on another back end after a failure before the response.",
		}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "handoffs_total",
			Help: "Connection handoffs to back ends, by result (ok, error, fallback).",
		}, []string{"result"}),
		proxiedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "proxied_bytes_total",
			Help: "Response body bytes relayed from back ends to clients through the front end.",
		}),
		allDown: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "all_backends_down_total",
			Help: "Picks made while every back end was down (the front end fails open).",
		}),
		policies: make(map[*handler]uint64),
		owners:   make(map[string]int),
		pairs:    make(map[[2]string]int),
	}
	m.newSiteMetrics(ns, sub)
	for _, p := range []string{site.LARD, site.LARDR} {
		m.reassignments.WithLabelValues(p)
	}
	for _, r := range []string{queueFull, queueTimeout, queueGone} {
		m.queueRejected.WithLabelValues(r)
	}
	for _, r := range []string{handoffOK, handoffError, handoffFallback} {
		m.handoffs.WithLabelValues(r)
	}
	for _, r := range contentResults {
		m.contentLookups.WithLabelValues(r)
	}
	return m
}

// newSiteMetrics makes the metrics of site.content, the admission limit
// and LARD's reassignments.
func (m *metrics) newSiteMetrics(ns, sub string) {
	m.contentLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "site_content_lookups_total",
		Help: "Requests looked up in the back ends' content indexes (site.content), by result: held (sent to the back ends that hold the file), unknown (no index known: any back end), not_a_file (the root, a listing: any back end), miss (no back end holds it: the usual pick).",
	}, []string{"result"})
	m.contentMisses = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "site_content_misses_total",
		Help: "Requests for a path that no back end's index holds, even after a refresh (site.content): the usual pick, which answers 404.",
	})
	m.contentHoldersDown = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "site_content_holders_down_total",
		Help: "Requests whose file only back ends that are down hold (site.content): the usual pick.",
	})
	m.admissionLimit = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "site_admission_limit",
		Help: "Requests the front end lets be in flight over all back ends; 0: no limit.",
	})
	m.queued = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: sub, Name: "site_queue_length",
		Help: "Requests waiting for admission.",
	})
	m.queueWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: sub, Name: "site_queue_wait_seconds",
		Help:    "Time requests that found every slot taken waited for admission.",
		Buckets: []float64{0.001, 0.005, 0.025, 0.1, 0.25, 1, 2.5, 10},
	})
	m.queueRejected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "site_queue_rejected_total",
		Help: "Requests not admitted, by reason: full (503), timeout (503 after max_wait), gone (the client left).",
	}, []string{"reason"})
	m.reassignments = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: sub, Name: "site_reassignments_total",
		Help: "LARD's load-driven decisions, by policy: targets moved to another back end (lard), back ends added to a target's set (lard-r).",
	}, []string{"policy"})
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.picks, m.inFlight, m.up, m.errors, m.changes, m.retries, m.handoffs, m.proxiedBytes, m.allDown,
		m.contentLookups, m.contentMisses, m.contentHoldersDown, m.admissionLimit, m.queued, m.queueWait, m.queueRejected, m.reassignments}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	for h := range m.policies {
		m.countReassignments(h)
	}
	m.mu.Unlock()
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}

// follow counts h's policy's reassignments from now on.
func (m *metrics) follow(h *handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.policies[h] = 0
}

// unfollow counts h's last reassignments and forgets h.
func (m *metrics) unfollow(h *handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.countReassignments(h)
	delete(m.policies, h)
}

// countReassignments adds what h's policy did since the last count; the
// caller holds mu.
func (m *metrics) countReassignments(h *handler) {
	st, ok := h.policy.(site.Stater)
	if !ok {
		return
	}
	l := st.State().LARD
	if l == nil || l.Reassignments <= m.policies[h] {
		return
	}
	m.reassignments.WithLabelValues(h.policy.Name()).Add(float64(l.Reassignments - m.policies[h]))
	m.policies[h] = l.Reassignments
}

// adopt makes the series of a new handler's back ends exist.
func (m *metrics) adopt(policy string, bs []*backend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range bs {
		m.owners[b.name]++
		m.pairs[[2]string{policy, b.name}]++
		b.picks = m.picks.WithLabelValues(policy, b.name)
		b.inFlight = m.inFlight.WithLabelValues(b.name)
		m.up.WithLabelValues(b.name).Set(1)
		for _, k := range errKinds {
			m.errors.WithLabelValues(b.name, k)
		}
	}
}

// release deletes the series of back ends that no handler has any more.
func (m *metrics) release(policy string, bs []*backend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range bs {
		pair := [2]string{policy, b.name}
		if m.pairs[pair]--; m.pairs[pair] <= 0 {
			delete(m.pairs, pair)
			m.picks.DeleteLabelValues(policy, b.name)
		}
		if m.owners[b.name]--; m.owners[b.name] > 0 {
			continue
		}
		delete(m.owners, b.name)
		m.inFlight.DeleteLabelValues(b.name)
		m.up.DeleteLabelValues(b.name)
		m.errors.DeletePartialMatch(prometheus.Labels{"backend": b.name})
		m.changes.DeletePartialMatch(prometheus.Labels{"backend": b.name})
	}
}
