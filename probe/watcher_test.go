package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/transmirror/transmirror/probe/probetest"
)

// fakeMirrors serves /m/<group>/<member>/v1/load for any number of members
// from one loopback server; each member can be made to fail.
type fakeMirrors struct {
	srv   *httptest.Server
	mu    sync.Mutex
	state map[string]*fakeMember
	conns atomic.Int64
}

type fakeMember struct {
	body     []byte
	failing  atomic.Bool
	requests atomic.Int64
}

func newFakeMirrors(t testing.TB) *fakeMirrors {
	f := &fakeMirrors{state: make(map[string]*fakeMember)}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Start()
	t.Cleanup(f.srv.Close)
	return f
}

// add makes a member and returns its spec's URL.
func (f *fakeMirrors) add(group, member string) string {
	r := Report{Group: group, Member: member, Seq: 1, Time: t0, R: 10, M: 0.5, Load: 105, Capacity: 1000}
	b, _ := json.Marshal(r)
	path := "/m/" + group + "/" + member + loadPath
	f.mu.Lock()
	f.state[path] = &fakeMember{body: b}
	f.mu.Unlock()
	return f.srv.URL + path
}

func (f *fakeMirrors) member(group, member string) *fakeMember {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state["/m/"+group+"/"+member+loadPath]
}

func (f *fakeMirrors) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	m := f.state[r.URL.Path]
	f.mu.Unlock()
	if m == nil {
		http.NotFound(w, r)
		return
	}
	m.requests.Add(1)
	if m.failing.Load() {
		http.Error(w, "failing", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(m.body)
}

type watcherEnv struct {
	w      *Watcher
	reg    *prometheus.Registry
	mu     sync.Mutex
	events []Event
	cancel context.CancelFunc
	done   chan error
}

func newWatcherEnv(t testing.TB, cfg WatcherConfig) *watcherEnv {
	t.Helper()
	env := &watcherEnv{reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	cfg.Registerer = env.reg
	cfg.Rand = rand.New(rand.NewPCG(1, 2))
	cfg.OnEvent = func(ev Event) {
		env.mu.Lock()
		env.events = append(env.events, ev)
		env.mu.Unlock()
	}
	w, err := NewWatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	env.w = w
	return env
}

func (env *watcherEnv) start(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	env.cancel = cancel
	go func() { env.done <- env.w.Run(ctx) }()
	t.Cleanup(env.stop)
}

func (env *watcherEnv) stop() {
	if env.cancel == nil {
		return
	}
	env.cancel()
	env.cancel = nil
	<-env.done
}

func (env *watcherEnv) state(t testing.TB, group, member string) State {
	st, ok := env.w.State(group, member)
	if !ok {
		t.Fatalf("%s/%s not watched", group, member)
	}
	return st.State
}

// stateIs is a condition for probetest.Until: group/member is in state
// want; what names what is awaited.
func (env *watcherEnv) stateIs(t testing.TB, what, group, member string, want State) func() string {
	return func() string {
		if got := env.state(t, group, member); got != want {
			return fmt.Sprintf("%s: %s/%s is %s, want %s", what, group, member, got, want)
		}
		return ""
	}
}

func (env *watcherEnv) eventStrings() []string {
	env.mu.Lock()
	defer env.mu.Unlock()
	var out []string
	for _, ev := range env.events {
		out = append(out, ev.Member+":"+ev.From.String()+"→"+ev.To.String())
	}
	return out
}

func TestWatcherFallAndRise(t *testing.T) {
	f := newFakeMirrors(t)
	env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Rise: 2, Fall: 3}})
	spec := MemberSpec{Group: "www", Member: "fra1", URL: f.add("www", "fra1"), Interval: 20 * time.Millisecond}
	if err := env.w.Add(spec); err != nil {
		t.Fatal(err)
	}
	if s := env.state(t, "www", "fra1"); s != StateUnknown {
		t.Fatalf("new member %s, want unknown", s)
	}
	env.start(t)
	fm := f.member("www", "fra1")
	probetest.Until(t, 5*time.Second, env.stateIs(t, "fra1 up", "www", "fra1", StateUp))
	if n := fm.requests.Load(); n < 2 {
		t.Errorf("up after %d probes, want rise = 2", n)
	}

	before := fm.requests.Load()
	fm.failing.Store(true)
	probetest.Until(t, 5*time.Second, env.stateIs(t, "fra1 down", "www", "fra1", StateDown))
	if n := fm.requests.Load() - before; n < 3 {
		t.Errorf("down after %d failed probes, want fall = 3", n)
	}
	st, _ := env.w.State("www", "fra1")
	if st.LastReason != ReasonStatus || !strings.Contains(st.LastError, "status 503") {
		t.Errorf("last failure %q %q", st.LastReason, st.LastError)
	}

	fm.failing.Store(false)
	probetest.Until(t, 5*time.Second, env.stateIs(t, "fra1 up again", "www", "fra1", StateUp))
	st, _ = env.w.State("www", "fra1")
	if !st.HasReport || st.Report.Member != "fra1" || st.LastReason != ReasonNone || st.LastProbe.IsZero() {
		t.Errorf("status %+v", st)
	}

	// OnEvent runs after the state is visible to State: wait for the
	// third call.
	want := "fra1:unknown→up fra1:up→down fra1:down→up"
	probetest.Until(t, 5*time.Second, func() string {
		if evs := env.eventStrings(); len(evs) < 3 {
			return fmt.Sprintf("three events: %q", evs)
		}
		return ""
	})
	if got := strings.Join(env.eventStrings(), " "); got != want {
		t.Errorf("OnEvent got %q, want %q", got, want)
	}
	if got := testutil.ToFloat64(env.w.met.changes.WithLabelValues("www", "down")); got != 1 {
		t.Errorf("state_changes_total{to=down} = %g", got)
	}
	if got := testutil.ToFloat64(env.w.met.state.WithLabelValues("www", "fra1", "up")); got != 1 {
		t.Errorf("member_state{state=up} = %g", got)
	}
}

