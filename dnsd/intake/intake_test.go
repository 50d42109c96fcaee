package intake_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/transmirror/transmirror/dnsd/intake"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// countingWatcher is a watcher that counts the reports it is handed.
type countingWatcher struct {
	w     *probe.Watcher
	calls int
}

func (c *countingWatcher) Push(r probe.Report, now time.Time) error {
	c.calls++
	return c.w.Push(r, now)
}

// noRedirects books nothing.
type noRedirects struct{ calls int }

func (n *noRedirects) Redirects(string, string, time.Time, map[string]float64) error {
	n.calls++
	return nil
}

type env struct {
	in    *intake.Intake
	watch *countingWatcher
	redir *noRedirects
	reg   *prometheus.Registry
	now   time.Time
}

// newEnv is an intake for testenv's group www.example.org. (fra1,
// push-only, capacity 1000) in front of a real watcher that watches fra1,
// at a fixed clock.
func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(testenv.Zone), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(testenv.Config("")), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{reg: prometheus.NewRegistry(), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), redir: &noRedirects{}}
	h := set.Config.Health
	w, err := probe.NewWatcher(probe.WatcherConfig{Registerer: e.reg, Rand: rand.New(rand.NewPCG(1, 2)),
		Now:    func() time.Time { return e.now },
		Health: probe.HealthConfig{Rise: 1, Fall: 3, FlapLimit: -1, ReportMaxSkew: h.ReportMaxSkew.D(), ReportMaxAge: h.ReportMaxAge.D()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Add(probe.MemberSpec{Group: "www.example.org.", Member: "fra1", Capacity: 1000}); err != nil {
		t.Fatal(err)
	}
	e.watch = &countingWatcher{w: w}
	e.in, err = intake.New(intake.Options{Groups: func() *zones.Set { return set }, Watcher: e.watch, Redirects: e.redir,
		Now: func() time.Time { return e.now }, Registry: e.reg})
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := promlint.NewWithMetricFamilies(testenv.Gather(t, e.reg)).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
	return e
}

// refused is transmirror_dnsd_reports_refused_total by reason, and its sum.
func (e *env) refused(t *testing.T) (map[string]float64, float64) {
	t.Helper()
	out, sum := map[string]float64{}, 0.0
	for _, mf := range testenv.Gather(t, e.reg) {
		if mf.GetName() != "transmirror_dnsd_reports_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
			sum += m.GetCounter().GetValue()
		}
	}
	return out, sum
}

func report(seq uint64, at time.Time, r float64) probe.Report {
	return probe.Report{Group: "www.example.org.", Member: "fra1", Seq: seq, Time: at, R: r, Load: probe.LoadOf(r, 0), Capacity: 1000}
}

func body(t *testing.T, r probe.Report) []byte {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRefusedOnce: a pushed report is refused for each reason once: the
// intake's own refusals (the body, the group, the member, the route's
// member; and those the admin API made before, a signature's) never reach
// the watcher; those that judge time, load and order reach the watcher
// once and no other check. Each is counted once, under its reason alone,
// and changes nothing of the member (its report, its health, the time of
// its last push).
func TestRefusedOnce(t *testing.T) {
	e := newEnv(t)
	accepted := report(5, e.now.Add(-time.Second), 2)
	if err := e.in.Load("www.example.org", "fra1", body(t, accepted)); err != nil {
		t.Fatalf("good push: %v", err)
	}
	before, _ := e.watch.w.State("www.example.org.", "fra1")
	if before.State != probe.StateUp || !before.HasReport {
		t.Fatalf("after a good push: %s, report %v; want up with a report", before.State, before.HasReport)
	}
	now := e.now
	absurd := probe.Report{Group: "www.example.org.", Member: "fra1", Seq: 6, Time: now, R: 2e5, Load: 2e6, Capacity: 1e9}
	other := report(6, now, 2)
	other.Member = "nyc1"
	cases := []struct {
		name          string
		group, member string
		body          []byte // nil: refused by the admin API before, for signed
		signed        string
		reason        string
		watcherJudges bool
		want          error
	}{
		{"malformed JSON", "www.example.org", "fra1", []byte(`{"group":`), "", intake.RefusedInvalid, false, probe.ErrReportSyntax},
		{"NaN", "www.example.org", "fra1", []byte(strings.Replace(string(body(t, report(6, now, 2))), `"r":2`, `"r":NaN`, 1)), "", intake.RefusedInvalid, false, probe.ErrReportSyntax},
		{"unknown field", "www.example.org", "fra1", []byte(strings.Replace(string(body(t, report(6, now, 2))), `{`, `{"x":1,`, 1)), "", intake.RefusedInvalid, false, probe.ErrReportSyntax},
		{"negative", "www.example.org", "fra1", body(t, report(6, now, -1)), "", intake.RefusedInvalid, false, probe.ErrInvalidReport},
		{"another member's report", "www.example.org", "fra1", body(t, other), "", intake.RefusedInvalid, false, intake.ErrWrongMember},
		{"unknown group", "nope.example.org", "fra1", body(t, report(6, now, 2)), "", intake.RefusedUnknownGroup, false, zones.ErrUnknownGroup},
		{"unknown member", "www.example.org", "ghost", body(t, report(6, now, 2)), "", intake.RefusedUnknownMember, false, probe.ErrUnknownMember},
		{"bad signature", "", "", nil, "bad_signature", intake.RefusedUnauthenticated, false, nil},
		{"no secret", "", "", nil, "no_secret", intake.RefusedUnauthenticated, false, nil},
		{"signature too old", "", "", nil, "stale", intake.RefusedStale, false, nil},
		{"signature from the future", "", "", nil, "future", intake.RefusedFuture, false, nil},
		{"body too large", "", "", nil, "too_large", intake.RefusedInvalid, false, nil},
		{"signature of an unknown group", "", "", nil, "unknown_group", intake.RefusedUnknownGroup, false, nil},
		{"from the future", "www.example.org", "fra1", body(t, report(6, now.Add(2*time.Hour), 2)), "", intake.RefusedFuture, true, probe.ErrReportFuture},
		{"stale", "www.example.org", "fra1", body(t, report(6, now.Add(-2*time.Hour), 2)), "", intake.RefusedStale, true, probe.ErrReportStale},
		{"above 1000× the capacity", "www.example.org", "fra1", body(t, absurd), "", intake.RefusedAbsurdLoad, true, probe.ErrAbsurdLoad},
		{"out of order", "www.example.org", "fra1", body(t, report(2, now.Add(-3*time.Second), 2)), "", intake.RefusedOutOfOrder, true, probe.ErrReportOutOfOrder},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.reason] = true
		t.Run(tc.name, func(t *testing.T) {
			counts, sum := e.refused(t)
			calls := e.watch.calls
			if tc.body == nil {
				e.in.Refused(tc.signed)
			} else if err := e.in.Load(tc.group, tc.member, tc.body); !errors.Is(err, tc.want) {
				t.Fatalf("Load = %v, want %v", err, tc.want)
			}
			after, afterSum := e.refused(t)
			if after[tc.reason] != counts[tc.reason]+1 || afterSum != sum+1 {
				t.Errorf("refused{%s} %g → %g, all %g → %g; want one more, under %s alone",
					tc.reason, counts[tc.reason], after[tc.reason], sum, afterSum, tc.reason)
			}
			want := calls
			if tc.watcherJudges {
				want++
			}
			if e.watch.calls != want {
				t.Errorf("the watcher was handed %d reports, want %d", e.watch.calls-calls, want-calls)
			}
			st, _ := e.watch.w.State("www.example.org.", "fra1")
			if !reflect.DeepEqual(st.Report, before.Report) || st.State != before.State || !st.LastPush.Equal(before.LastPush) || !st.LastChange.Equal(before.LastChange) {
				t.Errorf("a refused report changed fra1:\n%+v\nwant\n%+v", st, before)
			}
		})
	}
	for _, r := range intake.Reasons {
		if !seen[r] {
			t.Errorf("no case refuses for %s", r)
		}
	}
	// A reason of the admin API's that is no fault of the sender's is not
	// a refused report.
	_, sum := e.refused(t)
	e.in.Refused("bad_token")
	e.in.Refused("other")
	if _, after := e.refused(t); after != sum {
		t.Errorf("refused %g → %g for reasons that are not the sender's", sum, after)
	}
}

// TestRedirect: a dispatcher's redirect report enters by the same door:
// checked here (its figures, its group, its time), booked once.
func TestRedirect(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name  string
		group string
		r     api.RedirectReport
		want  error
		books int
	}{
		{"good", "www.example.org", api.RedirectReport{Dispatcher: "d1", Time: e.now, Members: map[string]float64{"fra1": 1}}, nil, 1},
		{"unknown group", "nope.example.org", api.RedirectReport{Dispatcher: "d1", Time: e.now}, zones.ErrUnknownGroup, 0},
		{"invalid", "www.example.org", api.RedirectReport{Dispatcher: "d1", Time: e.now, Members: map[string]float64{"fra1": -1}}, probe.ErrInvalidReport, 0},
		{"from the future", "www.example.org", api.RedirectReport{Dispatcher: "d1", Time: e.now.Add(time.Hour)}, probe.ErrReportFuture, 0},
		{"stale", "www.example.org", api.RedirectReport{Dispatcher: "d1", Time: e.now.Add(-time.Hour)}, probe.ErrReportStale, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := e.redir.calls
			if err := e.in.Redirect(tt.group, tt.r); !errors.Is(err, tt.want) {
				t.Fatalf("Redirect = %v, want %v", err, tt.want)
			}
			if got := e.redir.calls - n; got != tt.books {
				t.Errorf("booked %d times, want %d", got, tt.books)
			}
		})
	}
	if got := testutil.CollectAndCount(e.reg, "transmirror_dnsd_reports_refused_total"); got != len(intake.Reasons) {
		t.Errorf("%d series of reports_refused_total, want %d", got, len(intake.Reasons))
	}
}
