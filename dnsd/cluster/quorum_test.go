package cluster

import (
	"testing"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

func TestVerdict(t *testing.T) {
	const (
		u = probe.StateUnknown
		U = probe.StateUp
		D = probe.StateDown
	)
	on := zones.QuorumConfig{Enabled: true, DownShare: 0.5}
	tests := []struct {
		name      string
		q         zones.QuorumConfig
		connected bool
		own       probe.State
		others    []probe.State
		live      int
		want      probe.State
	}{
		{"quorum off: own down", zones.QuorumConfig{DownShare: 0.5}, true, D, []probe.State{U, U}, 3, D},
		{"quorum off: own up", zones.QuorumConfig{DownShare: 0.5}, true, U, []probe.State{D, D}, 3, U},
		{"etcd lost: own down", on, false, D, []probe.State{U}, 2, D},
		{"etcd lost: own unknown", on, false, u, []probe.State{D, D}, 3, u},
		{"alone: own down", on, true, D, nil, 1, D},
		{"alone: own up", on, true, U, nil, 1, U},
		{"alone: nothing seen", on, true, u, nil, 1, u},
		{"one of two down: up", on, true, D, []probe.State{U}, 2, U},
		{"other of two down: up", on, true, U, []probe.State{D}, 2, U},
		{"both down", on, true, D, []probe.State{D}, 2, D},
		{"one of three down", on, true, D, []probe.State{U, U}, 3, U},
		{"two of three down", on, true, U, []probe.State{D, D}, 3, D},
		{"two of four down is not more than half", on, true, D, []probe.State{D, U, U}, 4, U},
		{"down share 0.2: one of four down", zones.QuorumConfig{Enabled: true, DownShare: 0.2}, true, D, []probe.State{U, U, U}, 4, D},
		{"down share 0.7: two of three down", zones.QuorumConfig{Enabled: true, DownShare: 0.7}, true, D, []probe.State{D, U}, 3, U},
		{"a node without a view counts in live", on, true, D, []probe.State{u}, 2, U},
		{"down votes but no majority, own unknown", on, true, u, []probe.State{D, u}, 3, U},
		{"nobody has seen it", on, true, u, []probe.State{u, u}, 3, u},
		{"live under the views counted is raised", on, true, D, []probe.State{D}, 0, D},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Verdict(tt.q, tt.connected, tt.own, tt.others, tt.live); got != tt.want {
				t.Errorf("Verdict(%+v, %v, %v, %v, %d) = %v, want %v", tt.q, tt.connected, tt.own, tt.others, tt.live, got, tt.want)
			}
		})
	}
}
