package main

import (
	"net"

	"github.com/transmirror/transmirror/cmd/internal/proxyprotocol"
	"github.com/transmirror/transmirror/mirror"
)

// proxyProtocol returns the wrapper of the public listeners that reads
// the PROXY protocol header of proxy_protocol's peers (and only theirs),
// counted in d's registry; it wraps nothing without proxy_protocol.
func proxyProtocol(cfg *mirror.Config, d deps) (func(net.Listener) net.Listener, error) {
	count, err := proxyprotocol.NewCounter("mirror", d.reg)
	if err != nil {
		return nil, err
	}
	return proxyprotocol.Wrap(proxyprotocol.Options{
		Trusted:       cfg.ProxyProtocolPrefixes(),
		HeaderTimeout: proxyprotocol.DefaultHeaderTimeout,
		Count:         count,
	}), nil
}
