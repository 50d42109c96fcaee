package probe

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestReporterCollector(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	rep, err := NewReporter(ReporterConfig{Group: "www.example.org", Member: "fra1", Capacity: 2000, Bandwidth: 40000, Window: time.Second,
		RunQueue: func() (float64, error) { return 1.5, nil }, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		rep.RequestStarted()
		rep.RequestDone(1000, false)
	}
	clock.Advance(500 * time.Millisecond) // 20 requests/s, 20000 bytes/s
	reg := prometheus.NewRegistry()
	// A stand-in for the scheduler's utilization, which probe does not import.
	util := func(r Report) float64 { return max(r.Load/r.Capacity, r.BytesPerSecond/r.Bandwidth) }
	reg.MustRegister(rep.Collector("mirror", util))
	cases := []struct {
		name string
		want float64
	}{
		{"transmirror_mirror_load_run_queue", 1.5},
		{"transmirror_mirror_load_capacity_units", 2000},
		{"transmirror_mirror_load_bandwidth_bytes_per_second", 40000},
		{"transmirror_mirror_load_bytes_per_second", 20000},
		{"transmirror_mirror_load_utilization_ratio", 0.5}, // the bandwidth's 0.5, not the load's 215/2000
		{"transmirror_mirror_load_connections", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, mf := range mfs {
				if mf.GetName() == tc.name {
					if got := mf.GetMetric()[0].GetGauge().GetValue(); got != tc.want {
						t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
					}
					return
				}
			}
			t.Errorf("%s not exported", tc.name)
		})
	}
	if n := testutil.CollectAndCount(rep.Collector("mirror", util)); n != 9 {
		t.Errorf("%d series, want 9", n)
	}
	if n := testutil.CollectAndCount(rep.Collector("mirror", nil)); n != 8 {
		t.Errorf("without a utilization: %d series, want 8", n)
	}
	mfs, _ := reg.Gather()
	if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}
