package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"golang.org/x/sync/errgroup"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/scheduler"
)

const (
	testGroup  = "www.example.test"
	testSecret = "group-secret"
)

// fakeDNSD is dnsd's admin API as a mirror sees it: api.GetGroup answers
// a view of the members with the load of their last pushed report, and
// api.PushLoad takes signed reports.
type fakeDNSD struct {
	t      *testing.T
	url    string
	secret []byte

	mu        sync.Mutex
	members   []api.MemberInfo
	reports   map[string][]probe.Report // accepted, by member
	redirects []api.RedirectReport      // dispatchers' reports, accepted
	refused   int                       // pushes with a bad signature
}

func newFakeDNSD(t *testing.T, members ...string) *fakeDNSD {
	d := &fakeDNSD{t: t, secret: []byte(testSecret), reports: make(map[string][]probe.Report)}
	for _, m := range members {
		d.members = append(d.members, api.MemberInfo{Name: m, Host: m + ".mirrors.test", Capacity: 1})
	}
	mux := http.NewServeMux()
	mux.HandleFunc(api.GetGroup.Pattern(), d.view)
	mux.HandleFunc(api.PushLoad.Pattern(), d.push)
	mux.HandleFunc(api.PushRedirects.Pattern(), d.pushRedirects)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	d.url = srv.URL
	return d
}

func (d *fakeDNSD) view(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("group") != testGroup {
		http.NotFound(w, r)
		return
	}
	d.mu.Lock()
	v := api.GroupView{Name: testGroup + ".", Policy: "least-load", Watermarks: api.Watermarks{Low: 0.7, High: 0.9}, Time: time.Now()}
	for _, m := range d.members {
		mv := api.MemberView{MemberInfo: m, State: "unknown"}
		if rs := d.reports[m.Name]; len(rs) > 0 {
			last := rs[len(rs)-1]
			mv.State, mv.Load, mv.Reported, mv.Capacity = "up", last.Load, last.Time, last.Capacity
			mv.BytesPerSecond, mv.Bandwidth = last.BytesPerSecond, last.Bandwidth
			mv.Utilization = group.ReportUtilization(last)
			mv.LastReport = &last
		}
		v.Members = append(v.Members, mv)
	}
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if err := jsonEncode(w, v); err != nil {
		d.t.Error(err)
	}
}

