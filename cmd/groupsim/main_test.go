package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func groupsim(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	code = run(args, &out, &errs)
	return code, out.String(), errs.String()
}

// TestHelp: -h documents every flag and exits 0.
func TestHelp(t *testing.T) {
	code, _, usage := groupsim(t, "-h")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, name := range []string{"log", "seed", "requests", "objects", "alpha", "max-size", "clients", "policies", "backends",
		"memory-ratio", "max-object", "outstanding", "warmup", "format", "report", "report-scale", "log-format", "level",
		"global-policies", "mirrors", "capacity", "rate", "resolvers", "heavy", "ttl", "min-ttl", "ecs", "nodes", "correct",
		"duration", "warmup-time", "bin", "regions", "public-resolvers", "bandwidth", "missing", "content-index", "site-bin", "mode", "push-interval", "view-interval", "version"} {
		if !strings.Contains(usage, "  -"+name+" ") && !strings.Contains(usage, "  -"+name+"\n") {
			t.Errorf("-h does not document -%s:\n%s", name, usage)
		}
	}
}

// TestDeterministic: the same flags give the same bytes; CSV has a row
// per policy and number of back ends.
func TestDeterministic(t *testing.T) {
	args := []string{"-requests", "20000", "-objects", "2000", "-backends", "1,4", "-policies", "wrr,lard", "-format", "csv"}
	_, a, _ := groupsim(t, args...)
	code, b, errs := groupsim(t, args...)
	if code != 0 || a != b {
		t.Fatalf("exit %d (%s); two runs:\n%s\n%s", code, errs, a, b)
	}
	lines := strings.Split(strings.TrimSpace(a), "\n")
	if len(lines) != 5 || lines[0] != "backends,policy,req/s,hit,byte_hit,max/mean,cv,cpu,disk,fe_cpu" || !strings.HasPrefix(lines[4], "4,lard,") {
		t.Errorf("output:\n%s", a)
	}
}

