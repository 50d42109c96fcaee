package main

import (
	"log/slog"
	"math/rand/v2"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/mirror/contentmap"
	"github.com/transmirror/transmirror/zones"
)

// newContentMap is dnsd's content map of the members' indexes, fetched
// through client (the probes' client, with its rules for run-time
// members) and following the groups as current returns them.
func newContentMap(current func() *zones.Set, client *http.Client, logger *slog.Logger, reg prometheus.Registerer) (*contentmap.Map, error) {
	return contentmap.New(contentmap.Options{
		Subsystem: "dnsd",
		Client:    client,
		Members:   func() []contentmap.Member { return contentMembers(current()) },
		Registry:  reg,
		Logger:    logger,
		Rand:      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	})
}

// contentMembers are the members of every group of set, config and
// run-time ones, as the content map needs them.
func contentMembers(set *zones.Set) []contentmap.Member {
	var out []contentmap.Member
	for _, g := range set.Groups {
		for _, m := range g.Members {
			out = append(out, contentmap.Member{Group: g.Name, Name: m.Name, Probe: m.Probe, PublicOnly: g.PublicOnly(m)})
		}
	}
	return out
}
