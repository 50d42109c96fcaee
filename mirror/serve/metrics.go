package serve

import (
	"io"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the public server's collectors, registered once in NewServer.
type metrics struct {
	requests *prometheus.CounterVec
	// byClass is requests' series by codeIndex and methodIndex, looked
	// up once.
	byClass  [5][3]prometheus.Counter
	bytes    prometheus.Counter
	duration prometheus.Histogram
	inFlight prometheus.Gauge
	sendCut  prometheus.Counter
	// tlsErrs are the failed handshakes of the HTTPS listeners.
	tlsErrs prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "transmirror", "mirror"
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "HTTP requests answered, by status code class (2xx...) and method (GET, HEAD, other).",
		}, []string{"code_class", "method"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "response_bytes_total",
			Help: "Response body bytes written.",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "request_duration_seconds",
			Help: "Time from the request's headers read to its handler's return (the last body byte handed to the kernel).",
			// 1ms .. ~4.4min, by 4: small files to whole images on slow links.
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "in_flight_requests",
			Help: "Requests being served.",
		}),
		sendCut: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "send_timeouts_total",
			Help: "Responses cut off because the client took nothing of them for timeouts.send.",
		}),
		tlsErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "tls_handshake_errors_total",
			Help: "TLS handshakes on the public HTTPS listeners (tls.listen) that failed: a client that hung up, spoke no TLS, or shared no version, cipher suite or certificate name.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.bytes, m.duration, m.inFlight, m.sendCut, m.tlsErrs} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for i := range m.byClass {
		for j, method := range []string{http.MethodGet, http.MethodHead, "other"} {
			m.byClass[i][j] = m.requests.WithLabelValues(codeClass((i+1)*100), methodLabel(method))
		}
	}
	return m, nil
}

// methodLabel maps a request method onto the bounded label set.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return method
	}
	return "other"
}

// codeClass maps a status code onto "1xx".."5xx"; anything else is "5xx".
func codeClass(code int) string {
	return [...]string{"1xx", "2xx", "3xx", "4xx", "5xx"}[codeIndex(code)]
}

// methodIndex is methodLabel's index in byClass: GET, HEAD, other.
func methodIndex(method string) int {
	switch method {
	case http.MethodGet:
		return 0
	case http.MethodHead:
		return 1
	}
	return 2
}

// codeIndex is codeClass's index in byClass: 1xx..5xx, anything outside
// 100..499 5xx.
func codeIndex(code int) int {
	if code < 100 || code >= 500 {
		return 4
	}
	return code/100 - 1
}

// instrument wraps next with the metrics. A panicking handler still
// leaves the in-flight gauge right and is counted as 5xx.
func (m *metrics) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		rec := &recorder{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			code := rec.code
			if code == 0 {
				code = http.StatusOK
			}
			if p := recover(); p != nil {
				code = http.StatusInternalServerError
				defer panic(p) // net/http logs it and closes the connection
			}
			m.byClass[codeIndex(code)][methodIndex(r.Method)].Inc()
			m.bytes.Add(float64(rec.n))
			m.duration.Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(rec, r)
	})
}

// recorder remembers the status code and counts body bytes. It passes
// io.ReaderFrom through, so http.ServeContent keeps using sendfile, and
// supports http.ResponseController through Unwrap.
type recorder struct {
	http.ResponseWriter
	code int
	n    int64
}

var _ io.ReaderFrom = (*recorder)(nil)

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.n += int64(n)
	return n, err
}

// ReadFrom hands src to the underlying writer's ReadFrom (sendfile) when
// it has one.
func (r *recorder) ReadFrom(src io.Reader) (int64, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := r.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		n, err = io.Copy(writerOnly{r.ResponseWriter}, src)
	}
	r.n += n
	return n, err
}

// Flush flushes the underlying writer when it can.
func (r *recorder) Flush() {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the underlying writer, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// writerOnly hides every method but Write, so io.Copy can not loop back.
type writerOnly struct{ io.Writer }
