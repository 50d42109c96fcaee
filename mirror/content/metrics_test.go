package content

import (
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

func TestMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	write(t, root, "a", 1, t0)
	write(t, root, "b\xff", 1, t0)
	s := NewScanner(root, ScanOptions{Metrics: m})
	if _, err := s.Scan(t.Context()); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(s, HandlerOptions{Metrics: m})
	for _, q := range []string{"", "?since=1", "?since=x"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/content/index"+q, nil))
	}
	tests := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"files", m.files, 1},
		{"skipped", m.skipped, 1},
		{"bytes", m.pathBytes, 21},
		{"scans ok", m.scans.WithLabelValues("ok"), 1},
		{"scans failed", m.scans.WithLabelValues("failed"), 0},
		{"full answers", m.answers.WithLabelValues("full"), 2},
		{"bad requests", m.answers.WithLabelValues("bad_request"), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := testutil.ToFloat64(tc.c); got != tc.want {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
	t.Run("promlint", func(t *testing.T) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	})
}
