package scheduler

import (
	"math"
	"testing"
	"time"
)

func TestUtilization(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name                 string
		f                    Figures
		load, bandwidth, max float64
	}{
		{"load only", Figures{Load: 30, Pending: 10, Capacity: 100}, 0.4, 0, 0.4},
		{"no bandwidth: bytes do not count", Figures{Load: 30, Capacity: 100, BytesPerSecond: 1e9}, 0.3, 0, 0.3},
		{"the uplink is the bound", Figures{Load: 5, Capacity: 100, BytesPerSecond: 95e6, Bandwidth: 100e6}, 0.05, 0.95, 0.95},
		{"the load is the bound", Figures{Load: 80, Pending: 10, Capacity: 100, BytesPerSecond: 10e6, Bandwidth: 100e6}, 0.9, 0.1, 0.9},
		{"over the bandwidth", Figures{Capacity: 100, BytesPerSecond: 150e6, Bandwidth: 100e6}, 0, 1.5, 1.5},
		{"no capacity: full", Figures{Load: 1, BytesPerSecond: 1, Bandwidth: 100}, inf, 0.01, inf},
		{"idle", Figures{Capacity: 100, Bandwidth: 100e6}, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			near := func(a, b float64) bool { return a == b || math.Abs(a-b) < 1e-12 }
			if got := tt.f.LoadUtilization(); !near(got, tt.load) {
				t.Errorf("LoadUtilization = %g, want %g", got, tt.load)
			}
			if got := tt.f.BandwidthUtilization(); !near(got, tt.bandwidth) {
				t.Errorf("BandwidthUtilization = %g, want %g", got, tt.bandwidth)
			}
			if got := tt.f.Utilization(); !near(got, tt.max) {
				t.Errorf("Utilization = %g, want %g", got, tt.max)
			}
		})
	}
}

// TestPoliciesSeeBandwidth checks that the figures a policy works from
// carry the bandwidth: from the snapshot, overridden by a report, and
// ignored (reported bytes as much as reported load) when failing open.
func TestPoliciesSeeBandwidth(t *testing.T) {
	ms := []Member{{Name: "a", Up: true, Capacity: 100, Load: 10, BytesPerSecond: 90e6, Bandwidth: 100e6}}
	tests := []struct {
		name   string
		up     bool
		report *Usage
		want   float64
	}{
		{"snapshot", true, nil, 0.9},
		{"report overrides", true, &Usage{Load: 10, BytesPerSecond: 20e6}, 0.2},
		{"report of load only", true, &Usage{Load: 50}, 0.5},
		{"failing open", false, &Usage{Load: 10, BytesPerSecond: 20e6}, 0},
	}
	t0 := time.Unix(1_700_000_000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := append([]Member(nil), ms...)
			ms[0].Up = tt.up
			g := NewGroup(ms)
			e := NewEstimator(0)
			if tt.report != nil {
				e.Report(0, *tt.report, t0)
			}
			q := Query{Now: t0, Load: e}
			v := begin(g, &q)
			defer v.end()
			if got := v.util(0); math.Abs(got-tt.want) > 1e-12 {
				t.Errorf("util = %g, want %g", got, tt.want)
			}
		})
	}
}
