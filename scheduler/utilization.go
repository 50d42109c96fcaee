package scheduler

import "math"

// Figures are what a member's utilization is computed from: what it
// carries, as reported and estimated, against what it can carry, in the
// two kinds of capacity a mirror has.
type Figures struct {
	// Load is the last reported load and Pending the hidden load of the
	// answers since that report, in load units (load = 10·(r + m));
	// Capacity is in the same units.
	Load, Pending, Capacity float64
	// BytesPerSecond is the last reported rate of response bytes and
	// Bandwidth what the member's uplink carries, in bytes per second;
	// a Bandwidth of 0 is no limit.
	BytesPerSecond, Bandwidth float64
}

// LoadUtilization is (Load + Pending) / Capacity; +Inf without a positive
// capacity (such a member counts as always full).
func (f Figures) LoadUtilization() float64 {
	if !(f.Capacity > 0) {
		return math.Inf(1)
	}
	return (f.Load + f.Pending) / f.Capacity
}

// BandwidthUtilization is BytesPerSecond / Bandwidth; 0 without a positive
// bandwidth (no limit).
func (f Figures) BandwidthUtilization() float64 {
	if !(f.Bandwidth > 0) {
		return 0
	}
	return f.BytesPerSecond / f.Bandwidth
}

// Utilization is the one definition of a member's utilization, the
// figure every policy, dnsd's views and the mirrors' 302 correction
// compare with the watermarks: the larger of LoadUtilization and
// BandwidthUtilization. A member whose uplink is full is full, however
// few requests it serves.
func (f Figures) Utilization() float64 {
	return max(f.LoadUtilization(), f.BandwidthUtilization())
}