func TestWatcherPushSuspendsPolling(t *testing.T) {
	f := newFakeMirrors(t)
	env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Rise: 2, Fall: 3}})
	const interval = 40 * time.Millisecond
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1", URL: f.add("www", "fra1"), Interval: interval}); err != nil {
		t.Fatal(err)
	}
	fm := f.member("www", "fra1")
	report := Report{Group: "www", Member: "fra1", Time: time.Now(), R: 1, Load: 10, Capacity: 100}
	push := func() {
		t.Helper()
		report.Seq++
		report.Time = time.Now()
		if err := env.w.Push(report, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	push()
	env.start(t)
	push()
	if s := env.state(t, "www", "fra1"); s != StateUp {
		t.Fatalf("after 2 pushes: %s, want up", s)
	}
	// Push every interval/2 for 15 intervals: no poll may happen.
	tick := time.NewTicker(interval / 2)
	for range 30 {
		<-tick.C
		push()
	}
	tick.Stop()
	if n := fm.requests.Load(); n != 0 {
		t.Fatalf("%d polls while pushes were fresh, want 0", n)
	}
	st, _ := env.w.State("www", "fra1")
	if st.Report.Seq != report.Seq || st.LastPush.IsZero() {
		t.Errorf("status %+v", st)
	}
	// Pushes stop: polling resumes once they are stale.
	probetest.Until(t, 5*time.Second, func() string {
		if n := fm.requests.Load(); n < 2 {
			return fmt.Sprintf("polls after pushes stopped: %d requests, want 2", n)
		}
		return ""
	})
	if s := env.state(t, "www", "fra1"); s != StateUp {
		t.Errorf("state %s, want up", s)
	}
	if got := testutil.ToFloat64(env.w.met.pushes.WithLabelValues("www", "accepted")); got != 32 {
		t.Errorf("pushes_total{accepted} = %g, want 32", got)
	}
}

func TestWatcherPushOnlyGoesStale(t *testing.T) {
	env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Rise: 1, Fall: 2}})
	if err := env.w.Add(MemberSpec{Group: "www", Member: "p1", Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	env.start(t)
	if err := env.w.Push(Report{Group: "www", Member: "p1", Time: time.Now(), Load: 0, Capacity: 1}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if s := env.state(t, "www", "p1"); s != StateUp {
		t.Fatalf("after a push: %s, want up", s)
	}
	probetest.Until(t, 5*time.Second, env.stateIs(t, "p1 down when stale", "www", "p1", StateDown))
	st, _ := env.w.State("www", "p1")
	if st.LastReason != ReasonStale {
		t.Errorf("reason %q, want stale", st.LastReason)
	}
}

// TestWatcherParksSilentPushOnly: a push-only member that has not pushed
// yet costs the scheduler no wake-up for parkedFor (it was due every
// interval, each member a timer, which made an idle dnsd with 512 such
// members use 1.3% of a core); its first push schedules it again, for
// when that push goes stale.
func TestWatcherParksSilentPushOnly(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	env := newWatcherEnv(t, WatcherConfig{Now: func() time.Time { return now }})
	for _, m := range []string{"p1", "p2"} {
		if err := env.w.Add(MemberSpec{Group: "www", Member: m, Interval: time.Second, Jitter: time.Nanosecond}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	for step := range 3 {
		now = t0.Add(time.Duration(step+1) * 2 * time.Second) // past the first slot
		if wait := env.w.dispatch(ctx); wait < parkedFor-10*time.Second {
			t.Fatalf("step %d: next wake-up in %v, want the members parked for about %v", step, wait, parkedFor)
		}
	}
	if err := env.w.Push(Report{Group: "www", Member: "p1", Time: now, Load: 0, Capacity: 1}, now); err != nil {
		t.Fatal(err)
	}
	if wait := env.w.dispatch(ctx); wait <= 0 || wait > 2*time.Second+time.Millisecond {
		t.Errorf("after p1's push: next wake-up in %v, want when it goes stale (2 s)", wait)
	}
	now = now.Add(3 * time.Second)
	env.w.dispatch(ctx)
	if st, _ := env.w.State("www", "p1"); st.LastReason != ReasonStale {
		t.Errorf("p1 after 3 s without a push: reason %q, want stale", st.LastReason)
	}
}

func TestWatcherPushErrors(t *testing.T) {
	env := newWatcherEnv(t, WatcherConfig{})
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1", Interval: time.Second}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tests := []struct {
		name  string
		r     Report
		want  error
		group string
	}{
		{"unknown member", Report{Group: "www", Member: "ams1", Time: now}, ErrUnknownMember, "www"},
		{"unknown group", Report{Group: "evil", Member: "x", Time: now}, ErrUnknownMember, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testutil.ToFloat64(env.w.met.pushes.WithLabelValues(tt.group, "rejected"))
			if err := env.w.Push(tt.r, now); !errors.Is(err, tt.want) {
				t.Fatalf("Push = %v, want %v", err, tt.want)
			}
			if got := testutil.ToFloat64(env.w.met.pushes.WithLabelValues(tt.group, "rejected")); got != before+1 {
				t.Errorf("pushes_total{group=%q,rejected} = %g, want %g", tt.group, got, before+1)
			}
		})
	}
}

func TestWatcherSpecErrors(t *testing.T) {
	env := newWatcherEnv(t, WatcherConfig{})
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		op   func() error
		want error
		sub  string
	}{
		{"duplicate", func() error { return env.w.Add(MemberSpec{Group: "www", Member: "fra1"}) }, ErrMemberExists, "www/fra1"},
		{"update unknown", func() error { return env.w.Update(MemberSpec{Group: "www", Member: "x"}) }, ErrUnknownMember, "www/x"},
		{"remove unknown", func() error { return env.w.Remove("www", "x") }, ErrUnknownMember, "www/x"},
		{"no group", func() error { return env.w.Add(MemberSpec{Member: "a"}) }, ErrInvalidSpec, "group: empty"},
		{"bad url", func() error { return env.w.Add(MemberSpec{Group: "g", Member: "a", URL: "/v1/load"}) }, ErrInvalidSpec, "absolute http"},
		{"tiny interval", func() error { return env.w.Add(MemberSpec{Group: "g", Member: "a", Interval: time.Millisecond}) }, ErrInvalidSpec, "interval"},
		{"timeout over interval", func() error {
			return env.w.Add(MemberSpec{Group: "g", Member: "a", Interval: time.Second, Timeout: 2 * time.Second})
		}, ErrInvalidSpec, "timeout"},
		{"jitter over interval", func() error {
			return env.w.Add(MemberSpec{Group: "g", Member: "a", Interval: time.Second, Jitter: 2 * time.Second})
		}, ErrInvalidSpec, "jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.op()
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.sub) {
				t.Fatalf("err = %v, want %v with %q", err, tt.want, tt.sub)
			}
		})
	}
	st, _ := env.w.State("www", "fra1")
	if st.Spec.Interval != DefaultInterval || st.Spec.Jitter != DefaultInterval/10 || st.Spec.Timeout != 4*time.Second {
		t.Errorf("defaults %+v", st.Spec)
	}
	if _, err := NewWatcher(WatcherConfig{Rand: rand.New(rand.NewPCG(1, 1))}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("no registry: %v", err)
	}
	if _, err := NewWatcher(WatcherConfig{Registerer: prometheus.NewRegistry()}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("no rand: %v", err)
	}
}

