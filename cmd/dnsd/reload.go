package main

import (
	"crypto/tls"
	"fmt"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// configLoad is dnsd's reload: load and validate the config again, refuse
// it when it changes a key only a restart applies (the listen and admin
// addresses, TLS on or off), read the admin certificate and key again,
// load it into the controller (the dispatcher, the server, the watcher's
// health settings), then set what the controller does not own: the admin
// API's signature window and certificate. On error nothing changed.
type configLoad struct {
	ld       *loader
	ctl      *members.Controller
	verifier *api.Verifier
	keypair  *certs.Keypair // nil without admin_tls
}

func (l configLoad) reload() ([]any, error) {
	set, err := l.ld.load()
	if err != nil {
		return nil, err
	}
	if err := zones.RestartChanges(l.ctl.Current().Config, set.Config); err != nil {
		return nil, err
	}
	var cert *tls.Certificate
	if f := set.Config.AdminTLSFiles(); l.keypair != nil && f.Enabled() {
		if cert, err = certs.Load(f.CertFile, f.KeyFile); err != nil {
			return nil, fmt.Errorf("dnsd: admin_tls: %w", err)
		}
	}
	if err := l.ctl.Load(set); err != nil {
		return nil, err
	}
	l.verifier.SetWindow(set.Config.Health.SignatureWindow.D())
	if cert != nil {
		l.keypair.Store(cert)
	}
	return []any{"zones", len(set.Zones), "groups", len(set.Groups)}, nil
}
