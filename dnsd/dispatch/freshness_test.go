package dispatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

// freshSet is dispatchSet's config with every member in each answer and
// max_lag: 1h.
func freshSet(t *testing.T) *zones.Set {
	t.Helper()
	dir := t.TempDir()
	mmdb, err := filepath.Abs(filepath.Join("..", "..", "scheduler", "geo", "testdata", "regions.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), []byte(dispatchZone), 0o644); err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer("MMDB", mmdb, "POLICY", "weighted", "CAP", "100000", "BW", "0",
		"    answers: 1\n", "    answers: 6\n    max_lag: 1h\n").Replace(dispatchConfig)
	if err := os.WriteFile(filepath.Join(dir, "dnsd.yaml"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// TestDispatcherLagging: a member whose generation is more than max_lag
// behind the newest leaves the answers as "lagging" (in its state, the
// explanation and the metrics) and comes back with the report of its
// next sync; when every member that could be answered lags, the freshest
// of them are answered and that is counted.
func TestDispatcherLagging(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	reg := prometheus.NewRegistry()
	var flips []string
	d, err := New(Options{Registry: reg, Now: clock, Seed: 42, OnLagging: func(g, m string, on bool, lag time.Duration) {
		flips = append(flips, fmt.Sprintf("%s %v %s", m, on, lag))
	}})
	if err != nil {
		t.Fatal(err)
	}
	set := freshSet(t)
	all := []string{"fra1", "ams1", "nyc1", "sfo1", "sin1", "tyo1"}
	ago := func(h float64) time.Time { return now.Add(-time.Duration(h * float64(time.Hour))) }
	for _, step := range []struct {
		name     string
		drained  []string
		gens     map[string]time.Time // the others: now
		want     []string             // members answered
		failOpen bool
	}{
		{"all fresh", nil, nil, all, false},
		{"fra1 two hours behind", nil, map[string]time.Time{"fra1": ago(2)}, all[1:], false},
		{"fra1 synced", nil, map[string]time.Time{"fra1": ago(0.1)}, all, false},
		{"all but the drained fra1 behind: the freshest", []string{"fra1"},
			map[string]time.Time{"ams1": ago(3), "nyc1": ago(2), "sfo1": ago(2), "sin1": ago(4), "tyo1": ago(3)},
			[]string{"nyc1", "sfo1"}, true},
		{"back to fresh", nil, nil, all, false},
	} {
		t.Run(step.name, func(t *testing.T) {
			commit, err := d.PrepareMembers(set, map[string][]string{"www.example.org.": step.drained})
			if err != nil {
				t.Fatal(err)
			}
			commit()
			now = now.Add(time.Second)
			for _, m := range all {
				gen, ok := step.gens[m]
				if !ok {
					gen = now
				}
				if err := d.SetHealth("www.example.org.", m, Health{State: probe.StateUp, Reported: now, Generation: gen}); err != nil {
					t.Fatal(err)
				}
			}
			got := answered(t, d)
			if !slices.Equal(got, sorted(step.want)) {
				t.Errorf("answered %v, want %v", got, sorted(step.want))
			}
			if d.LaggingFailOpen("www.example.org") != step.failOpen {
				t.Errorf("lag fail-open %v, want %v", !step.failOpen, step.failOpen)
			}
			live, _ := d.Live("www.example.org.")
			for _, m := range all {
				st := live[m].State
				wantLag := !slices.Contains(step.want, m) && !slices.Contains(step.drained, m)
				if (st.Name() == StateLagging) != wantLag {
					t.Errorf("%s: state %s", m, st.Name())
				}
				lagging := gauge(t, reg, "transmirror_dnsd_member_lagging", m)
				if (lagging == 1) != wantLag {
					t.Errorf("%s: member_lagging %v", m, lagging)
				}
			}
		})
	}
	if n := testutil.ToFloat64(d.lagFailOpen.WithLabelValues("www.example.org.")); n == 0 {
		t.Error("lag fail-open answers not counted")
	}
	// Each flip reported once, as the reports come one by one: fra1 out
	// with the report that put it 2 h behind, back with its next; every
	// member that went out came back by the end.
	if len(flips) < 2 || flips[0] != "fra1 true 2h0m1s" || !strings.HasPrefix(flips[1], "fra1 false") {
		t.Errorf("flips reported: %q", flips)
	}
	out := testutil.ToFloat64(d.lagChanges.WithLabelValues("www.example.org.", StateLagging))
	back := testutil.ToFloat64(d.lagChanges.WithLabelValues("www.example.org.", "caught_up"))
	if out < 5 || out != back || int(out+back) != len(flips) {
		t.Errorf("member_lag_changes_total: %v lagging, %v caught up, %d flips reported", out, back, len(flips))
	}
}

// answered returns the members named by a few A answers, sorted.
func answered(t *testing.T, d *Dispatcher) []string {
	t.Helper()
	byAddr := map[string]string{"10.0.1.1": "fra1", "10.0.1.2": "ams1", "10.0.2.1": "nyc1", "10.0.2.2": "sfo1", "10.0.3.1": "sin1", "10.0.3.2": "tyo1"}
	seen := map[string]bool{}
	for range 20 {
		ans, err := d.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range ans.Addrs {
			seen[byAddr[a.String()]] = true
		}
	}
	var out []string
	for m := range seen {
		out = append(out, m)
	}
	return sorted(out)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// gauge returns the value of the gauge name for member, gathered from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name, member string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "member" && l.GetValue() == member {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s for %s", name, member)
	return 0
}

// TestDispatcherMaster: with a master, the newest is the master's
// generation: members all 2 h behind it lag (the freshest answered, fail
// open), and the master's going away makes the freshest member the newest.
func TestDispatcherMaster(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d, err := New(Options{Registry: prometheus.NewRegistry(), Now: func() time.Time { return now }, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Load(freshSet(t)); err != nil {
		t.Fatal(err)
	}
	all := []string{"fra1", "ams1", "nyc1", "sfo1", "sin1", "tyo1"}
	for i, m := range all {
		gen := now.Add(-2 * time.Hour)
		if i > 0 {
			gen = gen.Add(-time.Minute) // fra1 is the freshest
		}
		if err := d.SetHealth("www.example.org.", m, Health{State: probe.StateUp, Reported: now, Generation: gen}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		name     string
		master   time.Time
		want     []string
		failOpen bool
	}{
		{"no master", time.Time{}, all, false},
		{"master 2h ahead", now, []string{"fra1"}, true},
		{"master within max_lag", now.Add(-90 * time.Minute), all, false},
		{"master gone", time.Time{}, all, false},
	} {
		t.Run(step.name, func(t *testing.T) {
			if err := d.SetMaster("www.example.org", step.master); err != nil {
				t.Fatal(err)
			}
			if got := answered(t, d); !slices.Equal(got, sorted(step.want)) {
				t.Errorf("answered %v, want %v", got, sorted(step.want))
			}
			if d.LaggingFailOpen("www.example.org.") != step.failOpen {
				t.Errorf("lag fail-open %v, want %v", !step.failOpen, step.failOpen)
			}
		})
	}
	if err := d.SetMaster("nope.example.org", now); err == nil {
		t.Error("SetMaster of an unknown group: no error")
	}
}
