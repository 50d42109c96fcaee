package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/probe/probetest"
)

// The 302-correction scenario of the issue, end to end: one real dnsd
// serves the group www.example.test with three static members whose own
// host names are in its zone, and three real mirror processes (a, b, c),
// each on its own loopback address and one shared port, push their load
// every 200 ms and refresh the group view every 500 ms. The test process drives mirror
// a over its high watermark with real HTTP requests on the group name
// while b and c stay idle, checks what a answers on the group name and on
// its own host name, runs a client that follows redirects the way a
// browser does, then stops the load and waits for the redirects to stop.
//
// Sizing. A mirror's load is 10·(r + m): r its request rate over the
// Reporter's sliding window (probe.DefaultReportWindow, 10 s), and m 0:
// the mirrors take no run queue (run_queue: none), so the host's load
// average, which other processes move, can not move their operating
// points, and the load is what the test sent. The redirect decision uses
// the serving utilization 10·(r − redirects)/capacity. With a capacity
// of 300 load units (30 requests/s) and 66 requests/s at a, a serves 36/s
// once it redirects its max_share of 50% of the group-name requests:
// u ≥ 360/300 = 1.2 > high (0.9), so the share settles at max_share. After
// the load, the 4 requests/s that check for redirects give u = 40/300,
// far below the low watermark of 0.7. Siblings b and c carry only the few
// redirected requests that the following client sends them, far below
// the policy's high watermark, so they have room throughout.
//
// What is judged is relative to what the test observed, not to how fast
// it could send: the share a redirects in the measured window against the
// share its own utilization (from its load reports in that window) calls
// for, with a window that lasts until it holds enough requests for that
// share to be precise; the end of the redirects against when a's
// utilization fell, by when each request was sent.
const (
	corrGroup    = "www.example.test"
	corrSecret   = "e2e-correction-secret"
	corrCapacity = 300.0 // load units: 30 requests/s at m = 0
	corrLow      = 0.7   // the group's policy.low_watermark (dnsd's default), which the mirrors take from the view
	// corrLowMargin is how far below corrLow a's utilization must be
	// before the test expects no more redirects: the Reporter's rate
	// steps as its 1 s buckets turn over.
	corrLowMargin = 0.05
	corrHigh      = 0.9 // the group's policy.high_watermark (dnsd's default)
	corrMaxShare  = 0.5 // redirect.max_share
	// corrLaw is redirect.law, set in the mirrors' config: the watermark
	// law, which corrShare writes out; the test must not follow the
	// default law, whatever that is, while it checks this one's formula.
	corrLaw = "watermark"

	corrGroupRate  = 60.0 // requests/s on the group name at a while loaded
	corrOwnRate    = 6.0  // requests/s on a's own host name while loaded
	corrFollowTick = 200 * time.Millisecond
	corrPollTick   = 250 * time.Millisecond // group-name checks at a after the load
	corrWorkers    = 16
	corrMaxLag     = 500 * time.Millisecond

	// corrReportWindow is the mirrors' report window (load_window, the
	// default): from corrReportWindow after the load began, a's rates
	// cover only loaded seconds and its utilization is steady.
	corrReportWindow = 10 * time.Second
	// corrHold is the least length of the measured part of the loaded
	// phase, which starts once a's utilization is steady, and
	// corrMinLoaded the least number of group-name requests answered in
	// it: the window lasts until both hold, so that the share it measures
	// has a standard error of at most 0.035 however fast the test sent.
	corrHold      = 5 * time.Second
	corrMinLoaded = 200
	// corrMinOwn is the least number of requests on a's own host name
	// during the load for the "never redirected" check to say something.
	corrMinOwn = 10
	// corrMeterRefresh is how long a mirror's LoadMeter caches its
	// utilization (a tenth of the report window): a decision may use a
	// figure this old.
	corrMeterRefresh = corrReportWindow / 10
	// corrStopWithin bounds the time from the end of the load until the
	// redirects stop: the 10 s report window has to slide past the loaded
	// seconds, plus the LoadMeter's cache.
	corrStopWithin = 20 * time.Second
	// corrSettle is how long a must keep serving every group-name request
	// once its utilization is below the low watermark.
	corrSettle = 3 * time.Second

	corrPath     = "/pool/file.bin"
	corrQuery    = "rev=7&name=a%2Fb"
	corrURI      = corrPath + "?" + corrQuery
	corrFileSize = 4096
)

// Kinds of the requests the test records.
const (
	corrIdle   = "idle"   // group name to a before the load
	corrLoad   = "group"  // group name to a, the load
	corrOwn    = "own"    // a's own host name, during the load
	corrFollow = "follow" // the client that follows redirects
	corrPoll   = "poll"   // group name to a after the load
)

// errCorrSecondRedirect is what the following client returns when a
// redirect is redirected again.
var errCorrSecondRedirect = errors.New("redirected a second time")

