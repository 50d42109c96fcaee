package benchsite

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// Flags of the TLS comparison (go test ... -args -site -tls).
var (
	flagTLS            = flag.Bool("tls", false, "run BenchmarkSiteTLS (TLS through the front end) instead of the policy comparison")
	flagTLSModes       = flag.String("tls-mode", "proxy,redirect", "site modes of the TLS comparison, in order: proxy, redirect")
	flagTLSRounds      = flag.Int("tls-rounds", 7, "rounds of the TLS comparison per mode, each running every case once")
	flagTLSRequests    = flag.Int("tls-requests", 20000, "requests per kept-connection case and round")
	flagTLSConns       = flag.Int("tls-connections", 3000, "requests, each on a new connection, per new-connection case and round")
	flagTLSConcurrency = flag.Int("tls-concurrency", 32, "requests in flight in the TLS comparison")
	flagTLSPolicy      = flag.String("tls-policy", "wrr", "the front end's policy in the TLS comparison")
)

// tlsBackends is the number of back ends of the TLS comparison: the
// front end's CPU is what it measures, and on two cores fewer
// processes leave it more.
const tlsBackends = 2

// tlsFileSize is the size of the one file the TLS comparison requests.
const tlsFileSize = 4096

// userHZ is the unit of utime and stime in /proc/PID/stat (USER_HZ,
// 100 on Linux whatever the kernel's own tick).
const userHZ = 100

// tlsCase is one way of reaching the front end.
type tlsCase struct {
	name    string
	https   bool
	h2      bool // HTTP/2 (by ALPN); else HTTP/1.1
	newConn bool // one request per connection
}

// tlsCases are the cases in the order of a round's first run; the first
// is the baseline of the ratios.
var tlsCases = []tlsCase{
	{name: "plain HTTP/1.1, kept connections"},
	{name: "TLS, HTTP/1.1, kept connections", https: true},
	{name: "TLS, HTTP/2, kept connection", https: true, h2: true},
	{name: "plain HTTP/1.1, new connection each", newConn: true},
	{name: "TLS, new connection each (full handshake)", https: true, newConn: true},
}

// sample is one case's figures in one round.
type sample struct {
	rps float64
	cpu float64 // the front end's CPU seconds per request
}

// BenchmarkSiteTLS measures TLS through the site front end: in each
// mode of -tls-mode, one front end (-tls-policy) with a plain and an
// HTTPS listener over two back ends, a 4 KiB file requested at
// -tls-concurrency in each case of tlsCases (in redirect mode the front
// end's 302 to a back end, not followed). Each of -tls-rounds rounds
// runs every case once, in an order rotated by one each round; a case's
// ratios are taken against the plain kept-connection case of the same
// round and their median over the rounds is reported, so that drift on
// a shared machine cancels. The front end's CPU comes from its
// /proc/PID/stat (user and system time, 10 ms ticks), over the measured
// requests only.
func BenchmarkSiteTLS(b *testing.B) {
	if !*flagTLS {
		b.Skip("the TLS comparison runs with -tls (make bench-site BENCH_SITE_ARGS=-tls)")
	}
	if runtime.GOOS != "linux" || *flagBin != "cmd" {
		b.Skip("the TLS comparison needs Linux's /proc and -bin=cmd (the self mirror has no tls.listen)")
	}
	if *flagTLSRounds < 1 {
		b.Fatalf("-tls-rounds %d: want at least 1", *flagTLSRounds)
	}
	bin := mirrorBinary(b)
	fmt.Printf("TLS through the front end: %s, %d back ends, one %d-byte file, concurrency %d, %d requests per kept-connection case and %d per new-connection case, %d rounds per mode\n",
		*flagTLSPolicy, tlsBackends, tlsFileSize, *flagTLSConcurrency, *flagTLSRequests, *flagTLSConns, *flagTLSRounds)
	begin := time.Now()
	var tables []string
	for _, mode := range strings.Split(*flagTLSModes, ",") {
		if mode != "proxy" && mode != "redirect" {
			b.Fatalf("-tls-mode %q: want proxy or redirect", mode)
		}
		b.Run(mode, func(b *testing.B) {
			fe, ca := tlsSite(b, bin, b.TempDir(), mode)
			hs := handshakeOf(b, fe, ca)
			rounds := tlsRounds(b, fe, ca, mode)
			tables = append(tables, fmt.Sprintf("%s mode, %s: ", mode, hs)+tlsTable(tlsRows(rounds), len(rounds))+handshakeLine(rounds))
		})
	}
	fmt.Printf("\n%s", strings.Join(tables, "\n"))
	fmt.Printf("all rounds took %v\n", time.Since(begin).Round(time.Second))
}

