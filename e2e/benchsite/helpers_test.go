package benchsite

import (
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
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

// TestMetricSum checks the sum over a labelled family (the front end's
// rejected requests by reason).
func TestMetricSum(t *testing.T) {
	text := "# TYPE transmirror_mirror_site_queue_rejected_total counter\n" +
		`transmirror_mirror_site_queue_rejected_total{reason="full"} 3` + "\n" +
		`transmirror_mirror_site_queue_rejected_total{reason="gone"} 0` + "\n" +
		`transmirror_mirror_site_queue_rejected_total{reason="timeout"} 4` + "\n" +
		"transmirror_mirror_site_queue_rejected_totals 100\n" +
		"transmirror_mirror_site_queue_length 2\n"
	cases := []struct {
		name   string
		metric string
		want   float64
		ok     bool
	}{
		{"labelled", "transmirror_mirror_site_queue_rejected_total", 7, true},
		{"unlabelled", "transmirror_mirror_site_queue_length", 2, true},
		{"absent", "transmirror_mirror_site_admission_limit", 0, false},
		{"prefix of another name", "transmirror_mirror_site_queue", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := metricSum(text, tc.metric)
			if got != tc.want || ok != tc.ok {
				t.Errorf("metricSum(%s) = %v, %v; want %v, %v", tc.metric, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestFrontFigures checks the front end's figures read from its /metrics:
// a series with its labels, the histogram's count and sum, and a policy
// without reassignments.
func TestFrontFigures(t *testing.T) {
	text := "transmirror_mirror_site_admission_limit 219\n" +
		"transmirror_mirror_site_queue_wait_seconds_bucket{le=\"0.001\"} 10\n" +
		"transmirror_mirror_site_queue_wait_seconds_sum 0.5\n" +
		"transmirror_mirror_site_queue_wait_seconds_count 100\n" +
		`transmirror_mirror_site_queue_rejected_total{reason="full"} 1` + "\n" +
		`transmirror_mirror_site_queue_rejected_total{reason="timeout"} 2` + "\n" +
		`transmirror_mirror_site_reassignments_total{policy="lard"} 17` + "\n" +
		`transmirror_mirror_site_reassignments_total{policy="lard-r"} 0` + "\n"
	cases := []struct {
		name   string
		policy string
		want   queueFigures
	}{
		{"lard", "lard", queueFigures{limit: 219, queued: 100, waited: 0.5, rejected: 3, reassignments: 17, hasReassign: true}},
		{"lard-r", "lard-r", queueFigures{limit: 219, queued: 100, waited: 0.5, rejected: 3, hasReassign: true}},
		{"no reassignments", "tb-ccrd", queueFigures{limit: 219, queued: 100, waited: 0.5, rejected: 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := frontFigures(text, tc.policy); got != tc.want {
				t.Errorf("frontFigures(%s) = %+v, want %+v", tc.policy, got, tc.want)
			}
		})
	}
}

// TestSpread checks the median and range of a figure over the runs.
func TestSpread(t *testing.T) {
	cases := []struct {
		name string
		xs   []float64
		want spread
	}{
		{"none", nil, spread{}},
		{"one", []float64{5}, spread{5, 5, 5}},
		{"odd, unsorted", []float64{3, 1, 2}, spread{2, 1, 3}},
		{"even: mean of the middle two", []float64{4, 1, 3, 2}, spread{2.5, 1, 4}},
		{"outlier does not move the median", []float64{100, 101, 5}, spread{100, 5, 101}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			xs := slices.Clone(tc.xs)
			if got := spreadOf(tc.xs); got != tc.want {
				t.Errorf("spreadOf(%v) = %+v, want %+v", tc.xs, got, tc.want)
			}
			if !slices.Equal(xs, tc.xs) {
				t.Errorf("spreadOf sorted its argument: %v", tc.xs)
			}
		})
	}
}

// TestSummarize checks a policy's row from its runs: medians, spread,
// errors added up, queue figures over the runs.
func TestSummarize(t *testing.T) {
	lard := []result{
		{rps: 3000, hit: 0.92, imbalance: 1.2, errors: 1, front: queueFigures{limit: 219, queued: 10, waited: 0.1, rejected: 0, reassignments: 5, hasReassign: true}},
		{rps: 3400, hit: 0.94, imbalance: 1.0, front: queueFigures{limit: 219, queued: 0, reassignments: 9, hasReassign: true}},
		{rps: 3200, hit: 0.93, imbalance: 1.1, errors: 2, front: queueFigures{limit: 219, queued: 40, waited: 0.2, rejected: 1, reassignments: 7, hasReassign: true}},
	}
	wrr := []result{{rps: 2000, hit: 0.6, imbalance: 1}, {rps: 2100, hit: 0.62, imbalance: 1}}
	cases := []struct {
		name   string
		policy string
		runs   []result
		want   summary
	}{
		{"lard", "lard", lard, summary{policy: "lard", runs: 3, rps: spread{3200, 3000, 3400}, hit: spread{0.93, 0.92, 0.94}, imbalance: 1.1, errors: 3,
			limited: true, limit: 219, queued: 10, rejected: 0, meanWait: 0.005, hasReassign: true, reassignments: 7}},
		{"no admission limit", "wrr", wrr, summary{policy: "wrr", runs: 2, rps: spread{2050, 2000, 2100}, hit: spread{0.61, 0.6, 0.62}, imbalance: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := summarize(tc.policy, tc.runs)
			if !near(got.meanWait, tc.want.meanWait) || !near(got.hit.med, tc.want.hit.med) {
				t.Errorf("summarize: mean wait %v, hit %v; want %v, %v", got.meanWait, got.hit.med, tc.want.meanWait, tc.want.hit.med)
			}
			got.meanWait, got.hit.med = tc.want.meanWait, tc.want.hit.med
			if got != tc.want {
				t.Errorf("summarize =\n%+v, want\n%+v", got, tc.want)
			}
		})
	}
}

// near reports whether a and b are equal but for rounding.
func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// update rewrites the golden files of the formatting tests.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTable checks the printed comparison against testdata: medians
// with their range, "-" where a figure does not apply (no admission
// limit, no reassignments), columns lined up.
func TestTable(t *testing.T) {
	rows := []summary{
		{policy: "wrr", runs: 3, rps: spread{2394, 2301, 2450}, hit: spread{0.618, 0.615, 0.62}, imbalance: 1},
		{policy: "lard", runs: 3, rps: spread{3389, 3300, 3400}, hit: spread{0.932, 0.93, 0.935}, imbalance: 1.09,
			limited: true, limit: 219, queued: 1234, rejected: 2, meanWait: 0.0032, hasReassign: true, reassignments: 17},
		{policy: "tb-ccrd", runs: 3, rps: spread{13000, 9900, 13100}, hit: spread{0.9, 0.89, 0.91}, imbalance: 1.2, errors: 4,
			limited: true, limit: 219},
	}
	cases := []struct {
		name string
		mode mode
		rows []summary
	}{
		{"proxy", mode{name: "proxy", concurrency: 32, keepAlive: true, why: "as in earlier runs, so that they compare"}, rows},
		{"handoff", mode{name: "handoff", concurrency: 256}, rows},
		{"empty", mode{name: "proxy", concurrency: 32, keepAlive: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := table(tc.rows)
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(lines) != 1+len(tc.rows) {
				t.Errorf("table has %d lines, want a header and %d rows:\n%s", len(lines), len(tc.rows), out)
			}
			for i, l := range lines {
				if n, h := utf8.RuneCountInString(l), utf8.RuneCountInString(lines[0]); n != h {
					t.Errorf("line %d is %d runes wide, the header %d:\n%s", i, n, h, out)
				}
			}
			golden(t, filepath.Join("testdata", "table-"+tc.name+".golden"), modeLine(tc.mode, 3, tc.rows)+"\n"+out)
		})
	}
}

// golden compares got with the file path, or writes it there with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", got, path, want)
	}
}

// TestModeLine checks the line above a mode's table says the concurrency
// against the admission limit and how clients use connections.
func TestModeLine(t *testing.T) {
	lard := []summary{{policy: "wrr"}, {policy: "lard", limited: true, limit: 219}}
	cases := []struct {
		name string
		mode mode
		rows []summary
		want []string
	}{
		{"proxy below S", mode{name: "proxy", concurrency: 32, keepAlive: true}, lard,
			[]string{"proxy mode, concurrency 32", "within LARD's admission limit S = 219", "clients reuse connections", "median of 3 runs"}},
		{"handoff above S", mode{name: "handoff", concurrency: 256}, lard,
			[]string{"handoff mode, concurrency 256", "above LARD's admission limit S = 219", "one request per client connection"}},
		{"handoff, keep-alive", mode{name: "handoff", concurrency: 256, keepAlive: true}, lard,
			[]string{"picks once per connection"}},
		{"no limit", mode{name: "proxy", concurrency: 32, keepAlive: true}, []summary{{policy: "wrr"}},
			[]string{"no admission limit"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := modeLine(tc.mode, 3, tc.rows)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("modeLine = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

// TestModes checks the defaults of -mode and -concurrency.
func TestModes(t *testing.T) {
	ms, err := modes()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%s %d %v %q", m.name, m.concurrency, m.keepAlive, m.why))
	}
	if want := []string{`proxy 32 true "as in earlier runs, so that they compare"`, `handoff 256 false ""`}; !slices.Equal(got, want) {
		t.Errorf("modes() = %q, want %q", got, want)
	}
}

// TestStatCPUTicks checks utime + stime out of /proc/PID/stat lines,
// command names with spaces and parentheses among them.
func TestStatCPUTicks(t *testing.T) {
	const tail = " S 1 2 3 4 5 6 7 8 9 10 %s %s 0 0 20 0 12 0 100 200 300\n"
	cases := []struct {
		name string
		line string
		want int64
		err  string
	}{
		{"plain", "4242 (mirror)" + fmt.Sprintf(tail, "150", "37"), 187, ""},
		{"spaces and parentheses in the name", "4242 (a (b) c) d)" + fmt.Sprintf(tail, "1", "2"), 3, ""},
		{"no name", "4242 mirror S 1 2", 0, "no command name"},
		{"short", "4242 (mirror) S 1 2 3", 0, "fields after the command name"},
		{"not a number", "4242 (mirror)" + fmt.Sprintf(tail, "x", "2"), 0, "utime or stime"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := statCPUTicks(tc.line)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("statCPUTicks = %d, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("statCPUTicks = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestProcCPU checks that the CPU time read for this process grows
// while it computes (it reads the running kernel's /proc/PID/stat).
func TestProcCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/PID/stat is Linux's")
	}
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	x := uint64(1)
	for time.Now().Before(deadline) {
		for i := range 1_000_000 {
			x = x*6364136223846793005 + uint64(i) // a tick of CPU, however busy the machine
		}
		now, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now > before {
			return
		}
	}
	t.Errorf("procCPU stayed at %v over a minute of computing (%d)", before, x)
}

// tlsTestRounds are two rounds of the five TLS cases: the second with
// everything twice as fast, which leaves the ratios alone.
var tlsTestRounds = [][]sample{
	{{5000, 100e-6}, {4000, 120e-6}, {4500, 150e-6}, {2500, 200e-6}, {500, 800e-6}},
	{{10000, 50e-6}, {8000, 60e-6}, {9000, 75e-6}, {5000, 100e-6}, {1000, 400e-6}},
}

// TestTLSRows checks that the ratios are taken within each round: drift
// between rounds moves the absolute figures, not the ratios.
func TestTLSRows(t *testing.T) {
	rows := tlsRows(tlsTestRounds)
	cases := []struct {
		name       string
		row        int
		rps, cpu   spread
		rpsX, cpuX float64
	}{
		{"baseline", 0, spread{7500, 5000, 10000}, spread{75e-6, 50e-6, 100e-6}, 1, 1},
		{"TLS kept", 1, spread{6000, 4000, 8000}, spread{90e-6, 60e-6, 120e-6}, 0.8, 1.2},
		{"TLS new connection", 4, spread{750, 500, 1000}, spread{600e-6, 400e-6, 800e-6}, 0.1, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rows[tc.row]
			if r.baseline != (tc.row == 0) || r.name != tlsCases[tc.row].name {
				t.Errorf("row %d is %q, baseline %v", tc.row, r.name, r.baseline)
			}
			if r.rps != tc.rps || !near(r.cpu.med, tc.cpu.med) || !near(r.cpu.lo, tc.cpu.lo) || !near(r.cpu.hi, tc.cpu.hi) {
				t.Errorf("req/s %+v, CPU %+v; want %+v, %+v", r.rps, r.cpu, tc.rps, tc.cpu)
			}
			for _, x := range []struct {
				got  spread
				want float64
			}{{r.rpsX, tc.rpsX}, {r.cpuX, tc.cpuX}} {
				if !near(x.got.med, x.want) || !near(x.got.lo, x.want) || !near(x.got.hi, x.want) {
					t.Errorf("ratio %+v, want %v in both rounds", x.got, x.want)
				}
			}
		})
	}
}

// TestTLSTable checks the printed TLS comparison against testdata, with
// the handshake estimate below it.
func TestTLSTable(t *testing.T) {
	out := tlsTable(tlsRows(tlsTestRounds), len(tlsTestRounds))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2+len(tlsCases) {
		t.Errorf("table has %d lines, want a title, a header and %d rows:\n%s", len(lines), len(tlsCases), out)
	}
	hs := handshakeLine(tlsTestRounds)
	if !strings.Contains(hs, "450 µs (300–600)") {
		t.Errorf("handshakeLine = %q, want the median and range of 600 and 300 µs", hs)
	}
	golden(t, filepath.Join("testdata", "tls-table.golden"), out+hs)
}
