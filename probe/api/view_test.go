package api

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestUtilization(t *testing.T) {
	tests := []struct {
		name                    string
		load, pending, capacity float64
		want                    float64
	}{
		{"idle", 0, 0, 100, 0},
		{"reported only", 50, 0, 100, 0.5},
		{"pending counts", 50, 25, 100, 0.75},
		{"over capacity", 150, 10, 100, 1.6},
		{"no capacity", 50, 0, 0, 0},
		{"negative capacity", 50, 0, -1, 0},
		{"NaN capacity", 50, 0, math.NaN(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Utilization(tt.load, tt.pending, tt.capacity); got != tt.want {
				t.Errorf("Utilization(%g, %g, %g) = %g, want %g", tt.load, tt.pending, tt.capacity, got, tt.want)
			}
		})
	}
}

// TestMemberViewFigures checks the JSON of a member's figures: unrounded,
// and the report time left out before the first report.
func TestMemberViewFigures(t *testing.T) {
	at := time.Date(2025, 3, 1, 11, 59, 58, 123456789, time.UTC)
	tests := []struct {
		name string
		m    MemberView
		want []string
		not  []string
	}{
		{"reported", MemberView{Load: 123.456789, Reported: at, Pending: 0.0123, Utilization: Utilization(123.456789, 0.0123, 1000)},
			[]string{`"load":123.456789`, `"reported":"2025-03-01T11:59:58.123456789Z"`, `"pending":0.0123`, `"utilization":0.1234690`}, nil},
		{"no report yet", MemberView{},
			[]string{`"load":0`, `"pending":0`}, []string{`"reported"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("%s lacks %s", b, w)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(string(b), w) {
					t.Errorf("%s has %s", b, w)
				}
			}
			var back MemberView
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back.Load != tt.m.Load || !back.Reported.Equal(tt.m.Reported) || back.Pending != tt.m.Pending {
				t.Errorf("round trip: %+v, want %+v", back, tt.m)
			}
		})
	}
}