// tlsRounds runs the rounds of one mode against fe: rounds[r][i] is case
// i in round r.
func tlsRounds(b *testing.B, fe *mirrorProc, ca *probetest.CA, mode string) [][]sample {
	b.Helper()
	rounds := make([][]sample, *flagTLSRounds)
	for r := range rounds {
		rounds[r] = make([]sample, len(tlsCases))
		for k := range tlsCases {
			i := (k + r) % len(tlsCases)
			s, err := runTLSCase(fe, ca, tlsCases[i], mode == "redirect")
			if err != nil {
				b.Fatalf("%s mode, round %d, %s: %v", mode, r+1, tlsCases[i].name, err)
			}
			rounds[r][i] = s
		}
	}
	return rounds
}

// tlsSite starts the back ends and the front end in site mode mode of
// the TLS comparison below dir and returns the front end and the CA its
// certificate is from.
func tlsSite(b *testing.B, bin, dir, mode string) (*mirrorProc, *probetest.CA) {
	b.Helper()
	root := filepath.Join(dir, "root")
	for path, body := range map[string]string{
		"file":      strings.Repeat("x", tlsFileSize),
		"-/healthy": "ok\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	var list strings.Builder
	for i := range tlsBackends {
		name := fmt.Sprintf("be%d", i+1)
		be := startMirror(b, bin, filepath.Join(dir, name+".yaml"), backendYAML(name, root, 1<<20))
		fmt.Fprintf(&list, "  - {name: %s, url: 'http://%s', admin_url: 'http://%s'", name, be.http, be.admin)
		if mode == "redirect" {
			fmt.Fprintf(&list, ", public_url: 'http://%s'", be.http)
		}
		list.WriteString("}\n")
	}
	ca := probetest.NewCA(b, dir, "ca")
	cert, key := ca.LeafFor(b, dir, "www", "www.example.org", "fe.site.example.org")
	fe := startMirror(b, bin, filepath.Join(dir, "fe.yaml"), fmt.Sprintf(`listen: ["127.0.0.1:0"]
tls:
  listen: ["127.0.0.1:0"]
  certificates: [{cert_file: %s, key_file: %s}]
group: www.example.org
member: fe
host: fe.site.example.org
capacity: 1000
redirect: {enabled: false}
backends:
%ssite:
  mode: %s
  policy: {name: %s}
  health: {interval: 1s}
`, strconv.Quote(cert), strconv.Quote(key), list.String(), mode, *flagTLSPolicy))
	if fe.https == "" {
		b.Fatal("the front end logged no https listening address")
	}
	return fe, ca
}

// tlsClient is a client for c: TLS 1.3 by default, trusting only ca,
// with no session cache (every new connection is a full handshake),
// following no redirect.
func tlsClient(c tlsCase, ca *probetest.CA) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, CheckRedirect: noRedirect, Transport: &http.Transport{
		MaxIdleConnsPerHost: *flagTLSConcurrency,
		MaxConnsPerHost:     *flagTLSConcurrency,
		DisableCompression:  true,
		DisableKeepAlives:   c.newConn,
		ForceAttemptHTTP2:   c.h2,
		TLSClientConfig:     &tls.Config{RootCAs: ca.Pool, ServerName: "www.example.org"},
	}}
}

