package probe

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/transmirror/transmirror/probe/probetest"
)

func TestReportCheckTime(t *testing.T) {
	now := t0
	tests := []struct {
		name string
		at   time.Time
		want error
		msg  string
	}{
		{"now", now, nil, ""},
		{"at the skew", now.Add(30 * time.Second), nil, ""},
		{"past the skew", now.Add(31 * time.Second), ErrReportFuture, "time: 31s ahead of dnsd's clock (at most 30s)"},
		{"two hours ahead", now.Add(2*time.Hour - 3*time.Millisecond), ErrReportFuture, "time: 2h0m0s ahead"},
		{"at the age", now.Add(-time.Minute), nil, ""},
		{"past the age", now.Add(-time.Minute - time.Millisecond), ErrReportStale, "time: 1m0s behind dnsd's clock (at most 1m0s)"},
		{"a day behind", now.Add(-24 * time.Hour), ErrReportStale, "time: 24h0m0s behind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Report{Time: tt.at}.CheckTime(now, DefaultReportMaxSkew, DefaultReportMaxAge)
			if !errors.Is(err, tt.want) || tt.want == nil && err != nil {
				t.Fatalf("CheckTime = %v, want %v", err, tt.want)
			}
			if err != nil && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("CheckTime = %q, want it to say %q", err, tt.msg)
			}
		})
	}
}

func TestReportCheckLoad(t *testing.T) {
	tests := []struct {
		name     string
		r        Report
		capacity float64
		msg      string // "" for believed
	}{
		{"idle", Report{}, 100, ""},
		{"overloaded but possible", Report{Load: 100e3}, 100, ""},
		{"above 1000× capacity", Report{Load: 100e3 + 1}, 100, "load: 100001 is more than 1000× the capacity 100"},
		{"serving load above 1000× capacity", Report{Load: 10, ServingLoad: 2e6}, 100, "serving_load: 2e+06"},
		{"no capacity bounds nothing", Report{Load: 1e12}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.CheckLoad(tt.capacity)
			switch {
			case tt.msg == "" && err != nil:
				t.Fatalf("CheckLoad = %v, want nil", err)
			case tt.msg != "" && (!errors.Is(err, ErrAbsurdLoad) || !strings.Contains(err.Error(), tt.msg)):
				t.Fatalf("CheckLoad = %v, want ErrAbsurdLoad saying %q", err, tt.msg)
			}
		})
	}
}

// TestWatcherPushRefused: every report that is not believed is refused
// with an error naming the field, counted as rejected, and changes nothing
// the Watcher knows of the member.
func TestWatcherPushRefused(t *testing.T) {
	clock := newFakeClock(t0)
	env := newWatcherEnv(t, WatcherConfig{Now: clock.Now, Health: HealthConfig{Rise: 1, Fall: 1}})
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1", Interval: time.Second, Capacity: 100}); err != nil {
		t.Fatal(err)
	}
	rep := func(seq uint64, at time.Time, r float64) Report {
		return Report{Group: "www", Member: "fra1", Seq: seq, Time: at, R: r, Load: LoadOf(r, 0), Capacity: 100}
	}
	first := rep(7, t0.Add(-time.Second), 2)
	if err := env.w.Push(first, t0); err != nil {
		t.Fatal(err)
	}
	before, _ := env.w.State("www", "fra1")
	if before.State != StateUp {
		t.Fatalf("after the first push: %s, want up", before.State)
	}
	clock.Advance(time.Second)
	now := clock.Now()
	tests := []struct {
		name string
		r    Report
		want error
		msg  string
	}{
		{"from the future", rep(8, now.Add(2*time.Hour), 2), ErrReportFuture, "time: 2h0m0s ahead of dnsd's clock"},
		{"stale", rep(8, now.Add(-2*time.Hour), 2), ErrReportStale, "time: 2h0m0s behind dnsd's clock"},
		{"above 1000× the configured capacity", func() Report { r := rep(8, now, 20e3); r.Capacity = 1e9; return r }(),
			ErrAbsurdLoad, "load: 200000 is more than 1000× the capacity 100"},
		{"the newest report's seq and time, another load", rep(7, first.Time, 3), ErrReportOutOfOrder, "time: "},
		{"seq backwards, time too", rep(3, t0.Add(-2*time.Second), 2), ErrReportOutOfOrder, "seq: 3 after 7, and time: "},
		{"same time, next seq", rep(8, first.Time, 2), ErrReportOutOfOrder, "not after the newest report's"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := testutil.ToFloat64(env.w.met.pushes.WithLabelValues("www", "rejected"))
			err := env.w.Push(tt.r, now)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Push = %v, want %v saying %q", err, tt.want, tt.msg)
			}
			if got := testutil.ToFloat64(env.w.met.pushes.WithLabelValues("www", "rejected")); got != n+1 {
				t.Errorf("pushes_total{rejected} = %g, want %g", got, n+1)
			}
			after, _ := env.w.State("www", "fra1")
			if !sameStatus(before, after) {
				t.Errorf("a refused report changed the member:\n%+v\nwant\n%+v", after, before)
			}
		})
	}
	// The newest report itself again (a mirror's retry of a push whose
	// answer it lost) is taken with no effect.
	t.Run("the newest report again", func(t *testing.T) {
		n := testutil.ToFloat64(env.w.met.pushes.WithLabelValues("www", "duplicate"))
		if err := env.w.Push(first, now); err != nil {
			t.Fatalf("Push of the newest report again = %v, want nil", err)
		}
		if got := testutil.ToFloat64(env.w.met.pushes.WithLabelValues("www", "duplicate")); got != n+1 {
			t.Errorf("pushes_total{duplicate} = %g, want %g", got, n+1)
		}
		if after, _ := env.w.State("www", "fra1"); !sameStatus(before, after) {
			t.Errorf("a duplicate changed the member:\n%+v\nwant\n%+v", after, before)
		}
	})
}

