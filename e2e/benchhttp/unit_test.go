package benchhttp

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/transmirror/transmirror/mirror"
)

// wrkOut is wrk 4.1's report of a run with --latency whose responses
// were all 404 (captured from a real run).
const wrkOut = `Running 1s test @ http://127.0.0.1:44009/missing
  1 threads and 4 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.12ms    2.39ms  17.47ms   88.24%
    Req/Sec     1.37k   361.88     1.99k    60.00%
  Latency Distribution
     50%    2.43ms
     75%    3.87ms
     90%    5.61ms
     99%   13.64ms
  1360 requests in 1.00s, 690.62KB read
  Non-2xx or 3xx responses: 1360
Requests/sec:   1357.24
Transfer/sec:    689.23KB
`

// TestParseWrk checks the reading of wrk's report: the rate, the count,
// p99 in seconds and the failures, with and without their lines.
func TestParseWrk(t *testing.T) {
	clean := strings.Replace(wrkOut, "  Non-2xx or 3xx responses: 1360\n", "", 1)
	sockets := strings.Replace(clean, "Requests/sec:", "  Socket errors: connect 1, read 2, write 0, timeout 4\nRequests/sec:", 1)
	cases := []struct {
		name string
		out  string
		want wrkResult
		ok   bool
	}{
		{"404s", wrkOut, wrkResult{requests: 1360, rps: 1357.24, p99: 0.01364, badStatus: 1360}, true},
		{"clean", clean, wrkResult{requests: 1360, rps: 1357.24, p99: 0.01364}, true},
		{"socket errors", sockets, wrkResult{requests: 1360, rps: 1357.24, p99: 0.01364, sockErrs: 7}, true},
		{"p99 in µs", strings.Replace(clean, "13.64ms", "850.00us", 1), wrkResult{requests: 1360, rps: 1357.24, p99: 0.00085}, true},
		{"no --latency", strings.Replace(clean, "     99%   13.64ms\n", "", 1), wrkResult{}, false},
		{"bad time", strings.Replace(clean, "13.64ms", "13.64", 1), wrkResult{}, false},
		{"not wrk", "unable to connect to 127.0.0.1:1 Connection refused\n", wrkResult{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWrk(tc.out)
			if (err == nil) != tc.ok {
				t.Fatalf("parseWrk: %v, want ok %v", err, tc.ok)
			}
			if tc.ok && (got.requests != tc.want.requests || got.rps != tc.want.rps || !near(got.p99, tc.want.p99) ||
				got.sockErrs != tc.want.sockErrs || got.badStatus != tc.want.badStatus) {
				t.Errorf("parseWrk = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestParseWrkTime checks each of wrk's units.
func TestParseWrkTime(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"850.00us", 850e-6, true}, {"1.90ms", 1.9e-3, true}, {"1.20s", 1.2, true},
		{"2.00m", 120, true}, {"1.00h", 3600, true}, {"12", 0, false}, {"xms", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseWrkTime(tc.in)
			if (err == nil) != tc.ok || !near(got, tc.want) {
				t.Errorf("parseWrkTime(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
			}
		})
	}
}

// TestStatFields checks the parent PID and utime+stime are read after
// the command name, whatever it holds.
func TestStatFields(t *testing.T) {
	cases := []struct {
		name, line string
		ppid       int
		ticks      int64
		ok         bool
	}{
		{"nginx worker", "4321 (nginx) S 4320 4320 4320 0 -1 4194624 90 0 0 0 170 30 0 0 20 0 1 0 100 1 1 1", 4320, 200, true},
		{"spaces and parentheses in the name", "7 (a b) c)) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1 1 1 1", 1, 11, true},
		{"truncated", "7 (x) R 1 2", 0, 0, false},
		{"no name", "garbage", 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ppid, ticks, err := statFields(tc.line)
			if (err == nil) != tc.ok || ppid != tc.ppid || ticks != tc.ticks {
				t.Errorf("statFields = %d, %d, %v; want %d, %d, ok %v", ppid, ticks, err, tc.ppid, tc.ticks, tc.ok)
			}
		})
	}
}

// TestSampleCPU checks this process's own CPU is read and that a
// changed set of processes is an error.
func TestSampleCPU(t *testing.T) {
	a, err := sampleCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(a.pids) == 0 || a.pids[0] != os.Getpid() {
		t.Fatalf("sampleCPU(self) counted %v, want this process first", a.pids)
	}
	if _, err := a.since(a); err != nil {
		t.Errorf("the same processes: %v", err)
	}
	b := a
	b.pids = append([]int{}, a.pids...)
	b.pids = append(b.pids, 1<<30)
	if _, err := b.since(a); err == nil {
		t.Error("a process more: no error")
	}
}

// TestBusyTicks checks the machine's busy time leaves out idle and
// iowait and refuses a per-CPU or short line.
func TestBusyTicks(t *testing.T) {
	got, err := busyTicks("cpu  100 5 50 800 20 3 2 1 0 0")
	if err != nil || got != 161 {
		t.Errorf("busyTicks = %d, %v; want 161 (user, nice, system, irq, softirq, steal)", got, err)
	}
	for _, bad := range []string{"cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3"} {
		if _, err := busyTicks(bad); err == nil {
			t.Errorf("busyTicks(%q): no error", bad)
		}
	}
}

// TestOthersLine checks the median and the most of the rest of the
// machine's share of a core over every run.
func TestOthersLine(t *testing.T) {
	m := measured{}
	for i, o := range []float64{0.5, 0.1, 0.2} {
		m.add("k", fmt.Sprint(i), sample{others: o, seconds: 1})
	}
	got := othersLine(m)
	for _, w := range []string{"3 measured runs", "median 20%", "most 50%"} {
		if !strings.Contains(got, w) {
			t.Errorf("othersLine = %q, want %q in it", got, w)
		}
	}
	if othersLine(measured{}) != "" {
		t.Error("no runs: a line")
	}
}

// TestSummarize checks the medians and that ratios are taken round by
// round, not from the medians.
func TestSummarize(t *testing.T) {
	s := func(rps float64, n int64, fe, be float64) sample {
		return sample{wrkResult: wrkResult{rps: rps, requests: n, p99: 0.001}, feCPU: fe, beCPU: be}
	}
	// Round 1 at half speed for both: the ratios are 2× in each round.
	ss := []sample{s(50, 500, 0.04, 0.01), s(100, 1000, 0.04, 0.01)}
	refs := []sample{s(25, 250, 0.005, 0.005), s(50, 500, 0.01, 0.01)}
	r := summarize(ss, refs)
	if !near(r.rps, 75) || !near(r.fe, 60e-6) || !near(r.be, 15e-6) {
		t.Errorf("medians: %v req/s, %v, %v s/req; want 75, 60e-6, 15e-6", r.rps, r.fe, r.be)
	}
	if !near(r.rpsX, 2) || !near(r.feX, 3) || !near(r.beX, 0.75) {
		t.Errorf("ratios %v, %v, %v; want 2, 3, 0.75 (the medians of the rounds' ratios)", r.rpsX, r.feX, r.beX)
	}
	if r := summarize(ss, nil); r.rpsX != 0 {
		t.Errorf("no reference: ratio %v, want 0", r.rpsX)
	}
}

// near reports whether a and b are equal but for rounding.
func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// update rewrites the golden files of the formatting tests.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTable checks the printed table against testdata: a reference row
// without ratios, ratios on the others, a front end whose reference was
// not measured without them, columns lined up, kinds apart.
func TestTable(t *testing.T) {
	m := measured{}
	ks := kinds()
	for round := range 2 {
		f := float64(round + 1)
		for _, k := range ks[:2] {
			m.add(k.name, "haproxy-rr", sample{wrkResult: wrkResult{rps: 30000 * f, requests: 180000, p99: 0.0019}, feCPU: 3.4, beCPU: 2.4})
			m.add(k.name, "mirror-wrr", sample{wrkResult: wrkResult{rps: 9800 * f, requests: 58800, p99: 0.0065}, feCPU: 4.8, beCPU: 1.3})
			m.add(k.name, "mirror-lard", sample{wrkResult: wrkResult{rps: 9000, requests: 54000, p99: 0.007, badStatus: 3}, feCPU: 6.6, beCPU: 1.2})
		}
	}
	fes, err := selected("haproxy-rr,mirror-wrr,mirror-lard")
	if err != nil {
		t.Fatal(err)
	}
	out := table(rows(m, ks, fes))
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 2+2*3+1 {
		t.Errorf("%d lines, want a caption, a header, 3 rows for each of 2 kinds and a blank line:\n%s", len(lines), out)
	}
	golden(t, filepath.Join("testdata", "table.golden"), out)
	// Columns line up: every row's error count ends where the header's
	// "errors" does, two spaces before the reference.
	end := utf8.RuneCountInString(lines[1][:strings.Index(lines[1], "errors")+len("errors")])
	for i, l := range lines[2:] {
		r := []rune(l)
		if l != "" && (len(r) < end+2 || r[end-1] < '0' || r[end-1] > '9' || string(r[end:end+2]) != "  ") {
			t.Errorf("row %d does not line up with the header:\n%s", i+1, out)
		}
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

// TestSelected checks -frontends: the table's order whatever the list's,
// an unknown name refused.
func TestSelected(t *testing.T) {
	fes, err := selected("mirror-lard,haproxy-uri")
	if err != nil || len(fes) != 2 || fes[0].key != "haproxy-uri" || fes[1].key != "mirror-lard" {
		t.Errorf("selected = %v, %v; want haproxy-uri, mirror-lard", fes, err)
	}
	if _, err := selected("haproxy-rr,varnish"); err == nil || !strings.Contains(err.Error(), "varnish") {
		t.Errorf("an unknown front end: %v, want an error naming it", err)
	}
	all, err := selected(allFrontEnds())
	if err != nil || len(all) != len(frontEnds) {
		t.Errorf("the default: %d front ends, %v; want all %d", len(all), err, len(frontEnds))
	}
}

// TestFrontEnds checks every reference is an HAProxy front end that
// comes earlier, with the same clients.
func TestFrontEnds(t *testing.T) {
	seen := map[string]frontEnd{}
	for _, fe := range frontEnds {
		if fe.ref != "" {
			ref, ok := seen[fe.ref]
			if !ok || !strings.HasPrefix(ref.key, "haproxy-") || ref.close != fe.close || ref.ref != "" {
				t.Errorf("%s: reference %q is not an earlier HAProxy reference with the same clients", fe.key, fe.ref)
			}
		}
		seen[fe.key] = fe
	}
}

// TestMirrorConfigs checks that the generated mirror configurations load
// and say what the comparison means them to.
func TestMirrorConfigs(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := writeContent(root); err != nil {
		t.Fatal(err)
	}
	nginx := []siteBackend{{name: "be1", addr: "127.0.0.1:1001"}, {name: "be2", addr: "127.0.0.1:1002"}}
	mirrors := []siteBackend{{name: "be1", addr: "127.0.0.1:1001", sock: filepath.Join(dir, "be1")},
		{name: "be2", addr: "127.0.0.1:1002", sock: filepath.Join(dir, "be2")}}
	cases := []struct {
		name, cfg, mode, policy string
		backends                int
	}{
		{"proxy wrr", mirrorFrontendConfig("proxy", "wrr", nginx), "proxy", "wrr", 2},
		{"proxy lard", mirrorFrontendConfig("proxy", "lard", nginx), "proxy", "lard", 2},
		{"handoff", mirrorFrontendConfig("handoff", "wrr", mirrors), "handoff", "wrr", 2},
		{"back end", mirrorBackendConfig("be1", root, filepath.Join(dir, "be1")), "", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := mirror.ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(tc.cfg))
			if err != nil {
				t.Fatalf("%v\n%s", err, tc.cfg)
			}
			if len(cfg.Backends) != tc.backends || (tc.backends > 0 && (cfg.Site.Mode != tc.mode || cfg.Site.Policy.Name != tc.policy)) {
				t.Errorf("%d back ends, mode %q, policy %q; want %d, %q, %q", len(cfg.Backends), cfg.Site.Mode, cfg.Site.Policy.Name, tc.backends, tc.mode, tc.policy)
			}
		})
	}
}

// TestProxyConfigs checks the HAProxy and nginx configurations name both
// back ends, the pick and the keep-alive settings.
func TestProxyConfigs(t *testing.T) {
	bes := []string{"127.0.0.1:1001", "127.0.0.1:1002"}
	cases := []struct {
		name, cfg string
		want      []string
	}{
		{"haproxy uri", haproxyConfig("127.0.0.1:1000", "uri", bes),
			[]string{"bind 127.0.0.1:1000", "balance uri", "http-reuse always", "server be1 127.0.0.1:1001", "server be2 127.0.0.1:1002", "nbthread 1"}},
		{"nginx hash", nginxFrontendConfig("/d", "", "127.0.0.1:1000", true, bes),
			[]string{"listen 127.0.0.1:1000;", "hash $request_uri consistent;", "keepalive 64;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`, "server 127.0.0.1:1002;", "worker_processes 1;", "daemon off;"}},
		{"nginx round robin", nginxFrontendConfig("/d", "user u g;", "127.0.0.1:1000", false, bes),
			[]string{"user u g;", "server 127.0.0.1:1001;"}},
		{"nginx back end", nginxBackendConfig("/d", "", "127.0.0.1:1001", "/srv/root", "be1"),
			[]string{"listen 127.0.0.1:1001;", `root "/srv/root";`, "add_header X-Backend be1;", "sendfile on;", "keepalive_requests 1000000;"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.want {
				if !strings.Contains(tc.cfg, w) {
					t.Errorf("no %q in:\n%s", w, tc.cfg)
				}
			}
			if tc.name == "nginx round robin" && strings.Contains(tc.cfg, "hash") {
				t.Errorf("round robin with a hash:\n%s", tc.cfg)
			}
		})
	}
}

// TestMixScript checks the Lua script holds every path of the mix once,
// in order.
func TestMixScript(t *testing.T) {
	paths := kinds()[1].paths
	s := mixScript(paths)
	if n := strings.Count(s, `"/mix/`); n != mixFiles {
		t.Errorf("%d paths in the script, want %d", n, mixFiles)
	}
	if i, j := strings.Index(s, `"/mix/0000.bin"`), strings.Index(s, `"/mix/0999.bin"`); i < 0 || j < i {
		t.Errorf("paths out of order or missing (%d, %d)", i, j)
	}
	for _, w := range []string{"wrk.format(nil, p)", "request = function()"} {
		if !strings.Contains(s, w) {
			t.Errorf("no %q in the script", w)
		}
	}
}

// TestCheckBodies checks a transfer is compared with its file: status,
// size and bytes.
func TestCheckBodies(t *testing.T) {
	root := t.TempDir()
	if err := writeContent(root); err != nil {
		t.Fatal(err)
	}
	body, err := os.ReadFile(filepath.Join(root, "4k.bin"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.ReadFile(filepath.Join(root, "mix", "0001.bin"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		got  fetched
		want string // error substring, "" for none
	}{
		{"the file", fetched{code: 200, size: int64(len(body)), backend: "be2", body: body}, ""},
		{"404", fetched{code: 404, size: 9, body: []byte("not found")}, "status 404"},
		{"short", fetched{code: 200, size: 10, body: body[:10]}, "10 bytes"},
		{"another file", fetched{code: 200, size: int64(len(other)), body: other}, "not the file's"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			by, err := checkBodies(root, []string{smallPath}, []fetched{tc.got})
			switch {
			case tc.want == "" && (err != nil || by[smallPath] != tc.got.backend):
				t.Errorf("checkBodies = %v, %v; want no error and the back end", by, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("checkBodies: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// TestPicks checks the spread and same-pick checks on the back ends.
func TestPicks(t *testing.T) {
	both := map[string]string{"/a": "be1", "/b": "be2"}
	if err := checkSpread(both); err != nil {
		t.Errorf("both back ends: %v", err)
	}
	if err := checkSpread(map[string]string{"/a": "be1", "/b": "be1"}); err == nil {
		t.Error("one back end: no error")
	}
	if err := checkSpread(map[string]string{"/a": "", "/b": ""}); err == nil {
		t.Error("no X-Backend: no error")
	}
	if err := samePicks(both, both); err != nil {
		t.Errorf("the same picks: %v", err)
	}
	if err := samePicks(both, map[string]string{"/a": "be1", "/b": "be1"}); err == nil || !strings.Contains(err.Error(), "/b") {
		t.Errorf("a moved path: %v, want an error naming /b", err)
	}
}
