package frontend

import (
	"net/url"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler/site"
)

// MaxStatusBackends bounds the back ends that a Status lists; the rest
// are counted in Status.Omitted.
const MaxStatusBackends = 256

// Status describes a site front end: its mode, policy and back ends, as
// the mirror's status page and JSON show them.
type Status struct {
	// Mode is proxy, redirect or handoff.
	Mode string `json:"mode"`
	// Policy is the site policy's name.
	Policy string `json:"policy"`
	// PolicyState is the policy's state, when it reports one (site.Stater).
	PolicyState *site.Stats `json:"policy_state,omitempty"`
	// Backends are the back ends in configuration order, at most
	// MaxStatusBackends; Omitted counts the rest.
	Backends []BackendStatus `json:"backends"`
	Omitted  int             `json:"omitted,omitempty"`
	// Retries counts requests retried on another back end; AllDownPicks
	// picks made while every back end was down (since the start).
	Retries      uint64 `json:"retries"`
	AllDownPicks uint64 `json:"all_down_picks"`
	// Admission is the admission limit and its queue.
	Admission AdmissionStatus `json:"admission"`
}

// AdmissionStatus describes the front end's admission limit (see
// AdmissionConfig).
type AdmissionStatus struct {
	// Limit is the bound on requests in flight over all back ends, 0 for
	// none; InFlight the requests admitted now.
	Limit    int `json:"limit"`
	InFlight int `json:"in_flight"`
	// Queued is the requests waiting now, Queue the most that may wait.
	Queued int `json:"queued"`
	Queue  int `json:"queue"`
}

// BackendStatus describes one back end of a site front end.
type BackendStatus struct {
	// Name is the configured name.
	Name string `json:"name"`
	// URL is where requests go, without user information, query or
	// fragment.
	URL string `json:"url"`
	// PublicURL is where redirect mode sends clients, likewise; "" in
	// other modes.
	PublicURL string `json:"public_url,omitempty"`
	// Health is up, down or unknown (a new back end, which takes
	// requests).
	Health string `json:"health"`
	// LastError is the kind of the last failed check or request ("" for
	// none).
	LastError string `json:"last_error,omitempty"`
	// Weight and MemoryBytes are the configured figures.
	Weight      float64 `json:"weight"`
	MemoryBytes int64   `json:"memory_bytes"`
	// InFlight is the requests in flight on it (the policies' load).
	InFlight int64 `json:"in_flight"`
	// Picks counts the policy's picks of it, Errors its failed requests,
	// handoffs and health checks (since the start).
	Picks  uint64 `json:"picks"`
	Errors uint64 `json:"errors"`
	// BytesPerSecond is the rate of its completed responses' bytes (2 s
	// time constant); Bandwidth its configured bandwidth in bytes per
	// second (0: no limit).
	BytesPerSecond float64 `json:"bytes_per_second"`
	Bandwidth      float64 `json:"bandwidth"`
	// Report is what its last report said (backends[].admin_url); nil
	// without admin_url or before the first.
	Report *ReportStatus `json:"report,omitempty"`
}

// ReportStatus is a back end's last report as the front end uses it.
type ReportStatus struct {
	// AgeSeconds is the time since it was read.
	AgeSeconds float64 `json:"age_seconds"`
	// InFlight is the in-flight count it gave; in redirect mode the
	// policy adds the redirects issued since.
	InFlight int64 `json:"in_flight"`
	// MemoryBytes and MaxObjectBytes are its cache, which the policy uses
	// instead of the configured memory.
	MemoryBytes    int64 `json:"memory_bytes"`
	MaxObjectBytes int64 `json:"max_object_bytes"`
}

// Status returns the front end's mode, its policy's state and its
// back ends.
func (h *handler) Status() Status {
	s := Status{
		Mode: h.mode, Policy: h.policy.Name(),
		Retries: uint64(probe.MetricValue(h.m.retries)), AllDownPicks: uint64(probe.MetricValue(h.m.allDown)),
	}
	if st, ok := h.policy.(site.Stater); ok {
		ps := st.State()
		s.PolicyState = &ps
	}
	s.Admission.InFlight, s.Admission.Queued = h.adm.state()
	s.Admission.Limit, s.Admission.Queue = h.adm.limit, h.adm.queue
	// The counters are shared with handlers of other configs: read this
	// policy's picks, and the errors of every kind, by back end.
	picks := make(map[string]float64, len(h.backends))
	probe.EachSample(h.m.picks, func(l map[string]string, v float64) {
		if l["policy"] == s.Policy {
			picks[l["backend"]] += v
		}
	})
	errs := make(map[string]float64, len(h.backends))
	probe.EachSample(h.m.errors, func(l map[string]string, v float64) { errs[l["backend"]] += v })

	n := min(len(h.backends), MaxStatusBackends)
	s.Omitted = len(h.backends) - n
	s.Backends = make([]BackendStatus, n)
	for i, b := range h.backends[:n] {
		b.health.mu.Lock()
		state, lastErr := b.health.state, b.health.lastError
		b.health.mu.Unlock()
		bs := BackendStatus{
			Name: b.name, URL: redactURL(b.url), Health: state.String(), LastError: lastErr,
			Weight: b.weight, MemoryBytes: b.memory, InFlight: max(b.active.Load(), 0),
			Picks: uint64(picks[b.name]), Errors: uint64(errs[b.name]),
			BytesPerSecond: b.sent.perSecond(h.now()), Bandwidth: b.bandwidth,
		}
		if b.public != nil {
			bs.PublicURL = redactURL(b.public)
		}
		b.rep.mu.Lock()
		if !b.rep.at.IsZero() {
			bs.Report = &ReportStatus{AgeSeconds: max(h.now().Sub(b.rep.at).Seconds(), 0), InFlight: int64(b.rep.inFlight),
				MemoryBytes: b.rep.memory, MaxObjectBytes: b.rep.maxObject}
		}
		b.rep.mu.Unlock()
		s.Backends[i] = bs
	}
	return s
}

// redactURL returns u as a string without user information, query and
// fragment, which may hold credentials.
func redactURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return r.String()
}
