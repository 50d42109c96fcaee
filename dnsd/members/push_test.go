package members_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/dnsd/admin"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/probe"
)

// refusedCount is transmirror_dnsd_reports_refused_total{reason}.
func (e *ctlEnv) refusedCount(reason string) float64 {
	e.t.Helper()
	for _, mf := range testenv.Gather(e.t, e.reg) {
		if mf.GetName() != "transmirror_dnsd_reports_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" && l.GetValue() == reason {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	e.t.Fatalf("no transmirror_dnsd_reports_refused_total{reason=%q}", reason)
	return 0
}

// figures is what a push may change of fra1 in the group view.
func (e *ctlEnv) figures() string {
	e.t.Helper()
	v, err := e.ctl.View("www.example.org")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range v.Members {
		if m.Name == "fra1" {
			b, _ := json.Marshal(struct {
				Load     float64
				Reported time.Time
				Last     *probe.Report
			}{m.Load, m.Reported, m.LastReport})
			return string(b)
		}
	}
	e.t.Fatal("no fra1 in the view")
	return ""
}

// TestPushRefused: every report dnsd does not believe is refused with a
// 4xx naming the field, counted by reason, and changes nothing; a restarted
// mirror's reports (seq from 1 again, newer time) are taken.
func TestPushRefused(t *testing.T) {
	e := startCtl(t, t.TempDir(), testenv.Config("")) // fra1 is push-only, capacity 1000
	secret := []byte(testenv.Secret)
	const path = "/v1/groups/www.example.org./members/fra1/load"
	now := time.Now()
	report := func(seq uint64, at time.Time, r float64) []byte {
		b, err := json.Marshal(probe.Report{Group: "www.example.org.", Member: "fra1", Seq: seq, Time: at, R: r, Load: probe.LoadOf(r, 0), Capacity: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	t.Run("a refused first push changes nothing", func(t *testing.T) {
		code, body := e.call("POST", path, report(1, now.Add(2*time.Hour), 2), secret, now)
		if code != http.StatusBadRequest || !strings.Contains(body, "time: 2h0m0s ahead of dnsd's clock") {
			t.Fatalf("%d %s, want 400 naming time", code, body)
		}
		// Push-only, fra1 is watched from the start, unknown until a push
		// is believed.
		st, watched := e.watch.State("www.example.org.", "fra1")
		if !watched || st.State != probe.StateUnknown || st.HasReport || !st.LastPush.IsZero() {
			t.Errorf("fra1 after a refused first push: watched %v, %s, report %v, last push %s; want watched, unknown, none, none",
				watched, st.State, st.HasReport, st.LastPush)
		}
	})

	accepted := report(5, now.Add(-time.Second), 2)
	if code, body := e.call("POST", path, accepted, secret, now); code != http.StatusAccepted {
		t.Fatalf("good push: %d %s", code, body)
	}
	before := e.figures()
	st, _ := e.watch.State("www.example.org.", "fra1")
	lastPush := st.LastPush

	absurd, _ := json.Marshal(probe.Report{Group: "www.example.org.", Member: "fra1", Seq: 6, Time: now, R: 2e5, Load: 2e6, Capacity: 1e9})
	cases := []struct {
		name   string
		path   string
		body   []byte
		signed time.Time
		code   int
		msg    string
		reason string
	}{
		{"from the future", path, report(6, now.Add(2*time.Hour), 2), now, 400, "time: 2h0m0s ahead of dnsd's clock (at most 30s)", "future"},
		{"stale", path, report(6, now.Add(-2*time.Hour), 2), now, 400, "time: 2h0m0s behind dnsd's clock (at most 1m0s)", "stale"},
		{"above 1000× the configured capacity", path, absurd, now, 400, "load: 2e+06 is more than 1000× the capacity 1000", "absurd_load"},
		{"negative", path, report(6, now, -1), now, 400, "r: -1 is negative", "invalid"},
		{"NaN", path, []byte(strings.Replace(string(report(6, now, 2)), `"r":2`, `"r":NaN`, 1)), now, 400, "malformed report", "invalid"},
		{"the accepted report's seq and time with another load", path, report(5, now.Add(-time.Second), 3), now.Add(time.Second), 409, "time: ", "out_of_order"},
		{"seq backwards, older", path, report(2, now.Add(-3*time.Second), 2), now, 409, "seq: 2 after 5", "out_of_order"},
		{"larger than the body limit", path, append(report(6, now, 2), bytes.Repeat([]byte(" "), admin.MaxBody)...), now, 413, "body larger than", "invalid"},
		{"an unknown member", "/v1/groups/www.example.org./members/ghost/load", report(6, now, 2), now, 404, "unknown member", "unknown_member"},
		{"an unknown group", "/v1/groups/nope.example.org./members/fra1/load", report(6, now, 2), now, 404, "unknown group", "unknown_group"},
		{"signed by a clock two hours ahead", path, report(6, now.Add(2*time.Hour), 2), now.Add(2 * time.Hour), 401, "in the future", "future"},
		{"signed by a clock two hours behind", path, report(6, now.Add(-2*time.Hour), 2), now.Add(-2 * time.Hour), 401, "too old", "stale"},
		{"signed with another secret", path, report(6, now, 2), now, 401, "signature mismatch", "unauthenticated"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sec := secret
			if tc.reason == "unauthenticated" {
				sec = []byte("wrong")
			}
			n := e.refusedCount(tc.reason)
			code, body := e.call("POST", tc.path, tc.body, sec, tc.signed)
			if code != tc.code || !strings.Contains(body, tc.msg) {
				t.Errorf("%d %s; want %d with %q", code, body, tc.code, tc.msg)
			}
			if got := e.refusedCount(tc.reason); got != n+1 {
				t.Errorf("reports_refused_total{reason=%q} = %g, want %g", tc.reason, got, n+1)
			}
			if got := e.figures(); got != before {
				t.Errorf("a refused report changed fra1:\n%s\nwant\n%s", got, before)
			}
			if st, _ := e.watch.State("www.example.org.", "fra1"); !st.LastPush.Equal(lastPush) {
				t.Errorf("last push %s, want %s", st.LastPush, lastPush)
			}
		})
	}

	t.Run("a restarted mirror: seq 1, newer time", func(t *testing.T) {
		for seq := range uint64(2) {
			at := now.Add(time.Duration(seq+1) * time.Second)
			if code, body := e.call("POST", path, report(seq+1, at, 3), secret, now); code != http.StatusAccepted {
				t.Fatalf("seq %d: %d %s, want 202", seq+1, code, body)
			}
		}
		v, _ := e.ctl.View("www.example.org")
		if lr := v.Members[0].LastReport; lr == nil || lr.Seq != 2 || lr.Load != 30 {
			t.Errorf("last report %s, want the restarted mirror's seq 2", fmt.Sprint(lr))
		}
	})
}
