package group

import (
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/api"
)

// TestWithWatermarks: rules without watermarks of their own take the
// group's from the view, the scheduler's defaults when the view has none
// or there is no view; rules that set them keep them.
func TestWithWatermarks(t *testing.T) {
	snap := func(w api.Watermarks) *GroupSnapshot {
		t.Helper()
		v := testView(nil)
		v.Watermarks = w
		s, err := NewGroupSnapshot(v, "fra1", t0, time.Minute, RedirectBooking{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	tests := []struct {
		name      string
		rules     RedirectRules
		snap      *GroupSnapshot
		low, high float64
	}{
		{"the view's", RedirectRules{}, snap(api.Watermarks{Low: 0.5, High: 0.8}), 0.5, 0.8},
		{"a view without watermarks", RedirectRules{}, snap(api.Watermarks{}), 0.7, 0.9},
		{"no view", RedirectRules{}, nil, 0.7, 0.9},
		{"the rules' own", RedirectRules{LowWatermark: 0.6, HighWatermark: 0.95}, snap(api.Watermarks{Low: 0.5, High: 0.8}), 0.6, 0.95},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.rules.WithWatermarks(tt.snap)
			if r.LowWatermark != tt.low || r.HighWatermark != tt.high {
				t.Errorf("watermarks %g, %g; want %g, %g", r.LowWatermark, r.HighWatermark, tt.low, tt.high)
			}
		})
	}
}

// TestTargetFollowsTheView: under the fair-share law the target's floor
// is the group's low watermark, as the view carries it.
func TestTargetFollowsTheView(t *testing.T) {
	v := testView(nil)
	v.Watermarks = api.Watermarks{Low: 0.4, High: 0.8}
	s, err := NewGroupSnapshot(v, "fra1", t0, time.Minute, RedirectBooking{})
	if err != nil {
		t.Fatal(err)
	}
	if got := Target(RedirectRules{}.WithWatermarks(s), 0.1); got != 0.4 {
		t.Errorf("target %g, want the view's low watermark 0.4", got)
	}
}