func TestWatcherRemove(t *testing.T) {
	f := newFakeMirrors(t)
	env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Rise: 1}})
	for _, m := range []struct{ g, m string }{{"www", "fra1"}, {"www", "ams1"}, {"ftp", "fra1"}} {
		if err := env.w.Add(MemberSpec{Group: m.g, Member: m.m, URL: f.add(m.g, m.m), Interval: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	env.start(t)
	probetest.Until(t, 5*time.Second, func() string {
		for _, st := range statuses(env.w, "") {
			if st.State != StateUp {
				return fmt.Sprintf("all up: %s/%s is %s", st.Spec.Group, st.Spec.Member, st.State)
			}
		}
		return ""
	})
	if got := len(statuses(env.w, "www")); got != 2 {
		t.Errorf("www has %d members, want 2", got)
	}
	series := func() string {
		mfs, err := env.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, mf := range mfs {
			for _, m := range mf.Metric {
				fmt.Fprintf(&b, "%s{", mf.GetName())
				for _, l := range m.Label {
					fmt.Fprintf(&b, "%s=%q,", l.GetName(), l.GetValue())
				}
				b.WriteString("}\n")
			}
		}
		return b.String()
	}
	if s := series(); !strings.Contains(s, `member="ams1"`) || !strings.Contains(s, `group="ftp"`) {
		t.Fatalf("series before Remove:\n%s", s)
	}

	if err := env.w.Remove("www", "ams1"); err != nil {
		t.Fatal(err)
	}
	if err := env.w.Remove("ftp", "fra1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := env.w.State("www", "ams1"); ok {
		t.Error("removed member still has a state")
	}
	s := series()
	if strings.Contains(s, `member="ams1"`) || strings.Contains(s, `group="ftp"`) {
		t.Errorf("label values left after Remove:\n%s", s)
	}
	if !strings.Contains(s, `member="fra1"`) {
		t.Errorf("remaining member's series gone:\n%s", s)
	}

	// At most one probe was in flight at Remove; after that, none.
	ams, ftp, fra := f.member("www", "ams1"), f.member("ftp", "fra1"), f.member("www", "fra1")
	a0, f0, w0 := ams.requests.Load(), ftp.requests.Load(), fra.requests.Load()
	probetest.Until(t, 5*time.Second, func() string {
		if n := fra.requests.Load() - w0; n < 5 {
			return fmt.Sprintf("5 more probes of the remaining member: %d more", n)
		}
		return ""
	})
	if a, f := ams.requests.Load(), ftp.requests.Load(); a > a0+1 || f > f0+1 {
		t.Errorf("removed members probed %d and %d more times", a-a0, f-f0)
	}
}

func TestWatcherUpdate(t *testing.T) {
	f := newFakeMirrors(t)
	env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Rise: 1}})
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1", URL: f.add("www", "old"), Interval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	env.start(t)
	// The old spec would not probe for up to an hour; the update reschedules.
	if err := env.w.Update(MemberSpec{Group: "www", Member: "fra1", URL: f.add("www", "fra1"), Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	probetest.Until(t, 5*time.Second, env.stateIs(t, "fra1 up after update", "www", "fra1", StateUp))
	if n := f.member("www", "old").requests.Load(); n != 0 {
		t.Errorf("old URL probed %d times", n)
	}
}

func TestWatcherWrongMemberReport(t *testing.T) {
	f := newFakeMirrors(t)
	env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Fall: 1}})
	// fra1's probe URL serves ams1's report.
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1", URL: f.add("www", "ams1"), Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	env.start(t)
	probetest.Until(t, 5*time.Second, env.stateIs(t, "fra1 down", "www", "fra1", StateDown))
	if st, _ := env.w.State("www", "fra1"); st.LastReason != ReasonValidate {
		t.Errorf("reason %q", st.LastReason)
	}
}