// handshakeOf returns the TLS version, key exchange and cipher suite
// that a client of the comparison agrees with fe.
func handshakeOf(b *testing.B, fe *mirrorProc, ca *probetest.CA) string {
	b.Helper()
	client := tlsClient(tlsCase{https: true, newConn: true}, ca)
	resp, err := client.Get("https://" + fe.https + "/-/healthy")
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.TLS == nil {
		b.Fatal("a response over https without TLS state")
	}
	st := resp.TLS
	return fmt.Sprintf("%s, %s, %s", tls.VersionName(st.Version), st.CurveID, tls.CipherSuiteName(st.CipherSuite))
}

// noRedirect is an http.Client's CheckRedirect that returns the 302
// itself.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// tlsTarget is what one case of the comparison sends its requests to
// and how it checks the answers.
type tlsTarget struct {
	client   *http.Client
	url      string
	c        tlsCase
	redirect bool // the front end answers 302 to a back end
}

// runTLSCase opens c's connections with a few requests, then sends the
// measured ones and reads the front end's CPU around them.
func runTLSCase(fe *mirrorProc, ca *probetest.CA, c tlsCase, redirect bool) (sample, error) {
	t := tlsTarget{client: tlsClient(c, ca), url: "http://" + fe.http + "/file", c: c, redirect: redirect}
	defer t.client.CloseIdleConnections()
	n := *flagTLSRequests
	if c.newConn {
		n = *flagTLSConns
	}
	if c.https {
		t.url = "https://" + fe.https + "/file"
	}
	// A bound on the case's time besides its count of requests.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := fetchAll(ctx, t, 2**flagTLSConcurrency); err != nil {
		return sample{}, err
	}
	cpu0, err := procCPU(fe.pid)
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	if err := fetchAll(ctx, t, n); err != nil {
		return sample{}, err
	}
	elapsed := time.Since(start)
	cpu1, err := procCPU(fe.pid)
	if err != nil {
		return sample{}, err
	}
	return sample{rps: float64(n) / elapsed.Seconds(), cpu: (cpu1 - cpu0).Seconds() / float64(n)}, nil
}

// fetchAll sends n requests to t at -tls-concurrency and returns the
// first failure: an error, another status than 200 with the whole file
// (or, in redirect mode, 302 to a back end), or a connection other than
// t's case asks for (plain or TLS, HTTP/1.1 or HTTP/2, a resumed TLS
// session).
func fetchAll(ctx context.Context, t tlsTarget, n int) error {
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			first = err
		}
	}
	var wg sync.WaitGroup
	for range *flagTLSConcurrency {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := fetchOne(ctx, t); err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// fetchOne sends one request and checks its answer (see fetchAll).
func fetchOne(ctx context.Context, t tlsTarget) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url, nil)
	if err != nil {
		return err
	}
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	size, err := io.Copy(io.Discard, resp.Body)
	c, url := t.c, t.url
	switch {
	case err != nil:
		return err
	case t.redirect && (resp.StatusCode != http.StatusFound || !strings.HasPrefix(resp.Header.Get("Location"), "http://127.0.0.1:")):
		return fmt.Errorf("%s: %s to %q; want 302 to a back end", url, resp.Status, resp.Header.Get("Location"))
	case !t.redirect && (resp.StatusCode != http.StatusOK || size != tlsFileSize):
		return fmt.Errorf("%s: %s, %d bytes; want 200 OK, %d", url, resp.Status, size, tlsFileSize)
	case c.https != (resp.TLS != nil), c.h2 != (resp.ProtoMajor == 2):
		return fmt.Errorf("%s: %s, TLS %v; want TLS %v, HTTP/2 %v", url, resp.Proto, resp.TLS != nil, c.https, c.h2)
	case resp.TLS != nil && resp.TLS.DidResume:
		return errors.New(url + ": a resumed TLS session; want full handshakes")
	}
	return nil
}

