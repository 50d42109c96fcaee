package benchdns

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/zones"
)

const dnsperfOut = `DNS Performance Testing Tool
Version 2.10.0

[Status] Command line: dnsperf -s 127.0.0.1 -p 45353 -d www.txt -l 3 -v
[Status] Testing complete (time limit)
> NOERROR www.example.test A 0.000133
> T www.example.test A
> NOERROR www.example.test A 0.000166

Statistics:

  Queries sent:         826449
  Queries completed:    826440 (100.00%)
  Queries lost:         9 (0.00%)

  Response codes:       NOERROR 826438 (100.00%), SERVFAIL 2 (0.00%)
  Average packet size:  request 34, response 50
  Run time (s):         3.000133
  Queries per second:   275470.787462

  Average Latency (s):  0.000207 (min 0.000012, max 0.026516)
  Latency StdDev (s):   0.000767
`

// TestParseDnsperf checks the reading of dnsperf 2.10's report.
func TestParseDnsperf(t *testing.T) {
	p, err := parseDnsperf(dnsperfOut)
	if err != nil {
		t.Fatal(err)
	}
	want := perf{sent: 826449, completed: 826440, lost: 9, noerror: 826438, runTime: 3.000133,
		qps: 275470.787462, avg: 0.000207, max: 0.026516}
	if p.sent != want.sent || p.completed != want.completed || p.lost != want.lost || p.noerror != want.noerror ||
		p.runTime != want.runTime || p.qps != want.qps || p.avg != want.avg || p.max != want.max {
		t.Errorf("parsed %+v\nwant   %+v", p, want)
	}
	if len(p.lat) != 2 || p.lat[0] != 0.000133 || p.lat[1] != 0.000166 {
		t.Errorf("per-query latencies %v, want the two answered ones", p.lat)
	}
	if _, err := parseDnsperf("dnsperf: invalid option\n"); err == nil {
		t.Error("output without statistics: no error")
	}
}

// TestP99 checks the nearest-rank percentile and its absence.
func TestP99(t *testing.T) {
	cases := []struct {
		name string
		lat  []float64
		want float64
	}{
		{"none", nil, -1},
		{"one", []float64{5}, 5},
		{"100 values", seq(100), 99},
		{"200 values", seq(200), 198},
		{"101 values", seq(101), 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := (perf{lat: tc.lat}).p99(); got != tc.want {
				t.Errorf("p99 = %v, want %v", got, tc.want)
			}
		})
	}
}

// seq is 1, 2, …, n in reverse, so that p99 has to sort.
func seq(n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = float64(n - i)
	}
	return out
}

// TestParseProcStat checks utime+stime is read after the command name,
// whatever it holds.
func TestParseProcStat(t *testing.T) {
	cases := []struct {
		name, line string
		want       int64
		ok         bool
	}{
		{"plain", "1234 (gdnsd) S 1 1234 1234 0 -1 4194560 500 0 0 0 170 30 0 0 20 0 6 0 100 1 1 1", 200, true},
		{"spaces and parentheses in the name", "7 (a b) c)) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1 1 1 1", 11, true},
		{"truncated", "7 (x) R 1 2", 0, false},
		{"no name", "garbage", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat(tc.line)
			if (err == nil) != tc.ok || got != tc.want {
				t.Errorf("parseProcStat = %d, %v; want %d, ok %v", got, err, tc.want, tc.ok)
			}
		})
	}
}

// TestIdleShare checks the quiet check's arithmetic on /proc/stat lines.
func TestIdleShare(t *testing.T) {
	a, err := parseCPULine("cpu  100 0 100 800 0 0 0 0 0 0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseCPULine("cpu  150 0 150 880 20 0 0 0 0 0")
	if err != nil {
		t.Fatal(err)
	}
	if got := idleShare(a, b); math.Abs(got-0.5) > 1e-9 {
		t.Errorf("idle share %v, want 0.5 (100 idle+iowait of 200)", got)
	}
	if _, err := parseCPULine("cpu0 1 2 3"); err == nil {
		t.Error("a short or per-CPU line: no error")
	}
}

// TestTable checks two rows per mix, p99 only where measured and the
// ratio on dnsd's row.
func TestTable(t *testing.T) {
	closed := run{perf: perf{completed: 1000, runTime: 10, qps: 100, avg: 0.001, max: 0.002}, ticks: 1}
	fixed := closed
	fixed.lat = seq(100)
	gdnsd := closed
	gdnsd.ticks = 2
	out := table([]*row{
		{mix: "a x", server: "dnsd", runs: []run{closed}},
		{mix: "a x", server: "gdnsd", runs: []run{gdnsd}},
		{mix: "d y", server: "dnsd", runs: []run{fixed}},
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-3:]
	if !strings.Contains(last[0], "0.50×") || !strings.Contains(last[0], " - ") {
		t.Errorf("dnsd row of a: want ratio 0.50× and no p99:\n%s", out)
	}
	if !strings.Contains(last[2], "99000000") {
		t.Errorf("row of d: want p99 99000000 µs:\n%s", out)
	}
}

// TestConfigs checks that the generated dnsd configuration loads and
// both configurations have every member.
func TestConfigs(t *testing.T) {
	dir := t.TempDir()
	mmdb := filepath.Join(dir, "regions.mmdb")
	if err := writeMMDB(filepath.Join("..", "..", "scheduler", "geo", "testdata", "regions.csv"), mmdb); err != nil {
		t.Fatal(err)
	}
	cfg, err := writeDNSDConfig(dir, mmdb, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zones.Load(cfg); err != nil {
		t.Fatalf("dnsd config: %v", err)
	}
	if err := writeGdnsdConfig(filepath.Join(dir, "g"), "127.0.0.1:5353", mmdb); err != nil {
		t.Fatal(err)
	}
	g, err := os.ReadFile(filepath.Join(dir, "g", "config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if !strings.Contains(string(g), m.v4) || !strings.Contains(string(g), m.v6) {
			t.Errorf("gdnsd config lacks %s:\n%s", m.name, g)
		}
	}
}
