package main

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/acmeclient"
	"github.com/transmirror/transmirror/probe"
)

// deps are what the wiring takes besides the config: the process's
// logger and metrics, and what a test replaces. The zero value works.
type deps struct {
	logger   *slog.Logger         // default: discard
	reg      *prometheus.Registry // every metric, served on /metrics (default: a new one)
	clock    func() time.Time     // reports, signatures, views, decisions (default time.Now)
	rand     *rand.Rand           // the redirect decisions (default: seeded at random)
	runQueue func() (float64, error)
	// reportWindow is the load Reporter's sliding window (default
	// probe.DefaultReportWindow).
	reportWindow time.Duration
	client       *http.Client // talks to dnsd (default: the group package's)
	// tls are the public HTTPS listeners' certificates; nil without
	// tls.listen.
	tls *certs.Set
	// acme gets and renews the ACME certificate into tls; nil without
	// tls.acme.
	acme *acmeclient.Manager
	// http01 answers HTTP-01 on the plain listeners; nil unless
	// tls.acme.challenge is http-01.
	http01 *acmeclient.HTTP01
	// tlsALPN01 answers TLS-ALPN-01 on tls.listen; nil unless
	// tls.acme.challenge is tls-alpn-01.
	tlsALPN01 *acmeclient.TLSALPN01
}

// processDeps are the deps of the daemon: the logger, the metrics in reg,
// the config's load window and the client of dnsd (with dnsd.ca_file, a
// private CA of dnsd's admin_tls), which follows no redirect, and the
// certificates of the public HTTPS listeners with their ACME manager and
// the solver that a public listener answers (http-01, tls-alpn-01).
func processDeps(cfg *mirror.Config, logger *slog.Logger, reg *prometheus.Registry) (deps, error) {
	tr, err := certs.Transport(cfg.DNSD.CAFile)
	if err != nil {
		return deps{}, fmt.Errorf("mirror: dnsd.ca_file: %w", err)
	}
	set, err := publicCerts(cfg, reg)
	if err != nil {
		return deps{}, err
	}
	client := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, // a signature covers one URL
	}
	am, solver, err := acmeManager(cfg, set, client, logger, reg)
	if err != nil {
		return deps{}, err
	}
	d := deps{logger: logger, reg: reg, reportWindow: cfg.LoadWindow.D(), tls: set, acme: am, client: client}
	d.http01, _ = solver.(*acmeclient.HTTP01)
	d.tlsALPN01, _ = solver.(*acmeclient.TLSALPN01)
	return d, nil
}

// withDefaults fills what d leaves out.
func (d deps) withDefaults() deps {
	if d.logger == nil {
		d.logger = slog.New(slog.DiscardHandler)
	}
	if d.reg == nil {
		d.reg = prometheus.NewRegistry()
	}
	if d.clock == nil {
		d.clock = time.Now
	}
	if d.reportWindow <= 0 {
		d.reportWindow = probe.DefaultReportWindow
	}
	return d
}
