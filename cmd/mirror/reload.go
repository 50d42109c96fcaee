package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"time"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// loader reads the config file and applies the command line's listen
// addresses, the same way at start and on every reload; it logs the
// config's warnings (mirror.Config.Warnings) at Warn each time.
type loader struct {
	file   string   // the config file (-config)
	listen []string // -listen, replacing the config's listen
	admin  string   // -admin, replacing the config's admin
	// missDelay is -bench-miss-delay-per-mib (frontend.CacheConfig.MissDelayPerMiB).
	missDelay time.Duration
	// acmeLifetime is -acme-test-lifetime (mirror.ACMEConfig.TestLifetime).
	acmeLifetime time.Duration
	// pprof is -pprof (mirror.Config.Pprof).
	pprof  bool
	logger *slog.Logger
}

func (l loader) load() (*mirror.Config, error) {
	cfg, err := mirror.LoadConfig(l.file)
	if err != nil {
		return nil, err
	}
	for _, w := range cfg.Warnings {
		l.logger.Warn("config warning", "warning", w)
	}
	if len(l.listen) > 0 {
		cfg.Listen = append([]string(nil), l.listen...)
	}
	if l.admin != "" {
		cfg.Admin = l.admin
	}
	cfg.Site.Cache.MissDelayPerMiB = yamlconf.Duration(l.missDelay)
	cfg.TLS.ACME.TestLifetime = l.acmeLifetime
	cfg.Pprof = l.pprof
	return cfg, nil
}

// configLoad is the mirror's reload: load and validate the config file
// again (with the same command-line addresses), prepare what can fail
// (the keys that need a restart, the GeoIP database, the redirect rules,
// the admin certificate and key and the HTTPS certificates, read again),
// then commit, which can not fail. On error nothing changed.
type configLoad struct {
	ld      loader
	m       *mirror.Mirror
	keypair *certs.Keypair // nil without admin_tls
	public  *certs.Set     // nil without tls.listen
}

func (l configLoad) reload() ([]any, error) {
	cfg, err := l.ld.load()
	if err != nil {
		return nil, err
	}
	r, err := l.m.PrepareReload(cfg)
	if err != nil {
		return nil, err
	}
	var cert *tls.Certificate
	if l.keypair != nil && cfg.AdminTLS.Enabled() {
		if cert, err = certs.Load(cfg.AdminTLS.CertFile, cfg.AdminTLS.KeyFile); err != nil {
			return nil, fmt.Errorf("mirror: admin_tls: %w", err)
		}
	}
	var public []*tls.Certificate
	if l.public != nil && len(cfg.TLS.Listen) > 0 {
		if public, err = loadPublicCerts(cfg); err != nil {
			return nil, err
		}
	}
	r.Commit()
	if cert != nil {
		l.keypair.Store(cert)
	}
	if public != nil {
		l.public.Store(public)
	}
	return []any{"capacity", cfg.Capacity, "bandwidth", cfg.Bandwidth.String()}, nil
}