func TestWatcherRunTwiceAndDrain(t *testing.T) {
	unblock := make(chan struct{})
	var started atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started.Add(1)
		select {
		case <-unblock:
		case <-r.Context().Done():
		}
		w.Write([]byte(goodJSON))
	}))
	defer srv.Close()
	env := newWatcherEnv(t, WatcherConfig{MaxInFlight: 2})
	for i := range 5 {
		spec := MemberSpec{Group: "www", Member: fmt.Sprint("m", i), URL: srv.URL + "/v1/load", Interval: 20 * time.Millisecond, Timeout: 20 * time.Millisecond}
		if err := env.w.Add(spec); err != nil {
			t.Fatal(err)
		}
	}
	env.start(t)
	probetest.Until(t, 5*time.Second, func() string {
		if !env.w.running.Load() {
			return "Run started: not running"
		}
		return ""
	})
	if err := env.w.Run(context.Background()); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run = %v, want ErrRunning", err)
	}
	probetest.Until(t, 5*time.Second, func() string {
		if n := started.Load(); n < 2 {
			return fmt.Sprintf("2 probes in flight: %d started", n)
		}
		return ""
	})
	if got := testutil.ToFloat64(env.w.met.inFlight); got > 2 {
		t.Errorf("in flight %g > MaxInFlight 2", got)
	}
	env.stop() // returns only after the probes in flight finished
	if got := testutil.ToFloat64(env.w.met.inFlight); got != 0 {
		t.Errorf("in flight after Run returned: %g", got)
	}
	close(unblock)
}

