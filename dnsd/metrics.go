package dnsd

import (
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/dnsd/dnssec"
	"github.com/transmirror/transmirror/dnsd/rrl"
)

// metrics are the server's collectors, registered once in New.
type metrics struct {
	queries     *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	udpDuration prometheus.Observer // duration{proto="udp"}
	panics      prometheus.Counter
	tcpRejected prometheus.Counter
	truncated   prometheus.Counter
	rrl         *prometheus.CounterVec
	dropped     prometheus.Counter
	dnssec      dnssec.Metrics
}

// Actions of rate-limited responses, the values of the rrl_responses_total label.
const (
	rrlDropped = "dropped"
	rrlSlipped = "slipped"
	rrlLogged  = "logged"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "transmirror", "dnsd"
	m := &metrics{
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "queries_total",
			Help: "DNS requests answered, by transport, query type and response code.",
		}, []string{"proto", "qtype", "rcode"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "request_duration_seconds",
			Help:    "Time to answer a request, by transport: UDP from its bytes to the reply's, TCP from the parsed message to the reply written.",
			Buckets: []float64{0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1},
		}, []string{"proto"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "panics_total",
			Help: "Handler panics recovered and answered with SERVFAIL.",
		}),
		tcpRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "tcp_connections_rejected_total",
			Help: "TCP connections closed on accept because max_tcp_connections were open.",
		}),
		truncated: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "truncated_total",
			Help: "UDP replies truncated with TC set.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "dropped_total",
			Help: "Requests dropped without a reply because they could not be parsed.",
		}),
		rrl: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "rrl_responses_total",
			Help: "UDP responses over the rate limit, by kind and action: dropped, slipped (sent truncated), or logged (log_only: sent anyway).",
		}, []string{"kind", "action"}),
	}
	m.dnssec = dnssec.Metrics{
		Signed: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "dnssec_signatures_total",
			Help: "RRSIGs made by online signing (cold RRsets and refreshes).",
		}),
		Hits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "dnssec_cache_hits_total",
			Help: "RRsets of signed answers whose RRSIGs came from the signature cache.",
		}),
	}
	m.udpDuration = m.duration.WithLabelValues("udp")
	for _, k := range rrl.Kinds() {
		for _, a := range []string{rrlDropped, rrlSlipped, rrlLogged} {
			m.rrl.WithLabelValues(k.String(), a)
		}
	}
	for _, c := range []prometheus.Collector{m.queries, m.duration, m.panics, m.tcpRejected, m.truncated, m.dropped, m.rrl, m.dnssec.Signed, m.dnssec.Hits} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// qtypeLabel maps a query type onto the bounded label set.
func qtypeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeNS, dns.TypeSOA, dns.TypeCNAME, dns.TypeMX,
		dns.TypeTXT, dns.TypeSRV, dns.TypePTR, dns.TypeANY, dns.TypeAXFR, dns.TypeIXFR,
		dns.TypeDS, dns.TypeDNSKEY, dns.TypeCAA, dns.TypeHTTPS, dns.TypeSVCB:
		return dns.TypeToString[t]
	}
	return "other"
}

// rcodeLabel names an rcode; 16 is BADVERS here (it is only ever an EDNS
// rcode in our replies, TSIG errors are NOTAUTH with the error in the TSIG).
func rcodeLabel(rc int) string {
	if rc == dns.RcodeBadVers {
		return "BADVERS"
	}
	if s, ok := dns.RcodeToString[rc]; ok && rc <= dns.RcodeBadCookie {
		return s
	}
	return "other"
}