// sameStatus compares what a push may change of a member's status.
func sameStatus(a, b MemberStatus) bool {
	ra, _ := json.Marshal(a.Report)
	rb, _ := json.Marshal(b.Report)
	return string(ra) == string(rb) && a.HasReport == b.HasReport && a.State == b.State &&
		a.LastChange.Equal(b.LastChange) && a.LastPush.Equal(b.LastPush) &&
		a.LastReason == b.LastReason && a.LastError == b.LastError
}

// TestWatcherPushRestartedMirror: seq starts again at 1 when a mirror
// restarts; its reports, newer in time, are taken, and its old ones are not.
func TestWatcherPushRestartedMirror(t *testing.T) {
	clock := newFakeClock(t0)
	env := newWatcherEnv(t, WatcherConfig{Now: clock.Now})
	if err := env.w.Add(MemberSpec{Group: "www", Member: "fra1", Interval: time.Second}); err != nil {
		t.Fatal(err)
	}
	rep := func(seq uint64, at time.Time) Report {
		return Report{Group: "www", Member: "fra1", Seq: seq, Time: at, R: float64(seq), Load: LoadOf(float64(seq), 0), Capacity: 100}
	}
	steps := []struct {
		name string
		r    Report
		want error
	}{
		{"first run", rep(41, t0), nil},
		{"first run, next", rep(42, t0.Add(time.Second)), nil},
		{"restarted: seq 1, newer time", rep(1, t0.Add(3*time.Second)), nil},
		{"restarted, next", rep(2, t0.Add(4*time.Second)), nil},
		{"the first run's report again", rep(42, t0.Add(time.Second)), ErrReportOutOfOrder},
		{"the new run's report again: a duplicate, taken with no effect", rep(2, t0.Add(4*time.Second)), nil},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			clock.Advance(time.Second)
			if err := env.w.Push(st.r, clock.Now()); !errors.Is(err, st.want) || st.want == nil && err != nil {
				t.Fatalf("Push = %v, want %v", err, st.want)
			}
		})
	}
	if st, _ := env.w.State("www", "fra1"); st.Report.Seq != 2 || !st.Report.Time.Equal(t0.Add(4*time.Second)) {
		t.Errorf("newest report seq %d at %s, want the restarted mirror's seq 2", st.Report.Seq, st.Report.Time)
	}
}

// TestWatcherPullClockOff: a member whose clock is far off is still
// probed: its pulled reports are taken, timed by the Watcher's clock and
// counted; one with an absurd load is a failed probe.
func TestWatcherPullClockOff(t *testing.T) {
	f := newFakeMirrors(t)
	tests := []struct {
		name    string
		at      time.Time // the mirror's clock
		load    float64
		ok      bool
		retimed float64
	}{
		{"clock right", time.Now(), 105, true, 0},
		{"clock two hours ahead", time.Now().Add(2 * time.Hour), 105, true, 1},
		{"clock a day behind", time.Now().Add(-24 * time.Hour), 105, true, 1},
		{"absurd load", time.Now(), 2e6, false, 0},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			member := string(rune('a' + i))
			url := f.add("www", member)
			b, _ := json.Marshal(Report{Group: "www", Member: member, Seq: 1, Time: tt.at, R: tt.load / 10, Load: tt.load, Capacity: 1000})
			f.member("www", member).body = b
			env := newWatcherEnv(t, WatcherConfig{Health: HealthConfig{Rise: 1, Fall: 1}})
			if err := env.w.Add(MemberSpec{Group: "www", Member: member, URL: url, Interval: 20 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			env.start(t)
			want := StateDown
			if tt.ok {
				want = StateUp
			}
			probetest.Until(t, 5*time.Second, env.stateIs(t, "member "+want.String(), "www", member, want))
			env.stop()
			st, _ := env.w.State("www", member)
			got := testutil.ToFloat64(env.w.met.retimed.WithLabelValues("www"))
			switch {
			case tt.ok && st.Report.Time.Sub(st.LastProbe).Abs() > time.Minute:
				t.Errorf("report timed %s, probe at %s: want the watcher's clock", st.Report.Time, st.LastProbe)
			case tt.retimed == 0 && got != 0, tt.retimed > 0 && got < tt.retimed:
				t.Errorf("retimed_reports_total = %g, want %g", got, tt.retimed)
			case !tt.ok && (st.LastReason != ReasonValidate || !strings.Contains(st.LastError, "load: 2e+06")):
				t.Errorf("failure %s %q, want validate naming load", st.LastReason, st.LastError)
			}
		})
	}
}
