package benchdns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// userHZ is the unit of utime and stime in /proc/PID/stat and of
// /proc/stat: USER_HZ, 100 on every Linux architecture Go runs on
// (sysconf(_SC_CLK_TCK) is not reachable without cgo).
const userHZ = 100

// mix is one query stream.
type mix struct {
	key, title string
	file       string // dnsperf datafile
	binary     bool   // file is wire format (dnsperf -B)
	rate       int    // dnsperf -Q; 0 = closed loop
	do         bool   // a text file's queries with DO (dnsperf -D)
	peer       string // the server dnsd is compared with: gdnsd, or knot for signed answers
	self       string // or the mix of dnsd's own it is compared with (no peer)
}

// servers returns who runs m: dnsd, and its peer unless m is compared
// with another mix of dnsd's own.
func (m mix) servers(dnsd *server, peers map[string]*server) []*server {
	if m.self != "" {
		return []*server{dnsd}
	}
	return []*server{dnsd, peers[m.peer]}
}

// writeTextData writes a dnsperf text datafile of "name type" lines.
func writeTextData(path string, lines ...string) error {
	return os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// writeECSData writes the (c) stream for groupName as a dnsperf -B
// datafile (2-byte length, then the message): for each region and
// family, one A query
// for the group with that region's ECS network, each followed by one
// plain query without EDNS, so half the queries carry ECS. dnsperf's -E
// adds one option to every query, so per-query ECS needs wire format.
// With do, every query has the DO bit (the plain ones EDNS without
// options).
func writeECSData(path, groupName string, do bool) error {
	var out []byte
	for _, fam := range []int{4, 6} {
		for _, r := range regions {
			prefix := r.ecs4
			if fam == 6 {
				prefix = r.ecs6
			}
			q, err := ecsQuery(groupName, dns.TypeA, prefix)
			if err != nil {
				return err
			}
			p := new(dns.Msg)
			p.SetQuestion(groupName, dns.TypeA)
			p.RecursionDesired = false
			if do {
				q.IsEdns0().SetDo()
				p.SetEdns0(1232, true)
			}
			for _, m := range []*dns.Msg{q, p} {
				wire, err := m.Pack()
				if err != nil {
					return err
				}
				out = append(out, byte(len(wire)>>8), byte(len(wire)))
				out = append(out, wire...)
			}
		}
	}
	return os.WriteFile(path, out, 0o644)
}

// ecsQuery is a non-recursive query with EDNS (1232 bytes) and the
// CLIENT-SUBNET option for prefix, scope 0.
func ecsQuery(name string, qtype uint16, prefix string) (*dns.Msg, error) {
	p, err := netip.ParsePrefix(prefix)
	if err != nil {
		return nil, err
	}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.RecursionDesired = false
	m.SetEdns0(1232, false)
	e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(p.Bits()), Address: p.Addr().AsSlice()}
	if p.Addr().Is6() {
		e.Family = 2
	}
	opt := m.IsEdns0()
	opt.Option = append(opt.Option, e)
	return m, nil
}

// perf is what dnsperf reported for one run.
type perf struct {
	sent, completed, lost int64
	noerror               int64
	runTime               float64 // seconds
	qps                   float64
	avg, max              float64   // seconds
	lat                   []float64 // per-query latencies, seconds, with -v
}

