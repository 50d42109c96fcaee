package main

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/frontend"
)

// build is what a start does before it serves, everything that can fail,
// wired for the config's role: a member (buildMember) or a dispatcher
// (buildDispatcher). The returned func releases what it opened once
// nothing serves any more.
func build(cfg *mirror.Config, logger *slog.Logger, reg *prometheus.Registry) (*mirror.Mirror, func(), error) {
	o, err := mirrorOptions(cfg, logger, reg)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Dispatcher {
		return buildDispatcher(cfg, o)
	}
	return buildMember(cfg, o)
}

// mirrorOptions are what both roles are built with: the logger, the
// metrics in reg, the load window, and the client of dnsd (with
// dnsd.ca_file, a private CA of dnsd's admin_tls).
func mirrorOptions(cfg *mirror.Config, logger *slog.Logger, reg *prometheus.Registry) (mirror.Options, error) {
	tr, err := certs.Transport(cfg.DNSD.CAFile)
	if err != nil {
		return mirror.Options{}, fmt.Errorf("mirror: dnsd.ca_file: %w", err)
	}
	return mirror.Options{Logger: logger, Registry: reg, ReportWindow: cfg.LoadWindow.D(),
		Client: &http.Client{
			Transport:     tr,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, // a signature covers one URL
		}}, nil
}

// buildMember wires a member: the site front end (with backends), then
// the mirror around it or around the document root (the file server,
// the GeoIP database, the redirect rules, the group view, the load push,
// the join).
func buildMember(cfg *mirror.Config, o mirror.Options) (*mirror.Mirror, func(), error) {
	release := func() {}
	if len(cfg.Backends) > 0 {
		h, site, err := frontend.New(cfg.Site, cfg.Backends, frontend.Options{Logger: o.Logger, Registerer: o.Registry})
		if err != nil {
			return nil, nil, err
		}
		o.Content, release = h, func() { site.Close() }
	}
	m, err := mirror.NewMember(cfg, o)
	if err != nil {
		release()
		return nil, nil, err
	}
	return m, func() { m.Close(); release() }, nil
}

// buildDispatcher wires a dispatcher: the GeoIP database, the redirect
// rules, the group view and the push of its redirects; no content.
func buildDispatcher(cfg *mirror.Config, o mirror.Options) (*mirror.Mirror, func(), error) {
	m, err := mirror.NewDispatcher(cfg, o)
	if err != nil {
		return nil, nil, err
	}
	return m, func() { m.Close() }, nil
}
