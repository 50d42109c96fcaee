package benchsite

import (
	"strings"
	"testing"
)

// TestMetric checks the scrape parser the comparison's hit ratios rest on.
func TestMetric(t *testing.T) {
	text := "# HELP transmirror_mirror_cache_hits_total x\n" +
		"transmirror_mirror_cache_hits_total 1234\n" +
		"transmirror_mirror_cache_hits_total_extra 9\n" +
		"transmirror_mirror_cache_misses_total 56\n"
	cases := []struct {
		name   string
		metric string
		want   float64
		ok     bool
	}{
		{"hits", "transmirror_mirror_cache_hits_total", 1234, true},
		{"misses", "transmirror_mirror_cache_misses_total", 56, true},
		{"absent", "transmirror_mirror_cache_bytes", 0, false},
		{"prefix of another name", "transmirror_mirror_cache", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := metric(text, tc.metric)
			if got != tc.want || ok != tc.ok {
				t.Errorf("metric(%s) = %v, %v; want %v, %v", tc.metric, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestTable checks the printed comparison has one row per policy.
func TestTable(t *testing.T) {
	out := table([]result{{policy: "wrr", rps: 100, hit: 0.5}, {policy: "lard", rps: 200, hit: 0.9, imbalance: 1.1}})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[2], "lard") || !strings.Contains(lines[2], "90.0%") {
		t.Errorf("table:\n%s", out)
	}
}