// TestCorrection is the "done when": a mirror driven over its
// watermark by real requests answers requests on the group name with 302
// to a sibling with room, never those on its own host name; a client that
// follows redirects always gets the file in at most one hop; when the load
// falls the redirects stop.
func TestCorrection(t *testing.T) {
	began := time.Now()
	cl := startCorrCluster(t)
	a, b, c := cl.mirrors[0], cl.mirrors[1], cl.mirrors[2]

	for _, m := range cl.mirrors {
		if got := cl.report(t, m).M; got != 0 {
			t.Fatalf("mirror %s reports m = %g, want 0 (run_queue: none)", m.name, got)
		}
	}
	policyHigh := cl.view(t).Watermarks.High

	rec := newCorrRecorder()
	hc := &http.Client{
		Transport: &http.Transport{
			Proxy:               nil, // loopback only, whatever the environment says
			MaxIdleConnsPerHost: corrWorkers,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       5 * time.Second,
	}
	fc := cl.followingClient()
	t.Cleanup(func() {
		hc.CloseIdleConnections()
		fc.CloseIdleConnections()
	})

	// Idle: a serves the group name.
	for range 4 {
		if code := cl.hit(hc, rec, corrIdle, corrGroup); code != http.StatusOK {
			t.Fatalf("idle a answered the group name %d, want 200; %s", code, rec.firstFailures())
		}
	}

	samplerCtx, stopSampler := context.WithCancel(context.Background())
	samples := cl.sample(samplerCtx, rec.start)
	defer stopSampler()

	// Load: the group name and a's own host name at a, and the client that
	// follows redirects.
	loadCtx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	loadAt := rec.since()
	gen := cl.drive(loadCtx, hc, rec)
	followDone := cl.follow(loadCtx, fc, rec)

	var firstRedirect time.Duration
	probetest.Until(t, 30*time.Second, func() string {
		if at, ok := rec.first(corrLoad, http.StatusFound); ok {
			firstRedirect = at
			return ""
		}
		return fmt.Sprintf("a has redirected none of %d group-name requests (u %.2f; generator: %d issued, %d dropped, %d late; %s)",
			rec.count(corrLoad, 0, 0, time.Hour), cl.utilization(t, a), gen.issued.Load(), gen.dropped.Load(), gen.late.Load(), rec.firstFailures())
	})
	// The measured window: from when a's rates cover only loaded seconds
	// (and its LoadMeter's cache has turned over since), until it is
	// corrHold long and holds corrMinLoaded group-name requests.
	holdFrom := loadAt + corrReportWindow + corrMeterRefresh
	var holdTo time.Duration
	probetest.Until(t, time.Until(rec.start.Add(holdFrom+corrHold))+60*time.Second, func() string {
		now := rec.since()
		if n := rec.count(corrLoad, 0, holdFrom, now); now < holdFrom+corrHold || n < corrMinLoaded {
			return fmt.Sprintf("the window from %v holds %d group-name requests after %v, want %d and %v (generator: %d issued, %d dropped, %d late; %s)",
				holdFrom.Round(time.Millisecond), n, max(now-holdFrom, 0).Round(time.Millisecond), corrMinLoaded, corrHold,
				gen.issued.Load(), gen.dropped.Load(), gen.late.Load(), rec.firstFailures())
		}
		holdTo = now
		return ""
	})
	stopLoad()
	gen.wait()
	<-followDone
	stopAt := rec.since()

	// After the load: a few group-name requests a second, until a has been
	// below its low watermark for corrSettle.
	var belowAt time.Duration = -1
	var lastU float64
	tick := time.NewTicker(corrPollTick)
	for {
		cl.hit(hc, rec, corrPoll, corrGroup)
		lastU = cl.utilization(t, a)
		now := rec.since()
		if belowAt < 0 && lastU < corrLow-corrLowMargin {
			belowAt = now
		}
		if belowAt >= 0 && now-belowAt >= corrSettle {
			break
		}
		if now-stopAt > corrStopWithin+corrSettle {
			t.Fatalf("%v after the load a's serving utilization is still %.2f, not below its low watermark %g − %g", (now - stopAt).Round(time.Millisecond), lastU, corrLow, corrLowMargin)
		}
		<-tick.C
	}
	tick.Stop()
	stopSampler()
	sampled := <-samples
	cl.logTimeline(t, rec, sampled, loadAt, holdFrom, holdTo, stopAt, belowAt)

	// (1) Under load a redirects the group name, to b and c, the share its
	// utilization calls for (max_share over its high watermark, as it is
	// at the planned rate), within 0.1 and two standard errors.
	loaded := rec.count(corrLoad, 0, holdFrom, holdTo)
	moved := rec.count(corrLoad, http.StatusFound, holdFrom, holdTo)
	share := float64(moved) / float64(max(loaded, 1))
	want, uMin, uMax, overAt := corrExpectedShare(sampled, holdFrom-corrMeterRefresh, holdTo)
	tol := 0.1 + 2*math.Sqrt(want*(1-want)/float64(max(loaded, 1)))
	overText := "never"
	if overAt >= 0 {
		overText = (overAt - loadAt).Round(time.Millisecond).String() + " after it"
	}
	t.Logf("loaded: first 302 %v after the load began; a first reported a utilization over its high watermark %s; over the window of %v a served %.1f group-name requests/s (planned %.0f/s) at utilization %.2f..%.2f, which calls for a share of %.1f%% (max_share %.0f%%), and redirected %d of %d (%.1f%%): %d to b, %d to c",
		(firstRedirect - loadAt).Round(time.Millisecond), overText, (holdTo - holdFrom).Round(time.Millisecond),
		float64(loaded)/(holdTo-holdFrom).Seconds(), corrGroupRate, uMin, uMax, 100*want, 100*corrMaxShare, moved, loaded, 100*share,
		rec.countTo(corrLoad, b.name, holdFrom, holdTo), rec.countTo(corrLoad, c.name, holdFrom, holdTo))
	if want == 0 {
		t.Errorf("a's utilization %.2f..%.2f over the window calls for no redirect: the load did not take it over its low watermark %g", uMin, uMax, corrLow)
	}
	if math.Abs(share-want) > tol {
		t.Errorf("a redirected %.1f%% of the %d group-name requests in the window, want %.1f%% ± %.1f%%, the share its utilization %.2f..%.2f calls for",
			100*share, loaded, 100*want, 100*tol, uMin, uMax)
	}
	for _, s := range sampled {
		if s.at < loadAt || s.at > stopAt {
			continue
		}
		for _, m := range []*corrMirror{b, c} {
			if u, ok := s.view[m.name]; ok && u >= policyHigh {
				t.Errorf("at %v dnsd's view has %s at utilization %.2f, not below the policy's high watermark %g: it had no room", s.at.Round(time.Millisecond), m.name, u, policyHigh)
			}
		}
	}

	// (2) a's own host name is always served.
	own := rec.count(corrOwn, 0, loadAt, stopAt)
	own302 := rec.count(corrOwn, http.StatusFound, loadAt, stopAt)
	t.Logf("own host name during the load: %d requests, %d redirected", own, own302)
	if own < corrMinOwn {
		t.Errorf("only %d requests on a's own host name during the load of %v, want at least %d", own, stopAt-loadAt, corrMinOwn)
	}
	if own302 != 0 {
		t.Errorf("%d requests on a's own host name were redirected, want 0", own302)
	}

	// (3) The following client always got the file, in at most one hop.
	follows := rec.count(corrFollow, 0, 0, time.Hour)
	hopped := rec.hops(corrFollow)
	t.Logf("following client: %d requests, %d redirected once (%d served by b, %d by c), all with the file", follows, hopped,
		rec.countTo(corrFollow, b.name, 0, time.Hour), rec.countTo(corrFollow, c.name, 0, time.Hour))
	if hopped == 0 {
		t.Errorf("none of the following client's %d requests was redirected", follows)
	}

	// (4) The redirects stopped once a was below its low watermark.
	var stopTook time.Duration // from the end of the load to the last 302
	if last, ok := rec.last(corrPoll, http.StatusFound); ok {
		stopTook = last - stopAt
	}
	t.Logf("after the load: the last 302 came %v after it ended; a below its low watermark − %g after %v (u %.2f at the end); %d group-name requests, %d redirected, then %v without one",
		stopTook.Round(time.Millisecond), corrLowMargin, (belowAt - stopAt).Round(time.Millisecond), lastU, rec.count(corrPoll, 0, 0, time.Hour),
		rec.count(corrPoll, http.StatusFound, 0, time.Hour), (rec.since() - stopAt - stopTook).Round(time.Millisecond))
	// By when they were sent: a request sent over a meter refresh after
	// a's report showed it below is decided with a figure from after that
	// report, however long the answer took on a busy host.
	lateRedirects := 0
	rec.each(corrPoll, 0, time.Hour, func(x corrRec) {
		if x.code == http.StatusFound && x.sent > belowAt+corrMeterRefresh {
			lateRedirects++
		}
	})
	if lateRedirects > 0 {
		t.Errorf("%d group-name requests sent more than %v after a's utilization fell below its low watermark − %g were redirected", lateRedirects, corrMeterRefresh, corrLowMargin)
	}
	if stopTook > corrStopWithin {
		t.Errorf("the redirects stopped %v after the load, want within %v", stopTook, corrStopWithin)
	}

	// Every answer was checked as it came; the load was sustained.
	if n := rec.failed.Load(); n > 0 {
		t.Errorf("%d requests failed their checks: %s", n, rec.firstFailures())
	}
	t.Logf("generator: %d requests issued, %d dropped (all %d workers busy), %d started over %v late", gen.issued.Load(), gen.dropped.Load(), corrWorkers, gen.late.Load(), corrMaxLag)

	// The mirrors count what the clients saw: a's overload redirects are
	// the 302s the clients got, b and c redirected nothing (no request on
	// the group name reached them) and served exactly the redirected
	// requests of the following client.
	ma := scrape(t, a.admin)
	skipped := metricSum(ma, "transmirror_mirror_redirects_skipped_total")
	if got, want := int(metricSum(ma, "transmirror_mirror_redirects_total", `reason="overload"`)), rec.count("", http.StatusFound, 0, time.Hour)+hopped; got != want {
		t.Errorf("a's /metrics counts %d overload redirects, the clients got %d", got, want)
	}
	served := 0
	for _, m := range []*corrMirror{b, c} {
		text := scrape(t, m.admin)
		if n := metricSum(text, "transmirror_mirror_redirects_total"); n != 0 {
			t.Errorf("sibling %s redirected %g requests, want 0", m.name, n)
		}
		served += int(metricSum(text, "transmirror_mirror_requests_total", `code_class="2xx"`))
	}
	if served != hopped {
		t.Errorf("b and c served %d requests, the following client was redirected to them %d times", served, hopped)
	}
	t.Logf("a skipped %g redirects (no view, stale view or no sibling); wall time %v",
		skipped, time.Since(began).Round(100*time.Millisecond))
}

// corrShare is the mirror's redirect share at serving utilization u under
// corrLaw (mirror.RedirectShare with the scenario's watermarks and
// max_share).
func corrShare(u float64) float64 {
	switch {
	case u <= corrLow:
		return 0
	case u >= corrHigh:
		return corrMaxShare
	}
	return corrMaxShare * (u - corrLow) / (corrHigh - corrLow)
}

// corrExpectedShare is the share that a's utilization, as its load
// reports gave it in [from, to], calls for on average, with the lowest and
// the highest utilization there, and when a first reported one at or over
// its high watermark (-1: never).
func corrExpectedShare(samples []corrSample, from, to time.Duration) (share, uMin, uMax float64, overAt time.Duration) {
	overAt, uMin, uMax = -1, math.Inf(1), math.Inf(-1)
	n := 0
	for _, s := range samples {
		if s.a < 0 {
			continue
		}
		if overAt < 0 && s.a >= corrHigh {
			overAt = s.at
		}
		if s.at < from || s.at > to {
			continue
		}
		share += corrShare(s.a)
		uMin, uMax = min(uMin, s.a), max(uMax, s.a)
		n++
	}
	if n == 0 {
		return 0, 0, 0, overAt
	}
	return share / float64(n), uMin, uMax, overAt
}

// corrMirror is one mirror process of the scenario.
type corrMirror struct {
	*proc
	name  string // member name
	host  string // its own host name
	ip    string // its public address; the port is the cluster's
	admin string // admin host:port
}

// corrCluster is dnsd and the three mirrors, all on one public port.
type corrCluster struct {
	dnsd    *dnsdProc
	port    string
	mirrors []*corrMirror
	content []byte
	client  *http.Client // for the admin endpoints
}

// startCorrCluster writes the zone, dnsd's config and the mirrors'
// document root into a new temporary directory, starts dnsd and the
// mirrors, and waits until dnsd has every member up and every mirror a
// group view from after that.
func startCorrCluster(t *testing.T) *corrCluster {
	t.Helper()
	dir := t.TempDir()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	cl := &corrCluster{client: &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 5 * time.Second}}
	t.Cleanup(cl.client.CloseIdleConnections)
	var zb, members strings.Builder
	zb.Write(zone)
	zb.WriteString("\n; the correction scenario's mirrors\n")
	for i, name := range []string{"a", "b", "c"} {
		m := &corrMirror{name: name, host: name + ".mirrors.example.test", ip: fmt.Sprintf("127.0.%d.1", 21+i)}
		cl.mirrors = append(cl.mirrors, m)
		fmt.Fprintf(&zb, "%s.mirrors IN A %s\n", name, m.ip)
		fmt.Fprintf(&members, "      - {name: %s, host: %s., addresses: [%s], capacity: %g}\n", m.name, m.host, m.ip, corrCapacity)
	}
	writeFile(t, dir, "example.test.zone", zb.String())
	writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e correction: three mirrors of equal capacity.
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
health: {interval: 500ms, timeout: 400ms, jitter: 50ms, rise: 2, fall: 3}
zones:
  - origin: example.test.
    file: example.test.zone
groups:
  - name: %s.
    ttl: {min: 5, max: 5}
    answers: 1
    policy: {name: geo-load}
    secret: %s
    members:
%s`, corrGroup, corrSecret, members.String()))
	cl.dnsd = startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))

	root := filepath.Join(dir, "root", "pool")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	var content bytes.Buffer
	for i := 0; content.Len() < corrFileSize; i++ {
		fmt.Fprintf(&content, "line %04d of the mirrored file\n", i)
	}
	cl.content = content.Bytes()[:corrFileSize]
	writeFile(t, root, "file.bin", string(cl.content))

	// The first mirror picks the port; the others need the same one on
	// their own addresses.
	cl.port, _ = onePort(t, len(cl.mirrors), func(i int, port string) (*proc, string, error) {
		return launchCorrMirror(t, dir, cl.mirrors[i], port, cl.dnsd.Admin)
	})

	var upAt time.Time
	probetest.Until(t, 15*time.Second, func() string {
		up := 0
		v, err := cl.viewErr()
		if err != nil {
			return err.Error()
		}
		for _, m := range v.Members {
			if m.State == "up" {
				up++
			}
		}
		if up != len(cl.mirrors) {
			return fmt.Sprintf("dnsd has %d of %d members up: %+v", up, len(cl.mirrors), v.Members)
		}
		upAt = time.Now()
		return ""
	})
	probetest.Until(t, 10*time.Second, func() string {
		for _, m := range cl.mirrors {
			text, err := metrics(m.admin)
			if err != nil {
				return err.Error()
			}
			if at := metricSum(text, "transmirror_mirror_view_last_success_timestamp_seconds"); at < float64(upAt.UnixNano())/1e9 {
				return fmt.Sprintf("mirror %s has no group view from after all members were up", m.name)
			}
		}
		return ""
	})
	return cl
}

// launchCorrMirror writes m's config and starts the real mirror on m.ip
// and port ("0": any); it returns the public address the mirror reported.
// It returns an error, rather than failing the test, when the process
// exits before it is ready (the port taken on m's address).
func launchCorrMirror(t *testing.T, dir string, m *corrMirror, port, dnsdAdmin string) (*proc, string, error) {
	t.Helper()
	cfg := fmt.Sprintf(`listen: ["%s"]
admin: 127.0.0.1:0
group: %s
member: %s
host: %s
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 500ms}
root: root
capacity: %g
run_queue: none
timeouts: {shutdown: 5s}
redirect: {enabled: true, law: %s, max_share: %g, min_size: 1KiB, never: ["/"]}
`, net.JoinHostPort(m.ip, port), corrGroup, m.name, m.host, dnsdAdmin, corrSecret, corrCapacity, corrLaw, corrMaxShare)
	mp, err := launchMirror(t, writeFile(t, dir, m.name+".yaml", cfg), m.name)
	if err != nil {
		return nil, "", fmt.Errorf("on %s: %w", net.JoinHostPort(m.ip, port), err)
	}
	m.proc, m.admin = mp.proc, mp.Admin
	return mp.proc, mp.HTTP, nil
}

// byHost returns the mirror whose own host name is host, or nil.
func (cl *corrCluster) byHost(host string) *corrMirror {
	for _, m := range cl.mirrors {
		if strings.EqualFold(strings.TrimSuffix(host, "."), m.host) {
			return m
		}
	}
	return nil
}

// get fetches an admin URL (loopback only) and returns the body.
func (cl *corrCluster) get(u string) (string, error) { return getBody(cl.client, u) }

func (cl *corrCluster) getJSON(u string, v any) error {
	body, err := cl.get(u)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// corrReport is the part of a mirror's load report the test reads.
type corrReport struct {
	R         float64 `json:"r"`
	M         float64 `json:"m"`
	Redirects float64 `json:"redirects_per_second"`
	Capacity  float64 `json:"capacity"`
}

// report returns m's load report (GET /v1/load on its admin port).
func (cl *corrCluster) report(t *testing.T, m *corrMirror) corrReport {
	t.Helper()
	var r corrReport
	if err := cl.getJSON("http://"+m.admin+"/v1/load", &r); err != nil {
		t.Fatalf("mirror %s: load report: %v", m.name, err)
	}
	return r
}

// serving is the utilization the redirect decision uses, computed from a
// load report as the mirror's LoadMeter does: 10·(r − redirects + m) /
// capacity.
func (r corrReport) serving() float64 {
	if r.Capacity <= 0 {
		return 0
	}
	return 10 * (max(r.R-r.Redirects, 0) + r.M) / r.Capacity
}

// utilization returns m's serving utilization now.
func (cl *corrCluster) utilization(t *testing.T, m *corrMirror) float64 {
	t.Helper()
	return cl.report(t, m).serving()
}

// corrView is the part of dnsd's group view the test reads.
type corrView struct {
	Watermarks struct {
		High float64 `json:"high"`
	} `json:"watermarks"`
	Members []struct {
		Name        string  `json:"name"`
		State       string  `json:"state"`
		Utilization float64 `json:"utilization"`
	} `json:"members"`
}

func (cl *corrCluster) viewErr() (corrView, error) {
	var v corrView
	err := cl.getJSON("http://"+cl.dnsd.Admin+"/v1/groups/"+corrGroup, &v)
	return v, err
}

// view returns dnsd's group view (GROUP-QUERY).
func (cl *corrCluster) view(t *testing.T) corrView {
	t.Helper()
	v, err := cl.viewErr()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// corrRec is one request the test made.
type corrRec struct {
	sent time.Duration // since the recorder started, when it was sent
	at   time.Duration // since the recorder started, when the answer came
	kind string
	code int    // the final status
	to   string // for a 302 the member it pointed to; for a followed request the member that served it
	hops int    // redirects followed
}

// corrRecorder keeps every request of the test and the first failures.
type corrRecorder struct {
	start  time.Time
	failed atomic.Int64

	mu       sync.Mutex
	recs     []corrRec
	failures []string
}

func newCorrRecorder() *corrRecorder { return &corrRecorder{start: time.Now()} }

func (r *corrRecorder) since() time.Duration { return time.Since(r.start) }

func (r *corrRecorder) add(x corrRec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, x)
}

func (r *corrRecorder) fail(format string, args ...any) {
	r.failed.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) < 5 {
		r.failures = append(r.failures, fmt.Sprintf("%v: ", r.since().Round(time.Millisecond))+fmt.Sprintf(format, args...))
	}
}

func (r *corrRecorder) firstFailures() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == 0 {
		return "no failures"
	}
	return "first failures: " + strings.Join(r.failures, "; ")
}

// each calls f for every record of kind ("" for any) answered in [from, to).
func (r *corrRecorder) each(kind string, from, to time.Duration, f func(corrRec)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.recs {
		if (kind == "" || x.kind == kind) && x.at >= from && x.at < to {
			f(x)
		}
	}
}

// count counts the records of kind with status code (0: any) in [from, to).
func (r *corrRecorder) count(kind string, code int, from, to time.Duration) int {
	n := 0
	r.each(kind, from, to, func(x corrRec) {
		if code == 0 || x.code == code {
			n++
		}
	})
	return n
}

// countTo counts the records of kind pointing at (or served by) member.
func (r *corrRecorder) countTo(kind, member string, from, to time.Duration) int {
	n := 0
	r.each(kind, from, to, func(x corrRec) {
		if x.to == member {
			n++
		}
	})
	return n
}

// hops counts the records of kind that followed a redirect.
func (r *corrRecorder) hops(kind string) int {
	n := 0
	r.each(kind, 0, time.Hour, func(x corrRec) { n += x.hops })
	return n
}

// first returns when the first record of kind with code came.
func (r *corrRecorder) first(kind string, code int) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range r.recs {
		if x.kind == kind && x.code == code {
			return x.at, true
		}
	}
	return 0, false
}

// last returns when the last record of kind with code came.
func (r *corrRecorder) last(kind string, code int) (time.Duration, bool) {
	var at time.Duration
	found := false
	r.each(kind, 0, time.Hour, func(x corrRec) {
		if x.code == code && x.at >= at {
			at, found = x.at, true
		}
	})
	return at, found
}

// checkRedirect checks a 302 that mirror from sent for corrURI: to a
// sibling's own host name on the cluster's port, the same path and query,
// not to be cached. It returns the sibling.
func (cl *corrCluster) checkRedirect(resp *http.Response, from *corrMirror) (*corrMirror, error) {
	loc := resp.Header.Get("Location")
	u, err := url.Parse(loc)
	if err != nil {
		return nil, fmt.Errorf("302 from %s: Location %q: %v", from.name, loc, err)
	}
	to := cl.byHost(u.Hostname())
	switch {
	case u.Scheme != "http" || u.Port() != cl.port || u.RequestURI() != corrURI:
		return nil, fmt.Errorf("302 from %s to %q, want http://<sibling host>:%s%s", from.name, loc, cl.port, corrURI)
	case to == nil || to == from:
		return nil, fmt.Errorf("302 from %s to %q: not a sibling's own host name", from.name, loc)
	case resp.Header.Get("Cache-Control") != "no-store":
		return nil, fmt.Errorf("302 from %s to %q with Cache-Control %q, want no-store", from.name, loc, resp.Header.Get("Cache-Control"))
	}
	return to, nil
}

// checkBody reads a 200's body and compares it with the file.
func (cl *corrCluster) checkBody(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 2*corrFileSize))
	if err != nil {
		return err
	}
	if !bytes.Equal(body, cl.content) {
		return fmt.Errorf("%d bytes that are not the file (%d bytes)", len(body), len(cl.content))
	}
	return nil
}

// hit sends GET corrURI to mirror a with the Host header host (the group
// name or a's own host name, with the port), checks the answer, records it
// as kind and returns its status (0 when it failed).
func (cl *corrCluster) hit(hc *http.Client, rec *corrRecorder, kind, host string) int {
	a := cl.mirrors[0]
	req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(a.ip, cl.port)+corrURI, nil)
	if err != nil {
		rec.fail("%s: %v", kind, err)
		return 0
	}
	req.Host = net.JoinHostPort(host, cl.port)
	sent := rec.since()
	resp, err := hc.Do(req)
	if err != nil {
		rec.fail("%s: GET on %s: %v", kind, req.Host, err)
		return 0
	}
	defer resp.Body.Close()
	x := corrRec{sent: sent, kind: kind, code: resp.StatusCode}
	switch {
	case resp.StatusCode == http.StatusOK:
		if err := cl.checkBody(resp); err != nil {
			rec.fail("%s: GET on %s: %v", kind, req.Host, err)
			return 0
		}
		x.to = a.name
	case resp.StatusCode == http.StatusFound && host == corrGroup:
		_, _ = io.Copy(io.Discard, resp.Body)
		to, err := cl.checkRedirect(resp, a)
		if err != nil {
			rec.fail("%s: %v", kind, err)
			return 0
		}
		x.to = to.name
	case resp.StatusCode == http.StatusFound:
		// Recorded, to be counted, and a failure: a mirror never
		// redirects a request on its own host name.
		rec.fail("%s: GET on %s: redirected to %q", kind, req.Host, resp.Header.Get("Location"))
	default:
		rec.fail("%s: GET on %s: status %s, Location %q", kind, req.Host, resp.Status, resp.Header.Get("Location"))
		return 0
	}
	x.at = rec.since()
	rec.add(x)
	return x.code
}

// followingClient is a client that follows redirects as a browser does,
// at most one: the group name is a's address (the answer its resolver
// cached, which is why a gets more than its share), every other host name
// is resolved through dnsd.
func (cl *corrCluster) followingClient() *http.Client {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:              nil,
			DisableCompression: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				host, port, err := net.SplitHostPort(addr)
				if err != nil {
					return nil, err
				}
				ip := cl.mirrors[0].ip
				if !strings.EqualFold(host, corrGroup) {
					if ip, err = corrResolve(cl.dnsd.Addr, host); err != nil {
						return nil, err
					}
					if m := cl.byHost(host); m == nil || m.ip != ip {
						return nil, fmt.Errorf("dnsd resolved %s to %s", host, ip)
					}
				}
				return dialer.DialContext(ctx, network, net.JoinHostPort(ip, port))
			},
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 2 {
				return fmt.Errorf("%w, to %s", errCorrSecondRedirect, req.URL)
			}
			_, err := cl.checkRedirect(req.Response, cl.mirrors[0])
			return err
		},
		Timeout: 5 * time.Second,
	}
}

// follow runs the following client every corrFollowTick until ctx is
// done; the returned channel is closed when it has stopped.
func (cl *corrCluster) follow(ctx context.Context, fc *http.Client, rec *corrRecorder) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(corrFollowTick)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			cl.followOnce(fc, rec)
		}
	}()
	return done
}

func (cl *corrCluster) followOnce(fc *http.Client, rec *corrRecorder) {
	u := "http://" + net.JoinHostPort(corrGroup, cl.port) + corrURI
	resp, err := fc.Get(u)
	if err != nil {
		rec.fail("follow: GET %s: %v", u, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		rec.fail("follow: GET %s: ended at %s with %s", u, resp.Request.URL, resp.Status)
		return
	}
	if err := cl.checkBody(resp); err != nil {
		rec.fail("follow: GET %s from %s: %v", u, resp.Request.URL, err)
		return
	}
	x := corrRec{kind: corrFollow, code: resp.StatusCode, to: cl.mirrors[0].name}
	if h := resp.Request.URL.Hostname(); !strings.EqualFold(h, corrGroup) {
		x.to, x.hops = cl.byHost(h).name, 1 // checked by CheckRedirect
	}
	x.at = rec.since()
	rec.add(x)
}

// corrGen is a running load generator.
type corrGen struct {
	issued, dropped, late atomic.Int64
	done                  chan struct{} // closed when the pacer stops
	workers               sync.WaitGroup
}

// wait returns when the pacer has stopped and every request has finished.
func (g *corrGen) wait() {
	<-g.done
	g.workers.Wait()
}

// drive sends corrGroupRate requests/s on the group name and corrOwnRate
// on a's own host name to a until ctx is done: a pacer schedules them on a
// 10 ms ticker (as many as are due, so that a late tick catches up) and a
// fixed pool of workers sends them. Requests that find the queue full are
// dropped and those that start over corrMaxLag late are counted, so that a
// test process that can not keep up says so.
func (cl *corrCluster) drive(ctx context.Context, hc *http.Client, rec *corrRecorder) *corrGen {
	g := &corrGen{done: make(chan struct{})}
	type job struct {
		own bool
		at  time.Time
	}
	jobs := make(chan job, 4*corrWorkers)
	for range corrWorkers {
		g.workers.Add(1)
		go func() {
			defer g.workers.Done()
			for j := range jobs {
				if time.Since(j.at) > corrMaxLag {
					g.late.Add(1)
				}
				if j.own {
					cl.hit(hc, rec, corrOwn, cl.mirrors[0].host)
				} else {
					cl.hit(hc, rec, corrLoad, corrGroup)
				}
			}
		}()
	}
	rate := corrGroupRate + corrOwnRate
	ownEvery := int64(rate / corrOwnRate)
	go func() {
		defer close(g.done)
		defer close(jobs)
		start := time.Now()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := int64(time.Since(start).Seconds() * rate)
			for n := g.issued.Load(); n < due; n++ {
				at := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
				select {
				case jobs <- job{own: n%ownEvery == ownEvery-1, at: at}:
				default:
					g.dropped.Add(1)
				}
				g.issued.Add(1)
			}
		}
	}()
	return g
}

// corrSample is a's serving utilization and dnsd's view of every member
// at one moment.
type corrSample struct {
	at   time.Duration
	a    float64            // a's serving utilization, from its load report
	view map[string]float64 // member → utilization in dnsd's view
}

// sample reads a's load report and dnsd's view every 250 ms until ctx is
// done, then sends what it read.
func (cl *corrCluster) sample(ctx context.Context, start time.Time) <-chan []corrSample {
	out := make(chan []corrSample, 1)
	go func() {
		var all []corrSample
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			s := corrSample{at: time.Since(start), a: -1, view: map[string]float64{}}
			var r corrReport
			if err := cl.getJSON("http://"+cl.mirrors[0].admin+"/v1/load", &r); err == nil {
				s.a = r.serving()
			}
			if v, err := cl.viewErr(); err == nil {
				for _, m := range v.Members {
					s.view[m.Name] = m.Utilization
				}
			}
			all = append(all, s)
			select {
			case <-ctx.Done():
				out <- all
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// logTimeline logs, per second, what a answered and the utilizations.
func (cl *corrCluster) logTimeline(t *testing.T, rec *corrRecorder, samples []corrSample, loadAt, holdFrom, holdTo, stopAt, belowAt time.Duration) {
	t.Helper()
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "t\ta u\ta view\tb view\tc view\tgroup\t302\tshare\town\town 302\tfollow\t1 hop\tafter\tafter 302\t\t")
	end := rec.since()
	for from := loadAt; from < end; from += time.Second {
		to := from + time.Second
		var s *corrSample
		for i := range samples {
			if samples[i].at < to {
				s = &samples[i]
			}
		}
		if s == nil {
			continue
		}
		group, moved := rec.count(corrLoad, 0, from, to), rec.count(corrLoad, http.StatusFound, from, to)
		share := "-"
		if group > 0 {
			share = fmt.Sprintf("%.0f%%", 100*float64(moved)/float64(group))
		}
		hop := 0
		rec.each(corrFollow, from, to, func(x corrRec) { hop += x.hops })
		var note []string
		for _, e := range []struct {
			at   time.Duration
			what string
		}{{holdFrom, "window on"}, {holdTo, "window off"}, {stopAt, "load off"}, {belowAt, "a < low"}} {
			if e.at >= from && e.at < to {
				note = append(note, e.what)
			}
		}
		fmt.Fprintf(tw, "%.0fs\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", (to - loadAt).Seconds(), s.a,
			s.view["a"], s.view["b"], s.view["c"], group, moved, share,
			rec.count(corrOwn, 0, from, to), rec.count(corrOwn, http.StatusFound, from, to),
			rec.count(corrFollow, 0, from, to), hop,
			rec.count(corrPoll, 0, from, to), rec.count(corrPoll, http.StatusFound, from, to), strings.Join(note, ", "))
	}
	tw.Flush()
	t.Logf("timeline, per second since the load began (a u: a's serving utilization, from its load report, at the end of the second; views: utilization in dnsd's view; low/high watermark %g/%g):\n%s",
		corrLow, corrHigh, sb.String())
}

// corrResolve asks dnsd at addr for host's A record (no ECS) and returns
// the address.
func corrResolve(addr, host string) (string, error) {
	m := new(dns.Msg).SetQuestion(dns.Fqdn(host), dns.TypeA)
	m.RecursionDesired = false
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return "", fmt.Errorf("query %s A: %w", host, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return "", fmt.Errorf("query %s A: %s", host, dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String(), nil
		}
	}
	return "", fmt.Errorf("query %s A: no address in %v", host, r.Answer)
}
