//go:build unix

package probe

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// scaleHold is how long the fake mirrors hold each answer, like a short
// round trip: long enough that two probes of one member sent together
// would overlap at the server, far below any probe timeout.
const scaleHold = 10 * time.Millisecond

// scaleTarget is one fake member: what it serves and what it saw.
type scaleTarget struct {
	body        []byte
	inFlight    atomic.Int64
	maxInFlight atomic.Int64

	mu          sync.Mutex
	n           int       // probes seen
	first, last time.Time // when the first and the last arrived
}

// scaleMirrors serves many members' load reports from one loopback server
// and counts, per member, the probes in flight at the server. Its target
// map is complete before the server starts and read-only after.
type scaleMirrors struct {
	srv     *httptest.Server
	targets map[string]*scaleTarget
	// requests, inFlight and maxInFlight are over all members; conns
	// counts the connections the server accepted.
	requests, inFlight, maxInFlight, conns atomic.Int64
}

func newScaleMirrors(tb testing.TB, members int) (*scaleMirrors, []MemberSpec) {
	s := &scaleMirrors{targets: make(map[string]*scaleTarget, members)}
	paths := make([]string, members)
	for i := range paths {
		g, m := fmt.Sprint("g", i%10), fmt.Sprint("m", i)
		b, _ := json.Marshal(Report{Group: g, Member: m, Seq: 1, Time: t0, R: 10, M: 0.5, Load: 105, Capacity: 1000})
		paths[i] = "/m/" + g + "/" + m + loadPath
		s.targets[paths[i]] = &scaleTarget{body: b}
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	tb.Cleanup(s.srv.Close)
	specs := make([]MemberSpec, members)
	for i, p := range paths {
		specs[i] = MemberSpec{Group: fmt.Sprint("g", i%10), Member: fmt.Sprint("m", i), URL: s.srv.URL + p}
	}
	return s, specs
}

// raise stores v in hi if it is larger.
func raise(hi *atomic.Int64, v int64) {
	for {
		cur := hi.Load()
		if v <= cur || hi.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (s *scaleMirrors) serve(w http.ResponseWriter, r *http.Request) {
	t := s.targets[r.URL.Path]
	if t == nil {
		http.NotFound(w, r)
		return
	}
	raise(&t.maxInFlight, t.inFlight.Add(1))
	defer t.inFlight.Add(-1)
	raise(&s.maxInFlight, s.inFlight.Add(1))
	defer s.inFlight.Add(-1)
	now := time.Now()
	t.mu.Lock()
	if t.n == 0 {
		t.first = now
	}
	t.n++
	t.last = now
	t.mu.Unlock()
	s.requests.Add(1)
	hold := time.NewTimer(scaleHold)
	defer hold.Stop()
	select {
	case <-hold.C:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(t.body)
}

// cadence is the fewest probes any member has had, and the members'
// probes per interval: the probes each had after its first over the time
// from its first to its last, summed over members (gaps over time spans).
// A stall of the process moves only the probes that fall in it, so it
// changes the figure by a fraction of the stall over the spans, where a
// rate over one wall-clock window would move by the whole stall.
func (s *scaleMirrors) cadence(interval time.Duration) (fewest int, perInterval float64, slowest, fastest float64) {
	fewest, slowest, fastest = -1, math.Inf(1), 0
	var gaps int
	var span time.Duration
	for _, t := range s.targets {
		t.mu.Lock()
		n, d := t.n, t.last.Sub(t.first)
		t.mu.Unlock()
		if fewest < 0 || n < fewest {
			fewest = n
		}
		if n < 2 {
			slowest = 0
			continue
		}
		gaps += n - 1
		span += d
		r := float64(n-1) * interval.Seconds() / d.Seconds()
		slowest, fastest = min(slowest, r), max(fastest, r)
	}
	if span > 0 {
		perInterval = float64(gaps) * interval.Seconds() / span.Seconds()
	}
	return fewest, perInterval, slowest, fastest
}

// overlapping is how many members had more than one probe in flight at
// once, and the largest number any one of them had.
func (s *scaleMirrors) overlapping() (members int, worst int64) {
	for _, t := range s.targets {
		if m := t.maxInFlight.Load(); m > 1 {
			members++
			worst = max(worst, m)
		}
	}
	return members, worst
}

type scaleResult struct {
	members, up int
	// perInterval is the members' probes per interval (see cadence);
	// slowest and fastest are the lowest and the highest of one member.
	perInterval, slowest, fastest float64
	// probes and cpu (user + system, whole process, fake mirrors
	// included) are over the whole run, which lasted elapsed.
	probes  int64
	elapsed time.Duration
	cpu     time.Duration
	// overlapping members had more than one probe in flight at the
	// server at once, worst is the most that one had.
	overlapping int
	worst       int64
	// peak is the most probes in flight at the server at once, conns
	// the connections it accepted: figures of how the probes of
	// different members overlapped, not a check of keep-alive
	// (TestProbeLoad has that).
	peak, conns int64
}

func (r scaleResult) probesPerSecond() float64 { return float64(r.probes) / r.elapsed.Seconds() }
func (r scaleResult) cpuPerSecond() float64    { return r.cpu.Seconds() / r.elapsed.Seconds() }

func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runScale watches members fake mirrors, all on one loopback server, at
// interval, until the server has seen each member probed probes times
// (about probes intervals: the first probes are spread over the first
// interval) and every member is up, polling both with deadlines. The
// watcher's client keeps as many idle connections as probes may be in
// flight: with one host for every member, the default pool (sized for
// one mirror per host) would make the test measure its own set-up.
func runScale(tb testing.TB, members int, interval time.Duration, probes int) scaleResult {
	f, specs := newScaleMirrors(tb, members)
	env := newWatcherEnv(tb, WatcherConfig{Client: NewClient(ClientOptions{MaxIdlePerHost: DefaultMaxInFlight})})
	for _, spec := range specs {
		spec.Interval = interval
		if err := env.w.Add(spec); err != nil {
			tb.Fatal(err)
		}
	}
	res := scaleResult{members: members}
	c0, t0 := cpuTime(tb), time.Now()
	env.start(tb)
	poll := func(within time.Duration, cond func() bool, failure func() string) {
		tb.Helper()
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) {
				tb.Fatalf("not within %s: %s", within, failure())
			}
			time.Sleep(2 * time.Millisecond) // polling, not waiting for a fixed time
		}
	}
	var fewest int
	poll(time.Duration(3*probes)*interval, func() bool {
		if f.requests.Load() < int64(probes*members) {
			return false // not yet, and cheaper to tell than cadence
		}
		fewest, res.perInterval, res.slowest, res.fastest = f.cadence(interval)
		return fewest >= probes
	}, func() string {
		return fmt.Sprintf("every member probed %d times: one was probed %d times, %d probes in all", probes, fewest, f.requests.Load())
	})
	res.probes, res.elapsed, res.cpu = f.requests.Load(), time.Since(t0), cpuTime(tb)-c0
	var notUp string
	poll(5*interval, func() bool {
		res.up, notUp = 0, ""
		for _, st := range statuses(env.w, "") {
			if st.State == StateUp {
				res.up++
			} else if notUp == "" {
				notUp = fmt.Sprintf("%s/%s %s (%s)", st.Spec.Group, st.Spec.Member, st.State, st.LastError)
			}
		}
		return res.up == members
	}, func() string {
		return fmt.Sprintf("every member up: %d of %d are, first one not: %s", res.up, members, notUp)
	})
	env.stop()
	res.overlapping, res.worst = f.overlapping()
	res.peak, res.conns = f.maxInFlight.Load(), f.conns.Load()
	return res
}

// TestWatcherScale500 watches 500 members at a 2 s interval and checks
// what the Watcher promises at that scale, from what the fake mirrors
// saw: each member probed once per interval (the members' cadence, see
// cadence, and no member at half or twice of it), never two probes of one
// member in flight at once (counted per member at the server), and every
// member up. 250 probes/s take about 0.15 CPU-s/s under -race, so
// the cadence holds on a busy machine; a watcher starved of more than a
// quarter of its slots fails it.
func TestWatcherScale500(t *testing.T) {
	const members, interval = 500, 2 * time.Second
	res := runScale(t, members, interval, 2)
	t.Logf("%d members at %s: %.3f probes per member per interval (each %.2f..%.2f); %.0f probes/s, %.3f CPU-s/s, %.1f µs CPU/probe over %s; at most %d probes in flight, %d connections",
		members, interval, res.perInterval, res.slowest, res.fastest,
		res.probesPerSecond(), res.cpuPerSecond(), float64(res.cpu.Microseconds())/float64(res.probes), res.elapsed.Round(time.Millisecond),
		res.peak, res.conns)
	if res.perInterval < 0.75 || res.perInterval > 1.25 {
		t.Errorf("%.3f probes per member per interval, want about 1", res.perInterval)
	}
	if res.slowest < 0.5 || res.fastest > 2 {
		t.Errorf("a member had %.2f and one %.2f probes per interval, want every one between 0.5 and 2", res.slowest, res.fastest)
	}
	if res.overlapping > 0 {
		t.Errorf("%d members had more than one probe in flight at once (up to %d), want at most one each", res.overlapping, res.worst)
	}
}

// BenchmarkWatcher5000 is the scale figure: 5,000 members at a 5 s
// interval until each was probed three times (about 15 s, run once
// whatever b.N). Run with -cpu 1 to hold it to one core.
func BenchmarkWatcher5000(b *testing.B) {
	const members, interval = 5000, 5 * time.Second
	for range b.N {
		res := runScale(b, members, interval, 3)
		if res.overlapping > 0 {
			b.Errorf("%d members had more than one probe in flight at once (up to %d)", res.overlapping, res.worst)
		}
		b.ReportMetric(res.perInterval, "probes/member/interval")
		b.ReportMetric(res.probesPerSecond(), "probes/s")
		b.ReportMetric(res.cpuPerSecond(), "cpu-s/s")
		b.ReportMetric(float64(res.cpu.Microseconds())/float64(res.probes), "cpu-µs/probe")
		b.ReportMetric(float64(res.peak), "peak-in-flight")
		b.ReportMetric(float64(res.conns), "conns")
	}
}
