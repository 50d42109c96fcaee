package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binDir holds the binaries built once for the whole e2e run.
var binDir string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "transmirror-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/...")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building binaries:", err)
		return 1
	}
	binDir = dir
	return m.Run()
}

// bin returns the path of a built binary.
func bin(name string) string { return filepath.Join(binDir, name) }

// proc is a process a test started; it is stopped, by its PID, when the
// test ends.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	mu   sync.Mutex
	logs bytes.Buffer
	done chan struct{}
}

// Logs returns what the process wrote to stderr and stdout so far.
func (p *proc) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// Signal sends sig to the process.
func (p *proc) Signal(sig os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal %v to pid %d: %v", sig, p.cmd.Process.Pid, err)
	}
}

// Stop sends SIGTERM and waits (bounded) for the process to exit; it kills
// it if it does not. Stop is idempotent.
func (p *proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.t.Errorf("pid %d did not stop within 10s of SIGTERM; killing it", p.cmd.Process.Pid)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Exited reports whether the process has exited.
func (p *proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start runs a binary and calls ready on every output line until it
// returns true or the deadline passes; the test fails if the process exits
// first.
func start(t testing.TB, name string, args []string, ready func(line string) bool) *proc {
	t.Helper()
	p, err := launch(t, name, args, ready)
	if err != nil {
		t.Fatalf("%s %v", name, err)
	}
	return p
}

// launch is start that returns an error when the process exits before it
// is ready, instead of failing the test; the process is stopped, by its
// PID, when the test ends.
func launch(t testing.TB, name string, args []string, ready func(line string) bool) (*proc, error) {
	t.Helper()
	p := &proc{t: t, done: make(chan struct{})}
	p.cmd = exec.Command(name, args...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case lines <- sc.Text():
			default:
			}
		}
		close(lines)
	}()
	go func() {
		_ = p.cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", filepath.Base(name), p.cmd.Process.Pid, p.Logs())
		}
	})
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				<-p.done
				return nil, fmt.Errorf("exited before it was ready: %s", strings.TrimSpace(p.Logs()))
			}
			if ready(line) {
				go func() { // keep draining so the process never blocks on output
					for range lines {
					}
				}()
				return p, nil
			}
		case <-deadline.C:
			t.Fatalf("%s not ready within 20s:\n%s", name, p.Logs())
		}
	}
}