// TestLog: a log is replayed and its broken lines are reported, not
// fatal; a log with no request is an error.
func TestLog(t *testing.T) {
	dir := t.TempDir()
	var log strings.Builder
	for i := range 2000 {
		log.WriteString("h" + string(rune('a'+i%7)) + ` - - [01/Jul/1995:00:00:01 -0400] "GET /f` + string(rune('a'+i%13)) + ` HTTP/1.0" 200 4096` + "\n")
	}
	log.WriteString("this is not a log line\n")
	path := filepath.Join(dir, "access.log")
	if err := os.WriteFile(path, []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := groupsim(t, "-log", path, "-backends", "2", "-policies", "lard")
	if code != 0 || !strings.Contains(errs, "2001 lines, 2000 requests, 1 broken") || !strings.Contains(errs, "line 2001: ") ||
		!strings.Contains(out, "2         lard") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	code, out, errs = groupsim(t, "-log", path, "-level", "global", "-global-policies", "weighted", "-warmup-time", "0s", "-format", "csv")
	if code != 0 || !strings.HasPrefix(strings.Split(out, "\n")[1], "weighted,2000,") {
		t.Errorf("-level global over the log: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	empty := filepath.Join(dir, "empty.log")
	os.WriteFile(empty, []byte("junk\n"), 0o644)
	if code, _, errs := groupsim(t, "-log", empty); code != 1 || !strings.Contains(errs, "no request could be read") {
		t.Errorf("a log of junk: exit %d, %s", code, errs)
	}
}

// TestBadFlags: what groupsim can not run is a usage error, exit 2.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-policies", "nope"}, {"-backends", "0"}, {"-format", "xml"}, {"-warmup", "1"}, {"extra"},
		{"-level", "world"}, {"-global-policies", "roundrobin"}, {"-ttl", "60,20"},
		{"-ttl", "0,20"}, {"-push-interval", "1ms"}, {"-ttl", "20"}, {"-nodes", "0"}, {"-heavy", "1"}, {"-duration", "10s"}, {"-log-format", "w3c"}, {"-report-scale", "0"}} {
		if code, _, _ := groupsim(t, args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}

// TestReport: -report writes simulation.md and its two charts, the same
// bytes every time, with the claims table.
func TestReport(t *testing.T) {
	var runs [2]map[string]string
	for i := range runs {
		dir := t.TempDir()
		if code, _, errs := groupsim(t, "-requests", "3000", "-objects", "300", "-report-scale", "0.05", "-report", dir); code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		runs[i] = map[string]string{}
		for _, name := range []string{"simulation.md", "sim-site-backends.svg", "sim-site-memory.svg", "sim-global-ttl.svg", "sim-global-skew.svg"} {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			runs[i][name] = string(data)
		}
	}
	if !reflect.DeepEqual(runs[0], runs[1]) {
		t.Error("two reports differ")
	}
	md := runs[0]["simulation.md"]
	for _, want := range []string{"![](sim-site-backends.svg)", "| lard | req/s |", "## The literature's claims", "| LARD 2–4× WRR's throughput",
		"## The global level", "![](sim-global-ttl.svg)", "| geo-load | 20–60 s |", "| round-robin DNS leaving one of four NCSA servers"} {
		if !strings.Contains(md, want) {
			t.Errorf("simulation.md has no %q:\n%s", want, md)
		}
	}
}

// TestGlobal: -level global runs each of dnsd's policies over the
// simulated group, the same bytes every time; without skew and with the
// correction the busiest mirror is near its fair share, and without the
// correction nothing is redirected.
func TestGlobal(t *testing.T) {
	args := []string{"-level", "global", "-global-policies", "geo-load,weighted", "-duration", "90s", "-format", "csv"}
	_, a, _ := groupsim(t, args...)
	code, b, errs := groupsim(t, args...)
	if code != 0 || a != b {
		t.Fatalf("exit %d (%s); two runs:\n%s\n%s", code, errs, a, b)
	}
	lines := strings.Split(strings.TrimSpace(a), "\n")
	if len(lines) < 3 || lines[0] != "policy,requests,busiest,busiest_dns,bin_mean,bin_worst,redirected,not_found,queries,km" || !strings.HasPrefix(lines[2], "weighted,") {
		t.Fatalf("output:\n%s", a)
	}
	tests := []struct {
		name  string
		args  []string
		check func(busiest, redirected, notFound float64) bool
	}{
		{"correction on", nil, func(busiest, _, _ float64) bool { return busiest <= 1.05 }},
		{"correction off", []string{"-correct=false"}, func(_, redirected, _ float64) bool { return redirected == 0 }},
		{"a partial tree", []string{"-missing", "0.3"}, func(_, _, notFound float64) bool { return notFound > 0.02 }},
		{"a partial tree, rescued", []string{"-missing", "0.3", "-content-index"}, func(busiest, _, notFound float64) bool {
			return busiest <= 1.08 && notFound == 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := groupsim(t, append([]string{"-level", "global", "-global-policies", "geo-load", "-format", "csv"}, tt.args...)...)
			f := strings.Split(strings.Split(strings.TrimSpace(out), "\n")[1], ",")
			busiest, _ := strconv.ParseFloat(f[2], 64)
			redirected, _ := strconv.ParseFloat(f[6], 64)
			notFound, _ := strconv.ParseFloat(f[7], 64)
			if code != 0 || !tt.check(busiest, redirected, notFound) {
				t.Errorf("exit %d (%s):\n%s", code, errs, out)
			}
		})
	}
}

// TestWorldCup: -log-format worldcup replays the data set's binary
// records, a truncated tail counted as broken.
func TestWorldCup(t *testing.T) {
	var data []byte
	for i := range 3000 {
		var rec [20]byte
		binary.BigEndian.PutUint32(rec[0:], 898_000_000+uint32(i/10)) // seconds
		binary.BigEndian.PutUint32(rec[4:], uint32(i%97))             // client
		binary.BigEndian.PutUint32(rec[8:], uint32(i*7%301))          // object
		binary.BigEndian.PutUint32(rec[12:], 2048+uint32(i%5)*1000)   // size
		rec[17] = 2                                                   // status index 2: 200
		data = append(data, rec[:]...)
	}
	data = append(data, 1, 2, 3) // a truncated record
	path := filepath.Join(t.TempDir(), "wc_day1_1")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := groupsim(t, "-log", path, "-log-format", "worldcup", "-backends", "2", "-policies", "wrr")
	if code != 0 || !strings.Contains(errs, "3001 lines, 3000 requests, 1 broken") || !strings.Contains(out, "2         wrr") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}

// TestModesAndBins: proxy mode charges the front end, which then works
// more than in handoff mode; -site-bin adds a table of bins whose
// requests add up to the run's.
func TestModesAndBins(t *testing.T) {
	fe := map[string]float64{}
	for _, mode := range []string{"handoff", "proxy"} {
		code, out, errs := groupsim(t, "-requests", "20000", "-objects", "2000", "-backends", "4", "-policies", "lard", "-format", "csv",
			"-mode", mode, "-site-bin", "20s", "-warmup", "0")
		tables := strings.Split(strings.TrimSpace(out), "\n\n")
		if code != 0 || len(tables) != 2 {
			t.Fatalf("%s: exit %d (%s):\n%s", mode, code, errs, out)
		}
		row := strings.Split(strings.Split(tables[0], "\n")[1], ",")
		fe[mode], _ = strconv.ParseFloat(row[9], 64)
		sum := 0
		for _, line := range strings.Split(tables[1], "\n")[1:] {
			n, _ := strconv.Atoi(strings.Split(line, ",")[3])
			sum += n
		}
		if sum != 20000 {
			t.Errorf("%s: the bins hold %d requests, want 20000:\n%s", mode, sum, tables[1])
		}
	}
	if !(fe["proxy"] > 2*fe["handoff"]) {
		t.Errorf("front end CPU: proxy %g, handoff %g: relaying costs nothing?", fe["proxy"], fe["handoff"])
	}
}
