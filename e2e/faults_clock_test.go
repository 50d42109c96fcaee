package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestFaultClockFarOff is the fault "a mirror whose clock is far off",
// with the real binaries: the mirror fra9 serves its load report (pulled
// by dnsd) and pushes nothing itself; the test pushes for it as a mirror
// whose clock is two hours off would, both with report times off and with
// the whole clock off (the signature too). Every push is refused with a
// 4xx that names what is wrong, counted on dnsd's /metrics by reason, and
// changes nothing of fra9's figures; dnsd keeps probing fra9, which stays
// up on its pulled reports.
func TestFaultClockFarOff(t *testing.T) {
	const (
		secret = "e2e-group-secret"
		group  = "www.example.test."
	)
	dir := t.TempDir()
	d := startMembersDNSD(t, dir)
	root := filepath.Join(dir, "fra9-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	// No dnsd block: this mirror pushes nothing; run_queue none keeps its
	// load at 0 while nobody asks it for anything.
	m := runMirror(t, writeFile(t, dir, "fra9.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: fra9
host: fra9.mirrors.example.test
root: %s
capacity: 1000
run_queue: none
`, root)), "fra9")
	if out, err := groupctl(t, d.Admin, secret, "add", "www.example.test", "-name", "fra9", "-host", "fra9.mirrors.example.test",
		"-addr", "127.0.9.1", "-capacity", "1000", "-probe", "http://"+m.Admin+"/v1/load"); err != nil {
		t.Fatalf("groupctl add: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := func(clock func() time.Time) *api.Client {
		c, err := api.NewClient("http://"+d.Admin, api.ClientOptions{Secret: []byte(secret), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	onTime := client(time.Now)
	fra9 := func() api.MemberView {
		t.Helper()
		v, err := onTime.Group(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		for _, mv := range v.Members {
			if mv.Name == "fra9" {
				return mv
			}
		}
		t.Fatalf("no fra9 in the view: %+v", v.Members)
		return api.MemberView{}
	}
	probes := func(text string) float64 {
		return metricSum(text, "transmirror_probe_probes_total", `group="`+group+`"`, `result="success"`)
	}
	probetest.Until(t, 10*time.Second, func() string {
		if mv := fra9(); mv.State != "up" || mv.LastReport == nil {
			return fmt.Sprintf("fra9 %s, last report %v: want up on its pulled reports", mv.State, mv.LastReport)
		}
		return ""
	})

	before := scrape(t, d.Admin)
	const load = 777.0 // no pulled report of the idle fra9 says this
	report := func(at time.Time) probe.Report {
		return probe.Report{Group: group, Member: "fra9", Seq: 1, Time: at, R: load / 10, Load: load, Capacity: 1000}
	}
	ahead := func() time.Time { return time.Now().Add(2 * time.Hour) }
	behind := func() time.Time { return time.Now().Add(-2 * time.Hour) }
	cases := []struct {
		name   string
		c      *api.Client
		at     func() time.Time
		code   int
		msg    string
		reason string
	}{
		{"report time two hours ahead", onTime, ahead, 400, "time: 2h0m0s ahead of dnsd's clock", "future"},
		{"report time two hours behind", onTime, behind, 400, "time: 2h0m0s behind dnsd's clock", "stale"},
		{"whole clock two hours ahead", client(ahead), ahead, 401, "signature timestamp in the future", "future"},
		{"whole clock two hours behind", client(behind), behind, 401, "signature timestamp too old", "stale"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.PushLoad(ctx, report(tc.at()))
			var se *api.StatusError
			if !errors.As(err, &se) || se.Code != tc.code || !strings.Contains(se.Message, tc.msg) {
				t.Fatalf("push = %v, want %d saying %q", err, tc.code, tc.msg)
			}
			t.Logf("refused: %d %s", se.Code, se.Message)
		})
	}
	after := scrape(t, d.Admin)
	for _, reason := range []string{"future", "stale"} {
		name, l := "transmirror_dnsd_reports_refused_total", `reason="`+reason+`"`
		if got := metricSum(after, name, l) - metricSum(before, name, l); got != 2 {
			t.Errorf("%s{%s} went up by %g, want 2", name, l, got)
		}
	}

	// Probed instead: fra9 stays up on pulls that go on after the refused
	// pushes, and its figures are the pulled ones, never the pushed.
	base := probes(after)
	probetest.Until(t, 10*time.Second, func() string {
		if n := probes(scrape(t, d.Admin)) - base; n < 3 {
			return fmt.Sprintf("%g successful probes of the group since the refused pushes, want 3", n)
		}
		return ""
	})
	mv := fra9()
	if mv.State != "up" {
		t.Errorf("fra9 %s after the refused pushes, want up (probed)", mv.State)
	}
	if lr := mv.LastReport; mv.Load == load || lr == nil || lr.Load == load || time.Since(lr.Time).Abs() > time.Minute {
		t.Errorf("fra9's figures took a refused report: load %v, last report %+v", mv.Load, lr)
	}
	t.Logf("fra9 after the refused pushes: %s, load %v, last report seq %d at %s (%s ago)",
		mv.State, mv.Load, mv.LastReport.Seq, mv.LastReport.Time.Format(time.RFC3339Nano), time.Since(mv.LastReport.Time).Round(time.Millisecond))
}