// p99 returns the 99th percentile of lat (nearest rank), or -1 without
// per-query latencies.
func (p perf) p99() float64 {
	if len(p.lat) == 0 {
		return -1
	}
	s := slices.Clone(p.lat)
	slices.Sort(s)
	i := (len(s)*99+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}

// runDnsperf runs dnsperf pinned to -client-cpu against addr for d.
// verbose adds -v (each answer's rcode and latency, which costs dnsperf
// enough CPU to lower a closed loop's rate, so only the fixed-rate mix
// uses it).
func runDnsperf(ctx context.Context, bin, host, port string, m mix, d time.Duration, verbose bool) (perf, string, error) {
	args := []string{"-c", *flagClientCPU, bin, "-s", host, "-p", port, "-d", m.file,
		"-c", strconv.Itoa(*flagClients), "-q", "100", "-l", strconv.FormatFloat(d.Seconds(), 'f', -1, 64)}
	if m.binary {
		args = append(args, "-B")
	}
	if m.do {
		args = append(args, "-D")
	}
	if m.rate > 0 {
		args = append(args, "-Q", strconv.Itoa(m.rate))
	}
	if verbose {
		args = append(args, "-v")
	}
	ctx, cancel := context.WithTimeout(ctx, d+30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "taskset", args...).CombinedOutput()
	if err != nil {
		return perf{}, string(out), fmt.Errorf("dnsperf %s: %w", strings.Join(args[2:], " "), err)
	}
	p, err := parseDnsperf(string(out))
	return p, string(out), err
}

// parseDnsperf reads dnsperf 2.10's statistics and, with -v, the
// per-query lines "> NOERROR name type 0.000123".
func parseDnsperf(out string) (perf, error) {
	var p perf
	seen := 0
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, "> "); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 && f[0] != "T" && f[0] != "I" {
				if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
					p.lat = append(p.lat, v)
				}
			}
			continue
		}
		key, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		var err error
		switch key {
		case "Queries sent":
			p.sent, err = strconv.ParseInt(f[0], 10, 64)
			seen++
		case "Queries completed":
			p.completed, err = strconv.ParseInt(f[0], 10, 64)
			seen++
		case "Queries lost":
			p.lost, err = strconv.ParseInt(f[0], 10, 64)
			seen++
		case "Response codes":
			for i := 0; i+1 < len(f); i += 3 { // NOERROR 1000 (100.00%), SERVFAIL …
				if strings.TrimSuffix(f[i], ",") == "NOERROR" {
					p.noerror, err = strconv.ParseInt(f[i+1], 10, 64)
				}
			}
		case "Run time (s)":
			p.runTime, err = strconv.ParseFloat(f[0], 64)
			seen++
		case "Queries per second":
			p.qps, err = strconv.ParseFloat(f[0], 64)
			seen++
		case "Average Latency (s)": // 0.000094 (min 0.000020, max 0.000331)
			p.avg, err = strconv.ParseFloat(f[0], 64)
			if err == nil && len(f) == 5 && f[3] == "max" {
				p.max, err = strconv.ParseFloat(strings.TrimSuffix(f[4], ")"), 64)
			}
			seen++
		}
		if err != nil {
			return p, fmt.Errorf("dnsperf output %q: %w", line, err)
		}
	}
	if seen != 6 {
		return p, errors.New("dnsperf output: no statistics")
	}
	return p, nil
}

// procTicks returns utime+stime of process pid (all its threads), in
// USER_HZ ticks.
func procTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(data))
}

// parseProcStat reads utime and stime (fields 14 and 15) of a
// /proc/PID/stat line; the command name, field 2, may hold spaces and
// parentheses, so the fields are counted after its last ')'.
func parseProcStat(line string) (int64, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return 0, errors.New("/proc/PID/stat: no ')'")
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3
	if len(f) < 13 {
		return 0, errors.New("/proc/PID/stat: too few fields")
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	s, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return u + s, nil
}

// cpuTimes is the machine's line "cpu" of /proc/stat, in ticks.
type cpuTimes struct{ idle, total int64 }

func readCPUTimes() (cpuTimes, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, err
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return parseCPULine(line)
}

// parseCPULine reads "cpu user nice system idle iowait irq softirq steal
// …"; idle counts idle and iowait, total the first eight fields (guest
// time is already inside user).
func parseCPULine(line string) (cpuTimes, error) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var t cpuTimes
	for i, s := range f[1:9] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return cpuTimes{}, fmt.Errorf("/proc/stat: %w", err)
		}
		t.total += v
		if i == 3 || i == 4 {
			t.idle += v
		}
	}
	return t, nil
}

// idleShare is the share of the machine's CPU time that was idle
// between a and b.
func idleShare(a, b cpuTimes) float64 {
	if b.total <= a.total {
		return 1
	}
	return float64(b.idle-a.idle) / float64(b.total-a.total)
}

// waitQuiet samples /proc/stat every window until one window was at
// least minIdle idle, or timeout passes; it returns the last window's
// idle share, how long it waited and whether the machine was quiet.
func waitQuiet(ctx context.Context, minIdle float64, window, timeout time.Duration) (float64, time.Duration, bool, error) {
	start := time.Now()
	prev, err := readCPUTimes()
	if err != nil {
		return 0, 0, false, err
	}
	t := time.NewTicker(window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, time.Since(start), false, ctx.Err()
		case <-t.C:
		}
		cur, err := readCPUTimes()
		if err != nil {
			return 0, 0, false, err
		}
		idle := idleShare(prev, cur)
		prev = cur
		waited := time.Since(start)
		if idle >= minIdle {
			return idle, waited, true, nil
		}
		if waited >= timeout {
			return idle, waited, false, nil
		}
	}
}
