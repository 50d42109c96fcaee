package content

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// The bounded label values of the metrics: scans_total's result and
// answers_total's answer.
var (
	scanResults = [...]string{"ok", "failed"}
	answers     = [...]string{kindFull, kindChanges, "not_modified", "rate_limited", "bad_request"}
)

// Metrics are the collectors of a Scanner and its Handler, all under
// transmirror_mirror_content_index_.
type Metrics struct {
	files, pathBytes, version, skipped, scanSeconds prometheus.Gauge
	scans, answers                                  *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns, sub = "transmirror", "mirror"
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help})
	}
	m := &Metrics{
		files:       gauge("content_index_files", "Regular files in the content index."),
		pathBytes:   gauge("content_index_bytes", "Memory that the content index's arrays and paths hold."),
		version:     gauge("content_index_version", "The content index's version."),
		skipped:     gauge("content_index_skipped", "Names and directories that the last scan skipped (not a clean UTF-8 path, unreadable)."),
		scanSeconds: gauge("content_index_last_scan_seconds", "How long the last scan of the document root took."),
		scans: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "content_index_scans_total", Help: "Scans of the document root, by result."}, []string{"result"}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "content_index_answers_total", Help: "Answers of the content index API, by answer."}, []string{"answer"}),
	}
	for _, r := range scanResults {
		m.scans.WithLabelValues(r)
	}
	for _, a := range answers {
		m.answers.WithLabelValues(a)
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.files, m.pathBytes, m.version, m.skipped, m.scanSeconds, m.scans, m.answers} {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

// scanned records a scan (m may be nil).
func (m *Metrics) scanned(x *Index, skipped int, seconds float64, err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.scans.WithLabelValues("failed").Inc()
		return
	}
	m.scans.WithLabelValues("ok").Inc()
	m.files.Set(float64(x.Len()))
	m.pathBytes.Set(float64(x.Bytes()))
	m.version.Set(float64(x.Version()))
	m.skipped.Set(float64(skipped))
	m.scanSeconds.Set(seconds)
}

// answered counts an answer (m may be nil).
func (m *Metrics) answered(answer string) {
	if m != nil {
		m.answers.WithLabelValues(answer).Inc()
	}
}
