package main

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror"
)

// publicCerts loads the certificates of the public HTTPS listeners
// (tls.certificates) and registers their expiry on reg; nil without
// tls.listen.
func publicCerts(cfg *mirror.Config, reg prometheus.Registerer) (*certs.Set, error) {
	if len(cfg.TLS.Listen) == 0 {
		return nil, nil
	}
	cs, err := loadPublicCerts(cfg)
	if err != nil {
		return nil, err
	}
	set := certs.NewSet(cs)
	if err := reg.Register(newExpiryCollector(set)); err != nil {
		return nil, fmt.Errorf("mirror: register metrics: %w", err)
	}
	return set, nil
}

// loadPublicCerts reads every pair of tls.certificates; the error names
// the files of the first that does not load.
func loadPublicCerts(cfg *mirror.Config) ([]*tls.Certificate, error) {
	fs := make([]certs.Files, 0, len(cfg.TLS.Certificates))
	for _, f := range cfg.TLS.Certificates {
		fs = append(fs, certs.Files{CertFile: f.CertFile, KeyFile: f.KeyFile})
	}
	cs, err := certs.LoadAll(fs)
	if err != nil {
		return nil, fmt.Errorf("mirror: tls.certificates: %w", err)
	}
	return cs, nil
}

// certNotAfter is when the first of set's certificates expires, for the
// load reports; nil for a nil set (no HTTPS).
func certNotAfter(set *certs.Set) func() time.Time {
	if set == nil {
		return nil
	}
	return func() time.Time {
		var first time.Time
		for _, c := range set.Current() {
			if t := c.Leaf.NotAfter; first.IsZero() || t.Before(first) {
				first = t
			}
		}
		return first
	}
}

// certStatus returns the status page's view of set's certificates (nil
// for a nil set: no HTTPS).
func certStatus(set *certs.Set) func() []mirror.CertificateStatus {
	if set == nil {
		return nil
	}
	return func() []mirror.CertificateStatus {
		var out []mirror.CertificateStatus
		for _, c := range set.Current() {
			out = append(out, mirror.CertificateStatus{Names: certs.Names(c), NotAfter: c.Leaf.NotAfter})
		}
		return out
	}
}

// expiryCollector exports when each certificate of a Set expires, read
// from the set at each scrape, so a reload's certificates show at once
// and a removed one's series goes. The label is the certificate's first
// DNS name: from the config's files, a bounded set.
type expiryCollector struct {
	set  *certs.Set
	desc *prometheus.Desc
}

func newExpiryCollector(set *certs.Set) *expiryCollector {
	return &expiryCollector{set: set, desc: prometheus.NewDesc(
		"transmirror_mirror_tls_certificate_expiry_timestamp_seconds",
		"When each certificate of the public HTTPS listeners (tls.acme's, tls.certificates) expires, Unix time, by its first DNS name.",
		[]string{"name"}, nil)}
}

func (e *expiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- e.desc }

func (e *expiryCollector) Collect(ch chan<- prometheus.Metric) {
	seen := make(map[string]bool)
	for _, c := range e.set.Current() {
		names := certs.Names(c)
		if len(names) == 0 || seen[names[0]] {
			continue // the first of two for one name is the one served
		}
		seen[names[0]] = true
		ch <- prometheus.MustNewConstMetric(e.desc, prometheus.GaugeValue, float64(c.Leaf.NotAfter.Unix()), names[0])
	}
}
