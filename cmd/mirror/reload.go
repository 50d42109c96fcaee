package main

import "github.com/transmirror/transmirror/mirror"

// configLoad is the mirror's reload: load and validate the config file
// again (with the same command-line addresses), prepare what can fail
// (the keys that need a restart, the GeoIP database, the redirect rules),
// then commit, which can not fail. On error nothing changed.
type configLoad struct {
	ld loader
	m  *mirror.Mirror
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
	r.Commit()
	return []any{"capacity", cfg.Capacity, "bandwidth", cfg.Bandwidth.String()}, nil
}
