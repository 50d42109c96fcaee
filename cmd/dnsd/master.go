package main

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

// newMasters is the watcher of the groups' masters (the master key): it
// reads the groups of the config in service at every round and gives
// each master's generation to the dispatcher.
func newMasters(current func() *zones.Set, disp *dispatch.Dispatcher, logger *slog.Logger, reg prometheus.Registerer) (*probe.MasterWatcher, error) {
	return probe.NewMasterWatcher(probe.MasterWatcherOptions{
		Targets: func() map[string]string {
			out := map[string]string{}
			if set := current(); set != nil {
				for name, g := range set.Groups {
					if g.Master != "" {
						out[name] = g.Master
					}
				}
			}
			return out
		},
		OnGeneration: func(group string, gen time.Time) { _ = disp.SetMaster(group, gen) }, // a group gone since the round began
		Client:       probe.NewClient(probe.ClientOptions{}),
		Logger:       logger, Registerer: reg,
	})
}
