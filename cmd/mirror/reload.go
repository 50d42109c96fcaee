package main

import (
	"crypto/tls"
	"fmt"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror"
)

// configLoad is the mirror's reload: load and validate the config file
// again (with the same command-line addresses), prepare what can fail
// (the keys that need a restart, the GeoIP database, the redirect rules,
// the admin certificate and key, read again), then commit, which can not
// fail. On error nothing changed.
type configLoad struct {
	ld      loader
	m       *mirror.Mirror
	keypair *certs.Keypair // nil without admin_tls
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
	r.Commit()
	if cert != nil {
		l.keypair.Store(cert)
	}
	return []any{"capacity", cfg.Capacity, "bandwidth", cfg.Bandwidth.String()}, nil
}