func (d *fakeDNSD) push(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, probe.MaxReportSize))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := api.VerifyRequest(r, body, d.secret, time.Now(), 0); err != nil {
		d.mu.Lock()
		d.refused++
		d.mu.Unlock()
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	rep, err := probe.DecodeReport(bytes.NewReader(body), 0)
	if err != nil || rep.Group != r.PathValue("group") || rep.Member != r.PathValue("member") {
		http.Error(w, fmt.Sprintf("bad report: %v", err), http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	d.reports[rep.Member] = append(d.reports[rep.Member], rep)
	d.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

func (d *fakeDNSD) pushRedirects(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := api.VerifyRequest(r, body, d.secret, time.Now(), 0); err != nil {
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var rep api.RedirectReport
	if err := json.Unmarshal(body, &rep); err != nil || rep.Validate() != nil || r.PathValue("group") != testGroup {
		http.Error(w, fmt.Sprintf("bad redirect report: %v", err), http.StatusBadRequest)
		return
	}
	d.mu.Lock()
	d.redirects = append(d.redirects, rep)
	d.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// lastRedirects returns the dispatchers' last redirect report (zero: none).
func (d *fakeDNSD) lastRedirects() api.RedirectReport {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.redirects) == 0 {
		return api.RedirectReport{}
	}
	return d.redirects[len(d.redirects)-1]
}

func (d *fakeDNSD) pushes(member string) []probe.Report {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]probe.Report(nil), d.reports[member]...)
}

// testMirror is one mirror daemon in-process, on 127.0.0.1:0.
type testMirror struct {
	*wired
	name  string
	addr  string // public listener
	admin string // admin listener
	reg   *prometheus.Registry
}

// bigFile is the file every mirror serves.
var bigFile = strings.Repeat("transmirror ", 2000)

// startMirror builds a mirror from yaml extra (appended to a common head)
// and serves it until the test ends.
func startMirror(t *testing.T, d *fakeDNSD, name string, extra string, o deps) *testMirror {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{"big.bin": bigFile, "index.html": "<title>index</title>"} {
		if err := os.WriteFile(filepath.Join(root, file), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	yaml := fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: %s
member: %s
host: %s.mirrors.test
dnsd: {url: %q, secret: %q, push_interval: 50ms, view_interval: 50ms}
`, testGroup, name, name, d.url, testSecret) + extra
	if !strings.Contains(extra, "dispatcher: true") {
		yaml += "root: root\n"
	}
	cfg, err := mirror.ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	o.reg = prometheus.NewRegistry()
	if o.runQueue == nil {
		o.runQueue = func() (float64, error) { return 0, nil }
	}
	m, err := build(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 3)
	go func() { errc <- runLoops(ctx, m) }()
	go func() { errc <- m.public.Serve(ctx, ln) }()
	admin, err := serve.NewServer(serve.ServerOptions{Handler: m.admin})
	if err != nil {
		t.Fatal(err)
	}
	go func() { errc <- admin.Serve(ctx, aln) }()
	t.Cleanup(func() {
		cancel()
		for range 3 {
			if err := <-errc; err != nil {
				t.Errorf("mirror %s: %v", name, err)
			}
		}
		m.release()
	})
	return &testMirror{wired: m, name: name, addr: ln.Addr().String(), admin: aln.Addr().String(), reg: o.reg}
}

// runLoops runs m's loops (the group view, the push) until ctx is done.
func runLoops(ctx context.Context, m *wired) error {
	g, ctx := errgroup.WithContext(ctx)
	for _, loop := range m.loops {
		g.Go(func() error { return loop(ctx) })
	}
	return g.Wait()
}

// net maps host names to the mirrors' listeners: a client that resolves
// the group name to one mirror and each member host name to its mirror.
type testNet map[string]string

func (n testNet) client(maxHops int) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, _, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				to, ok := n[host]
				if !ok {
					return nil, fmt.Errorf("test net: no route to %s", host)
				}
				var d net.Dialer
				return d.DialContext(ctx, network, to)
			},
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			switch {
			case maxHops == 0:
				return http.ErrUseLastResponse
			case len(via) > maxHops:
				return fmt.Errorf("redirect hop %d to %s: a loop", len(via), req.URL)
			}
			return nil
		},
	}
}

func get(t *testing.T, c *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestRedirectCorrection runs three mirrors against a fake dnsd. Mirror a
// has a capacity of 5 load units, so a few requests put it over its high
// watermark; b and c have room.
func TestRedirectCorrection(t *testing.T) {
	d := newFakeDNSD(t, "a", "b", "c")
	const window = 200 * time.Millisecond
	small := "capacity: 5\nredirect: {max_share: 1, min_size: 1KiB}\n"
	roomy := "capacity: 1000000\n"
	ms := map[string]*testMirror{
		"a": startMirror(t, d, "a", small, deps{reportWindow: window, rand: rand.New(rand.NewPCG(1, 1))}),
		"b": startMirror(t, d, "b", roomy, deps{reportWindow: window}),
		"c": startMirror(t, d, "c", roomy, deps{reportWindow: window}),
	}
	_, port, _ := net.SplitHostPort(ms["a"].addr)
	tn := testNet{testGroup: ms["a"].addr} // DNS sent this client population to a
	for name, m := range ms {
		tn[name+".mirrors.test"] = m.addr
	}
	for name, m := range ms {
		// A view where every member has reported (its capacity with it).
		probetest.Until(t, 5*time.Second, func() string {
			s := m.view.Snapshot()
			if s == nil {
				return "group view at " + name + ": none yet"
			}
			if n := s.Candidates(); n != 2 {
				return fmt.Sprintf("group view at %s: %d candidates, want 2", name, n)
			}
			for _, mv := range s.View.Members {
				if mv.State != "up" {
					return fmt.Sprintf("group view at %s: %s is %s", name, mv.Name, mv.State)
				}
			}
			return ""
		})
	}
	groupURL := "http://" + net.JoinHostPort(testGroup, port) + "/big.bin?v=1"
	noFollow := tn.client(0)

	t.Run("overloaded: requests on the group name are redirected to a sibling", func(t *testing.T) {
		var loc string
		probetest.Until(t, 5*time.Second, func() string {
			resp, _ := get(t, noFollow, groupURL)
			loc = resp.Header.Get("Location")
			if resp.StatusCode != http.StatusFound {
				return "a 302 from a: " + resp.Status
			}
			return ""
		})
		if loc != "http://b.mirrors.test:"+port+"/big.bin?v=1" && loc != "http://c.mirrors.test:"+port+"/big.bin?v=1" {
			t.Errorf("Location %q, want b or c on port %s with the same path and query", loc, port)
		}
		resp, body := get(t, noFollow, groupURL)
		if resp.StatusCode == http.StatusFound {
			if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control %q", cc)
			}
			if len(body) > 64 {
				t.Errorf("302 body of %d bytes", len(body))
			}
		}
	})
	t.Run("own host name is never redirected", func(t *testing.T) {
		for range 50 {
			resp, body := get(t, noFollow, "http://a.mirrors.test:"+port+"/big.bin")
			if resp.StatusCode != http.StatusOK || body != bigFile {
				t.Fatalf("own host: %s", resp.Status)
			}
		}
	})
	t.Run("never path and small files are served", func(t *testing.T) {
		for _, path := range []string{"/", "/index.html"} {
			for range 10 {
				if resp, _ := get(t, noFollow, "http://"+net.JoinHostPort(testGroup, port)+path); resp.StatusCode != http.StatusOK {
					t.Fatalf("%s: %s", path, resp.Status)
				}
			}
		}
	})
	t.Run("a following client always gets the file in at most one hop", func(t *testing.T) {
		follow := tn.client(1)
		redirected := 0
		for range 100 {
			resp, body := get(t, follow, groupURL)
			if resp.StatusCode != http.StatusOK || body != bigFile {
				t.Fatalf("%s, %d bytes", resp.Status, len(body))
			}
			switch h := resp.Request.URL.Hostname(); h {
			case testGroup:
			case "b.mirrors.test", "c.mirrors.test":
				redirected++
			default:
				t.Fatalf("served by %s: a redirect to itself or elsewhere", h)
			}
		}
		if redirected == 0 {
			t.Error("no request was redirected")
		}
		t.Logf("%d of 100 requests redirected", redirected)
	})
	t.Run("redirects are counted", func(t *testing.T) {
		if n := webtest.CounterValue(t, ms["a"].reg, "transmirror_mirror_redirects_total", "reason", group.ReasonOverload); n == 0 {
			t.Error("transmirror_mirror_redirects_total{reason=overload} is 0")
		}
		probetest.Until(t, 5*time.Second, func() string {
			rs := d.pushes("a")
			for _, r := range rs {
				if r.RedirectsPerSecond > 0 {
					return ""
				}
			}
			return fmt.Sprintf("a report with redirects: none in %d reports", len(rs))
		})
	})
	t.Run("when the load falls, redirects stop", func(t *testing.T) {
		// No traffic now: within a few time constants what comes in to a
		// is within its target, so it redirects nothing. (Polling with
		// requests would be load of its own: a's capacity is half a
		// request per second.)
		probetest.Until(t, 10*time.Second, func() string {
			if sh := ms["a"].Status(time.Now()).Redirect.Share; sh != 0 {
				return fmt.Sprintf("a's redirected share at 0: %g", sh)
			}
			return ""
		})
		if resp, _ := get(t, noFollow, groupURL); resp.StatusCode != http.StatusOK {
			t.Errorf("GET on the group name after the load fell: %s, want 200", resp.Status)
		}
	})
	t.Run("promlint", func(t *testing.T) {
		for name, m := range ms {
			mfs, err := m.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("%s: %s: %s", name, p.Metric, p.Text)
			}
			if len(mfs) < 8 {
				t.Errorf("%s: only %d metric families", name, len(mfs))
			}
		}
	})
	t.Run("admin server", func(t *testing.T) {
		c := &http.Client{Timeout: 5 * time.Second}
		for _, tc := range []struct {
			path, want string
		}{
			{api.LoadReport.Path(), `"member":"a"`},
			{"/metrics", "transmirror_mirror_redirects_total"},
			{"/-/healthy", "OK"},
		} {
			resp, body := get(t, c, "http://"+ms["a"].admin+tc.path)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, tc.want) {
				t.Errorf("%s: %s, body lacks %q", tc.path, resp.Status, tc.want)
			}
		}
	})
}

// TestRedirectCorrectionBandwidth runs three mirrors with room in load
// units against a fake dnsd: a and b have an uplink of 8kbit/s (1 kB/s),
// so one 24 kB file a second fills it; c has no bandwidth limit. With b's
// uplink kept full by clients of its own host name, a, over its bandwidth
// with few requests, redirects requests on the group name, and only to c.
func TestRedirectCorrectionBandwidth(t *testing.T) {
	d := newFakeDNSD(t, "a", "b", "c")
	const window = 200 * time.Millisecond
	narrow := "capacity: 1000000\nbandwidth: 8kbit/s\nredirect: {max_share: 1, min_size: 1KiB}\n"
	ms := map[string]*testMirror{
		"a": startMirror(t, d, "a", narrow, deps{reportWindow: window, rand: rand.New(rand.NewPCG(1, 1))}),
		"b": startMirror(t, d, "b", narrow, deps{reportWindow: window}),
		"c": startMirror(t, d, "c", "capacity: 1000000\n", deps{reportWindow: window}),
	}
	_, port, _ := net.SplitHostPort(ms["a"].addr)
	tn := testNet{testGroup: ms["a"].addr}
	for name, m := range ms {
		tn[name+".mirrors.test"] = m.addr
	}
	noFollow := tn.client(0)

	// b's own clients keep its uplink full until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	busy := make(chan struct{})
	go func() {
		defer close(busy)
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://b.mirrors.test:"+port+"/big.bin", nil)
			if resp, err := noFollow.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-busy })

	probetest.Until(t, 5*time.Second, func() string {
		s := ms["a"].view.Snapshot()
		if s == nil {
			return "a's view: b over its bandwidth, c with room: no view yet"
		}
		if n := s.Candidates(); n != 2 {
			return fmt.Sprintf("a's view: b over its bandwidth, c with room: %d candidates, want 2", n)
		}
		over := map[string]bool{}
		for _, v := range s.View.Members {
			f := scheduler.Figures{Load: v.Load, Pending: v.Pending, Capacity: v.Capacity, BytesPerSecond: v.BytesPerSecond, Bandwidth: v.Bandwidth}
			over[strings.TrimSuffix(v.Host, ".")] = f.Utilization() >= s.View.Watermarks.High
		}
		if !over["b.mirrors.test"] || over["c.mirrors.test"] {
			return fmt.Sprintf("a's view: b over its bandwidth, c with room: over the high watermark %v", over)
		}
		return ""
	})
	groupURL := "http://" + net.JoinHostPort(testGroup, port) + "/big.bin"
	t.Run("a over its bandwidth redirects, to c only", func(t *testing.T) {
		probetest.Until(t, 5*time.Second, func() string {
			if resp, _ := get(t, noFollow, groupURL); resp.StatusCode != http.StatusFound {
				return "a 302 from a: " + resp.Status
			}
			return ""
		})
		for range 20 {
			resp, _ := get(t, noFollow, groupURL)
			if resp.StatusCode != http.StatusFound {
				continue // a's uplink had room again for a moment
			}
			if loc := resp.Header.Get("Location"); loc != "http://c.mirrors.test:"+port+"/big.bin" {
				t.Fatalf("Location %q: want c, never b, whose uplink is full", loc)
			}
		}
	})
	t.Run("the load fraction is low: the bandwidth did it", func(t *testing.T) {
		var st mirror.Status
		probetest.Until(t, 5*time.Second, func() string {
			get(t, noFollow, groupURL)
			st = ms["a"].Status(time.Now())
			if u := st.Load.Utilization; u < 0.9 {
				return fmt.Sprintf("a over its bandwidth right after a request: utilization %g, want 0.9", u)
			}
			return ""
		})
		if st.Load.Bandwidth != 1000 || st.Load.Load/st.Load.Capacity > 0.01 {
			t.Errorf("a's load %+v: want bandwidth 1000 B/s and a load of less than 1%% of the capacity", st.Load)
		}
	})
	t.Run("the pushed report carries the bandwidth", func(t *testing.T) {
		probetest.Until(t, 5*time.Second, func() string {
			rs := d.pushes("a")
			if len(rs) == 0 {
				return "a report of a with its bandwidth: no report"
			}
			if bw := rs[len(rs)-1].Bandwidth; bw != 1000 {
				return fmt.Sprintf("a report of a with its bandwidth: bandwidth %g, want 1000", bw)
			}
			return ""
		})
	})
}

func jsonEncode(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

func TestPush(t *testing.T) {
	d := newFakeDNSD(t, "a", "b")
	good := startMirror(t, d, "a", "", deps{})
	t.Run("signed reports arrive at the interval", func(t *testing.T) {
		start := time.Now()
		probetest.Until(t, 5*time.Second, func() string {
			if n := len(d.pushes("a")); n < 5 {
				return fmt.Sprintf("5 pushes: %d", n)
			}
			return ""
		})
		rs := d.pushes("a")
		if el := time.Since(start); el < 150*time.Millisecond {
			t.Errorf("5 pushes in %v, faster than a 50ms interval", el)
		}
		for i, r := range rs {
			if r.Member != "a" || r.Group != testGroup || r.Capacity != mirror.DefaultCapacity {
				t.Errorf("report %d: %+v", i, r)
			}
			if i > 0 && r.Seq <= rs[i-1].Seq {
				t.Errorf("report %d: seq %d after %d", i, r.Seq, rs[i-1].Seq)
			}
		}
		probetest.Until(t, 5*time.Second, func() string {
			if n := webtest.CounterValue(t, good.reg, "transmirror_mirror_pushes_total", "result", "ok"); n < 5 {
				return fmt.Sprintf("pushes counted: %g, want 5", n)
			}
			return ""
		})
	})
	t.Run("a wrong secret is refused and counted", func(t *testing.T) {
		bad := newFakeDNSD(t, "b")
		bad.secret = []byte("another secret")
		m := startMirror(t, bad, "b", "", deps{})
		probetest.Until(t, 5*time.Second, func() string {
			if n := webtest.CounterValue(t, m.reg, "transmirror_mirror_pushes_total", "result", "unauthorized"); n < 2 {
				return fmt.Sprintf("unauthorized pushes: %g, want 2", n)
			}
			return ""
		})
		if n := len(bad.pushes("b")); n != 0 {
			t.Errorf("%d reports accepted with a wrong secret", n)
		}
	})
	t.Run("dnsd down: network failures, logged once", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + ln.Addr().String()
		ln.Close() // nothing listens there now
		var logs webtest.SyncBuffer
		reg := prometheus.NewRegistry()
		p, err := group.NewPusher(group.PusherOptions{
			URLs: []string{url}, Group: testGroup, Member: "a", Secret: []byte("s"),
			Snapshot:   func(now time.Time) probe.Report { return probe.Report{Group: testGroup, Member: "a", Time: now} },
			Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
			Registerer: reg,
		})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := p.Push(context.Background()); err == nil {
				t.Fatal("push to a closed port succeeded")
			}
		}
		if n := webtest.CounterValue(t, reg, "transmirror_mirror_pushes_total", "result", "network"); n != 3 {
			t.Errorf("network failures counted %g, want 3", n)
		}
		if n := strings.Count(logs.String(), "load push failing"); n != 1 {
			t.Errorf("logged %d times, want once:\n%s", n, logs.String())
		}
	})
}

// TestDispatcher runs a mirror with dispatcher: true against a fake dnsd
// whose members a and b have room.
func TestDispatcher(t *testing.T) {
	d := newFakeDNSD(t, "a", "b")
	m := startMirror(t, d, "d", "dispatcher: true\n", deps{})
	probetest.Until(t, 5*time.Second, func() string {
		s := m.view.Snapshot()
		if s == nil {
			return "group view: none yet"
		}
		if n := s.Candidates(); n != 2 {
			return fmt.Sprintf("group view: %d candidates, want 2", n)
		}
		return ""
	})
	_, port, _ := net.SplitHostPort(m.addr)
	c := testNet{testGroup: m.addr, "d.mirrors.test": m.addr, "other.test": m.addr}.client(0)
	tests := []struct {
		name, method, host string
		code               int
	}{
		{"group name: redirected", http.MethodGet, testGroup, http.StatusFound},
		{"group name, HEAD: redirected", http.MethodHead, testGroup, http.StatusFound},
		{"group name, POST: 405", http.MethodPost, testGroup, http.StatusMethodNotAllowed},
		{"own host: 404", http.MethodGet, "d.mirrors.test", http.StatusNotFound},
		{"other host: 421", http.MethodGet, "other.test", http.StatusMisdirectedRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(map[string]bool)
			for range 20 {
				req, err := http.NewRequest(tt.method, "http://"+net.JoinHostPort(tt.host, port)+"/", nil)
				if err != nil {
					t.Fatal(err)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tt.code {
					t.Fatalf("%s, want %d", resp.Status, tt.code)
				}
				if tt.code == http.StatusFound {
					seen[resp.Header.Get("Location")] = true
				}
			}
			if tt.code != http.StatusFound {
				return
			}
			for loc := range seen {
				if loc != "http://a.mirrors.test:"+port+"/" && loc != "http://b.mirrors.test:"+port+"/" {
					t.Errorf("Location %q", loc)
				}
			}
			if len(seen) != 2 {
				t.Errorf("redirected to %d members, want both", len(seen))
			}
		})
	}
	if n := len(d.pushes("d")); n != 0 {
		t.Errorf("a dispatcher pushed %d load reports", n)
	}
	// What it sent where is in its metrics: 20 GET and 20 HEAD redirected.
	a := webtest.CounterValue(t, m.reg, "transmirror_mirror_sibling_redirects_total", "member", "a")
	b := webtest.CounterValue(t, m.reg, "transmirror_mirror_sibling_redirects_total", "member", "b")
	if a+b != 40 || a == 0 || b == 0 {
		t.Errorf("transmirror_mirror_sibling_redirects_total: a %g, b %g; want 40 in all, to both", a, b)
	}
	// And it reports the rates of what it sends to dnsd, signed, as itself.
	probetest.Until(t, 10*time.Second, func() string {
		if r := d.lastRedirects(); r.Dispatcher != "d.mirrors.test" || r.Members["a"] <= 0 || r.Members["b"] <= 0 {
			return fmt.Sprintf("a redirect report with rates to a and b: %+v", r)
		}
		return ""
	})
}

// TestDispatcherPushesEveryDNSD: a dispatcher's redirect reports go to
// every dnsd even with push: one, since the nodes of an NS set do not
// share them.
func TestDispatcherPushesEveryDNSD(t *testing.T) {
	d1, d2 := newFakeDNSD(t, "a", "b"), newFakeDNSD(t, "a", "b")
	yaml := fmt.Sprintf(`listen: ["127.0.0.1:0"]
group: %s
member: d
host: d.mirrors.test
dispatcher: true
dnsd: {urls: [%q, %q], push: one, secret: %q, push_interval: 50ms, view_interval: 50ms}
`, testGroup, d1.url, d2.url, testSecret)
	cfg, err := mirror.ParseConfig(filepath.Join(t.TempDir(), "mirror.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	m, err := build(cfg, deps{reg: prometheus.NewRegistry(), runQueue: func() (float64, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runLoops(ctx, m) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		m.release()
	})
	probetest.Until(t, 5*time.Second, func() string {
		if r1, r2 := d1.lastRedirects().Dispatcher, d2.lastRedirects().Dispatcher; r1 != "d.mirrors.test" || r2 != "d.mirrors.test" {
			return fmt.Sprintf("redirect reports on both dnsd: dispatchers %q and %q", r1, r2)
		}
		return ""
	})

}