// metricSum sums the samples of the metric name, in the Prometheus text
// format, whose labels include every one of labels (each `key="value"`).
func metricSum(text, name string, labels ...string) float64 {
	sum := 0.0
	for line := range strings.SplitSeq(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		var lbl string
		if rest[0] == '{' {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			lbl, rest = rest[1:end], rest[end+1:]
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(","+lbl+",", ","+l+",") {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
	}
	return sum
}

// dnsdProc is a running dnsd with the addresses it reported.
type dnsdProc struct {
	*proc
	Addr  string // DNS host:port, UDP and TCP
	Host  string
	Port  string
	Admin string // admin host:port, "" when not configured
}

var (
	dnsAddrRE   = regexp.MustCompile(`msg="dns listening" addr=(\S+)`)
	adminAddrRE = regexp.MustCompile(`msg="admin listening" addr=(\S+)`)
)

// startDNSD starts the real dnsd binary with args and waits until it has
// reported its DNS address (and admin address if wantAdmin).
func startDNSD(t testing.TB, wantAdmin bool, args ...string) *dnsdProc {
	t.Helper()
	d := &dnsdProc{}
	d.proc = start(t, bin("dnsd"), args, func(line string) bool {
		if m := dnsAddrRE.FindStringSubmatch(line); m != nil && d.Addr == "" {
			d.Addr = m[1]
		}
		if m := adminAddrRE.FindStringSubmatch(line); m != nil {
			d.Admin = m[1]
		}
		return strings.Contains(line, `msg="dnsd started"`)
	})
	if d.Addr == "" || (wantAdmin && d.Admin == "") {
		t.Fatalf("dnsd did not report its addresses:\n%s", d.Logs())
	}
	var err error
	if d.Host, d.Port, err = net.SplitHostPort(d.Addr); err != nil {
		t.Fatal(err)
	}
	return d
}

// Dig runs the real dig against this dnsd.
func (d *dnsdProc) Dig(t testing.TB, args ...string) *digResult {
	t.Helper()
	return dig(t, d.Host, d.Port, args...)
}

// digResult is dig's output, parsed.
type digResult struct {
	Raw        string
	Status     string          // NOERROR, NXDOMAIN, …; "" when dig printed no header
	Flags      map[string]bool // qr aa tc rd ra ad cd
	EDNS       *ednsInfo
	Question   []rr
	Answer     []rr
	Authority  []rr
	Additional []rr
	Proto      string // UDP or TCP, from ";; SERVER:"
	Size       int    // MSG SIZE rcvd
}

type ednsInfo struct {
	Version int
	UDP     int
	Options map[string]string // NSID, COOKIE, CLIENT-SUBNET, …
}

// rr is one record line of dig's output.
type rr struct {
	Name, Class, Type, Data string
	TTL                     int
}

func (r rr) String() string {
	return fmt.Sprintf("%s %d %s %s %s", r.Name, r.TTL, r.Class, r.Type, r.Data)
}

var (
	headerRE = regexp.MustCompile(`status: ([A-Z]+)`)
	flagsRE  = regexp.MustCompile(`;; flags:([^;]*);`)
	ednsRE   = regexp.MustCompile(`; EDNS: version: (\d+), flags:[^;]*; udp: (\d+)`)
	serverRE = regexp.MustCompile(`;; SERVER: .*\((UDP|TCP)\)`)
	sizeRE   = regexp.MustCompile(`;; MSG SIZE\s+rcvd: (\d+)`)
)

// dig runs dig @host -p port with args (+time=2 +tries=1 unless given) and
// parses what it prints. A dig exit status other than 0 fails the test
// unless the output still parsed (dig exits 9 on no reply, 10 on AXFR
// refused, which callers inspect through Raw).
func dig(t testing.TB, host, port string, args ...string) *digResult {
	t.Helper()
	full := append([]string{"@" + host, "-p", port, "+time=2", "+tries=1"}, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, "dig", full...).CombinedOutput()
	return parseDig(string(out))
}

func parseDig(out string) *digResult {
	r := &digResult{Raw: out, Flags: map[string]bool{}}
	if m := headerRE.FindStringSubmatch(out); m != nil {
		r.Status = m[1]
	}
	if m := flagsRE.FindStringSubmatch(out); m != nil {
		for _, f := range strings.Fields(m[1]) {
			r.Flags[f] = true
		}
	}
	if m := ednsRE.FindStringSubmatch(out); m != nil {
		v, _ := strconv.Atoi(m[1])
		u, _ := strconv.Atoi(m[2])
		r.EDNS = &ednsInfo{Version: v, UDP: u, Options: map[string]string{}}
	}
	if m := serverRE.FindStringSubmatch(out); m != nil {
		r.Proto = m[1]
	}
	if m := sizeRE.FindStringSubmatch(out); m != nil {
		r.Size, _ = strconv.Atoi(m[1])
	}
	var section *[]rr
	inOPT := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, ";; OPT PSEUDOSECTION"):
			inOPT, section = true, nil
			continue
		case strings.HasPrefix(line, ";; QUESTION SECTION"):
			inOPT, section = false, &r.Question
			continue
		case strings.HasPrefix(line, ";; ANSWER SECTION"):
			inOPT, section = false, &r.Answer
			continue
		case strings.HasPrefix(line, ";; AUTHORITY SECTION"):
			inOPT, section = false, &r.Authority
			continue
		case strings.HasPrefix(line, ";; ADDITIONAL SECTION"):
			inOPT, section = false, &r.Additional
			continue
		case strings.TrimSpace(line) == "":
			inOPT, section = false, nil
			continue
		}
		if inOPT && r.EDNS != nil && strings.HasPrefix(line, "; ") && !strings.HasPrefix(line, "; EDNS:") {
			k, v, _ := strings.Cut(strings.TrimPrefix(line, "; "), ":")
			r.EDNS.Options[k] = strings.TrimSpace(v)
			continue
		}
		if section == nil {
			// AXFR output has no section headers: records stand alone.
			if !strings.HasPrefix(line, ";") && r.Status == "" {
				if x, ok := parseRR(line); ok {
					r.Answer = append(r.Answer, x)
				}
			}
			continue
		}
		if section == &r.Question {
			f := strings.Fields(strings.TrimPrefix(line, ";"))
			if len(f) >= 3 {
				*section = append(*section, rr{Name: f[0], Class: f[1], Type: f[2]})
			}
			continue
		}
		if x, ok := parseRR(line); ok {
			*section = append(*section, x)
		}
	}
	return r
}

func parseRR(line string) (rr, bool) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return rr{}, false
	}
	ttl, err := strconv.Atoi(f[1])
	if err != nil {
		return rr{}, false
	}
	return rr{Name: f[0], TTL: ttl, Class: f[2], Type: f[3], Data: strings.Join(f[4:], " ")}, true
}

// types returns "TYPE data" for each record, for compact comparisons.
func types(rrs []rr) []string {
	var s []string
	for _, r := range rrs {
		s = append(s, r.Type+" "+r.Data)
	}
	return s
}

// writeFile writes content into dir/name and returns the path.
func writeFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// metricsClient fetches /metrics pages: loopback, bounded, a new
// connection each time, so that a scrape leaves no connection (and no
// goroutine of the scraped daemon) behind.
var metricsClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}

// metrics fetches the /metrics page of the admin address admin (host:port):
// the text of a 200, else an error naming the status.
func metrics(admin string) (string, error) {
	return getBody(metricsClient, "http://"+admin+"/metrics")
}

// scrape is metrics for the test's own goroutine: an error fails the test.
func scrape(t testing.TB, admin string) string {
	t.Helper()
	text, err := metrics(admin)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// metric reads admin's metric name: the sum of its series with the given
// labels (see metricSum); an error when the page is not a 200 or has no
// series of name, so that a missing metric is never read as a zero.
func metric(admin, name string, labels ...string) (float64, error) {
	text, err := metrics(admin)
	if err != nil {
		return 0, err
	}
	if !strings.Contains(text, "\n"+name+" ") && !strings.Contains(text, "\n"+name+"{") {
		return 0, fmt.Errorf("%s/metrics has no %s series", admin, name)
	}
	return metricSum(text, name, labels...), nil
}