// procCPU returns the user and system CPU time of process pid so far.
func procCPU(pid int) (time.Duration, error) {
	text, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := statCPUTicks(string(text))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// statCPUTicks returns utime + stime (fields 14 and 15) of a
// /proc/PID/stat line, in USER_HZ ticks. The command name (field 2)
// is in parentheses and may hold spaces and parentheses itself, so the
// fields are counted from the last ")".
func statCPUTicks(line string) (int64, error) {
	end := strings.LastIndexByte(line, ')')
	if end < 0 {
		return 0, errors.New("no command name in parentheses")
	}
	fields := strings.Fields(line[end+1:]) // fields[0] is field 3
	if len(fields) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(fields))
	}
	var sum int64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("utime or stime: %w", err)
		}
		sum += v
	}
	return sum, nil
}

// tlsRow is one case's line of the TLS table: medians over the rounds
// and their range.
type tlsRow struct {
	name       string
	rps, cpu   spread // requests/s, front-end CPU seconds per request
	rpsX, cpuX spread // ratios to the baseline case of the same round
	baseline   bool   // the first row, that of the baseline case
}

// tlsRows reduces the rounds (rounds[r][i]: case i in round r) to one
// row per case, the ratios taken within each round against case 0.
func tlsRows(rounds [][]sample) []tlsRow {
	rows := make([]tlsRow, len(tlsCases))
	for i, c := range tlsCases {
		var rps, cpu, rpsX, cpuX []float64
		for _, round := range rounds {
			s, base := round[i], round[0]
			rps, cpu = append(rps, s.rps), append(cpu, s.cpu)
			rpsX = append(rpsX, s.rps/base.rps)
			cpuX = append(cpuX, s.cpu/base.cpu)
		}
		rows[i] = tlsRow{name: c.name, rps: spreadOf(rps), cpu: spreadOf(cpu), rpsX: spreadOf(rpsX), cpuX: spreadOf(cpuX),
			baseline: i == 0}
	}
	return rows
}

// tlsTable formats the rows: requests/s and the front end's CPU per
// request with their range, and both as ratios to the first row.
func tlsTable(rows []tlsRow, rounds int) string {
	var s strings.Builder
	fmt.Fprintf(&s, "medians of %d rounds (min–max); ratios to the first row, taken within each round\n", rounds)
	fmt.Fprintf(&s, "%-42s  %-20s  %-18s  %-20s  %s\n", "case", "req/s (min–max)", "req/s ratio", "front-end CPU µs/req", "CPU ratio")
	for _, r := range rows {
		rps := fmt.Sprintf("%.0f (%.0f–%.0f)", r.rps.med, r.rps.lo, r.rps.hi)
		cpu := fmt.Sprintf("%.0f (%.0f–%.0f)", 1e6*r.cpu.med, 1e6*r.cpu.lo, 1e6*r.cpu.hi)
		rpsX, cpuX := "1×", "1×"
		if !r.baseline {
			rpsX = fmt.Sprintf("%.2f× (%.2f–%.2f)", r.rpsX.med, r.rpsX.lo, r.rpsX.hi)
			cpuX = fmt.Sprintf("%.2f× (%.2f–%.2f)", r.cpuX.med, r.cpuX.lo, r.cpuX.hi)
		}
		fmt.Fprintf(&s, "%-42s  %-20s  %-18s  %-20s  %s\n", r.name, rps, rpsX, cpu, cpuX)
	}
	return s.String()
}

// handshakeLine estimates the front end's CPU per TLS handshake: per
// round, its CPU per request on a new TLS connection less that on a
// new plain connection, the median over the rounds; "" without both
// cases.
func handshakeLine(rounds [][]sample) string {
	plain, secure := -1, -1
	for i, c := range tlsCases {
		switch {
		case c.newConn && !c.https:
			plain = i
		case c.newConn && c.https:
			secure = i
		}
	}
	if plain < 0 || secure < 0 || len(rounds) == 0 {
		return ""
	}
	var d []float64
	for _, round := range rounds {
		d = append(d, round[secure].cpu-round[plain].cpu)
	}
	s := spreadOf(d)
	return fmt.Sprintf("front-end CPU per TLS handshake (new TLS connection less new plain connection): %.0f µs (%.0f–%.0f)\n",
		1e6*s.med, 1e6*s.lo, 1e6*s.hi)
}
