package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

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
		{"reported", MemberView{Load: 123.456789, Reported: at, Pending: 0.0123, Utilization: 0.123469, BytesPerSecond: 1.5e6},
			[]string{`"load":123.456789`, `"reported":"2025-03-01T11:59:58.123456789Z"`, `"pending":0.0123`, `"utilization":0.123469`, `"bytes_per_second":1500000`}, nil},
		{"bandwidth", MemberView{MemberInfo: MemberInfo{Capacity: 1000, Bandwidth: 125e6}, Load: 100, BytesPerSecond: 100e6,
			Utilization: 0.8, LoadUtilization: 0.1, BandwidthUtilization: 0.8},
			[]string{`"bandwidth":125000000`, `"bytes_per_second":100000000`, `"utilization":0.8`, `"load_utilization":0.1`, `"bandwidth_utilization":0.8`}, nil},
		{"no report yet", MemberView{},
			[]string{`"load":0`, `"pending":0`, `"bytes_per_second":0`}, []string{`"reported"`, `"bandwidth":`}},
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
			if back.Load != tt.m.Load || !back.Reported.Equal(tt.m.Reported) || back.Pending != tt.m.Pending ||
				back.BytesPerSecond != tt.m.BytesPerSecond || back.Bandwidth != tt.m.Bandwidth {
				t.Errorf("round trip: %+v, want %+v", back, tt.m)
			}
		})
	}
}