func TestWatcherMetricsLint(t *testing.T) {
	f := newFakeMirrors(t)
	env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Rise: 1, Fall: 1}})
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1", URL: f.add("www", "fra1"), Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := env.w.Add(MemberSpec{Group: "www", Member: "bad", URL: f.srv.URL + "/nothing", Interval: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	env.start(t)
	if err := env.w.Push(Report{Group: "www", Member: "nope", Time: time.Now()}, time.Now()); err == nil {
		t.Fatal("want an error")
	}
	probetest.Until(t, 5*time.Second, func() string {
		if fra, bad := env.state(t, "www", "fra1"), env.state(t, "www", "bad"); fra != StateUp || bad != StateDown {
			return fmt.Sprintf("fra1 up, bad down: fra1 %s, bad %s", fra, bad)
		}
		return ""
	})
	problems, err := testutil.GatherAndLint(env.reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(env.reg)
	if err != nil {
		t.Fatal(err)
	}
	if n < 7 {
		t.Errorf("only %d series gathered; the lint would match nothing", n)
	}
}

// TestWatcherUpdates: OnUpdate gets every state change and every newer
// report, in order; an older report (refused) and a repeated result send
// nothing.
// SetHealth changes fall for a member already watched.
func TestWatcherUpdates(t *testing.T) {
	var got []string
	env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Rise: 2, Fall: 3, FlapLimit: -1},
		OnUpdate: func(u Update) {
			got = append(got, fmt.Sprintf("%s/%s %s load=%g has=%v", u.Group, u.Member, u.State, u.Report.Load, u.HasReport))
		}})
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1", Interval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rep := func(load float64, at time.Time) Report {
		return Report{Group: "www", Member: "fra1", Seq: 1, Time: at, R: load / 10, Load: load, Capacity: 100}
	}
	steps := []struct {
		name string
		r    Report
		err  error
		want []string
	}{
		{"first report: new report, still unknown", rep(10, now), nil, []string{"www/fra1 unknown load=10 has=true"}},
		{"second success: up", rep(20, now.Add(time.Second)), nil, []string{"www/fra1 up load=20 has=true"}},
		{"older report: refused, nothing", rep(30, now.Add(-time.Second)), ErrReportOutOfOrder, nil},
		{"newer report: its load", rep(40, now.Add(2*time.Second)), nil, []string{"www/fra1 up load=40 has=true"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			got = nil
			if err := env.w.Push(st.r, now); !errors.Is(err, st.err) {
				t.Fatalf("Push = %v, want %v", err, st.err)
			}
			if fmt.Sprint(got) != fmt.Sprint(st.want) {
				t.Errorf("updates %q, want %q", got, st.want)
			}
		})
	}
	t.Run("SetHealth", func(t *testing.T) {
		h := NewHealth("www", "fra1", HealthConfig{Rise: 1, Fall: 5})
		h.Observe(now, true, "")
		h.Observe(now, false, "x")
		h.SetConfig(HealthConfig{Rise: 1, Fall: 2})
		if _, changed := h.Observe(now, false, "x"); !changed || h.State() != StateDown {
			t.Errorf("second failure after fall 5 → 2: state %s, want down", h.State())
		}
		env.w.SetHealth(HealthConfig{Rise: 1, Fall: 1})
		env.w.mu.Lock()
		fall := env.w.members[memberKey{"www", "fra1"}].health.cfg.Fall
		env.w.mu.Unlock()
		if fall != 1 {
			t.Errorf("watched member's fall %d after SetHealth, want 1", fall)
		}
	})
}

// statuses is the status of every member of group that w watches (of
// every group when group is empty).
func statuses(w *Watcher, group string) []MemberStatus {
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []MemberStatus
	for k, m := range w.members {
		if group == "" || k.group == group {
			out = append(out, w.status(m, now))
		}
	}
	return out
}
