package dispatch

import (
	"math"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
)

// TestPendingBySource: each source of pending load books apart — this
// node's answers, the dispatchers' redirects, the other nodes' shares —
// and a pick sees their sum, floored once at −load; what the node shares
// (LocalPending) is its own answers' alone.
func TestPendingBySource(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const group = "www.example.org"
	cases := []struct {
		name      string
		own       float64 // load units booked on fra1 (A) by this node's answers
		redirects float64 // a dispatcher's redirects to fra1, per second
		nodes     float64 // what another node shares of fra1 (A)
		sum       float64 // fra1's pending load
		picked    bool    // fra1 (load 10) is picked over the others (load 50)
	}{
		{"none", 0, 0, 0, 0, true},
		{"own answers", 7, 0, 0, 7, true},
		{"redirects", 0, 5, 0, 50, false},
		{"other nodes", 0, 0, 45, 45, false},
		{"all three add up", 7, 5, 45, 102, false},
		{"below -load: floored once", 7, 0, -50, -10, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(Options{Registry: prometheus.NewRegistry(), Now: func() time.Time { return now }, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Load(dispatchSetCap(t, "least-load", "100")); err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"fra1", "ams1", "nyc1", "sfo1", "sin1", "tyo1"} {
				load := 50.0
				if m == "fra1" {
					load = 10
				}
				if err := d.SetHealth(group, m, Health{State: probe.StateUp, Load: load, Reported: now, Window: 10 * time.Second}); err != nil {
					t.Fatal(err)
				}
			}
			g := d.groups()["www.example.org."]
			f := g.fam[0]
			f.src[srcOwn].Move([]int{f.pos[g.member("fra1")]}, nil, 0, tc.own, now, now)
			if tc.redirects != 0 {
				if err := d.Redirects(group, "d1.example.org", now, map[string]float64{"fra1": tc.redirects}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.nodes != 0 {
				if err := d.SetRemotePending(group, "ns2", map[string]FamilyPending{"fra1": {tc.nodes, 0}}); err != nil {
					t.Fatal(err)
				}
			}
			// Live shows the larger family's: AAAA's 0 over a negative A.
			live, _ := d.Live(group)
			if got := live["fra1"].Pending; math.Abs(got-max(tc.sum, 0)) > 1e-9 {
				t.Errorf("Live pending %g, want %g", got, max(tc.sum, 0))
			}
			e, err := d.Explain(group, dns.TypeA, resolver, netip.Prefix{})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range e.Members {
				if m.Name == "fra1" && math.Abs(m.Pending-tc.sum) > 1e-9 {
					t.Errorf("Explain: A pending %g, want %g", m.Pending, tc.sum)
				}
			}
			if got := e.Answer[0] == "fra1"; got != tc.picked {
				t.Errorf("picked %v, want fra1 picked %v (pending %g)", e.Answer, tc.picked, tc.sum)
			}
			shared := d.LocalPending()["www.example.org."]
			want := map[string]FamilyPending{}
			if tc.own != 0 {
				want["fra1"] = FamilyPending{tc.own, 0}
			}
			if len(shared) != len(want) || shared["fra1"] != want["fra1"] {
				t.Errorf("shared %v, want %v (own answers only)", shared, want)
			}
		})
	}

	t.Run("an answer books on the own source alone", func(t *testing.T) {
		d, _ := newTestDispatcher(t, "least-load", func() time.Time { return now })
		if _, err := d.AnswerGroup(t.Context(), dnsd.GroupQuery{Group: "www.example.org.", Qtype: dns.TypeA, Client: resolver}); err != nil {
			t.Fatal(err)
		}
		f := d.groups()["www.example.org."].fam[0]
		for k := range f.idx {
			for s, e := range f.src {
				if p := e.Pending(k, now); s != srcOwn && p != 0 {
					t.Errorf("source %d: member %d pending %g after an answer, want 0", s, k, p)
				}
			}
		}
		if len(d.LocalPending()["www.example.org."]) == 0 {
			t.Error("nothing shared after an answer")
		}
	})
}
