package dispatch

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
)

// TestDispatcherRedirects: a dispatcher's redirect rates are booked on the
// members as the change since its previous report (10 load units per
// redirect per second), each dispatcher apart; a rate that falls books a
// negative load, a report of a member that is not in the group books
// nothing, and the booking ramps out over the member's report window.
func TestDispatcherRedirects(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	d, err := New(Options{Registry: prometheus.NewRegistry(), Now: func() time.Time { return now }, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Load(dispatchSetCap(t, "geo-load", "1000")); err != nil {
		t.Fatal(err)
	}
	const group = "www.example.org"
	for _, m := range []string{"fra1", "ams1"} {
		if err := d.SetHealth(group, m, Health{State: probe.StateUp, Load: 100, Reported: now, Window: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	pending := func(member string) float64 {
		t.Helper()
		live, ok := d.Live(group)
		if !ok {
			t.Fatal("no group")
		}
		return live[member].Pending
	}
	start := now
	steps := []struct {
		name       string
		dispatcher string
		at         time.Duration // the report's time, after start
		rates      map[string]float64
		after      time.Duration
		fra1, ams1 float64 // pending load afterwards
		err        error
	}{
		{"first report: its rates", "d1", 1, map[string]float64{"fra1": 10, "ams1": 2}, 0, 100, 20, nil},
		{"the same rates: nothing more", "d1", 2, map[string]float64{"fra1": 10, "ams1": 2}, 0, 100, 20, nil},
		{"the same report again: taken, nothing more", "d1", 2, map[string]float64{"fra1": 10, "ams1": 2}, 0, 100, 20, nil},
		{"an older report: refused, nothing booked", "d1", 1, map[string]float64{"fra1": 40}, 0, 100, 20, probe.ErrReportOutOfOrder},
		{"other rates at the same time: refused", "d1", 2, map[string]float64{"fra1": 40}, 0, 100, 20, probe.ErrReportOutOfOrder},
		{"a second dispatcher adds its own", "d2", 1, map[string]float64{"fra1": 5}, 0, 150, 20, nil},
		{"d1's rate to fra1 falls, ams1 left out", "d1", 3, map[string]float64{"fra1": 4}, 0, 90, 0, nil},
		{"an unknown member: nothing booked", "d1", 4, map[string]float64{"fra1": 50, "nope": 1}, 0, 90, 0, ErrUnknownMember},
		{"reports half a window later have half of it", "d2", 5 * time.Second, map[string]float64{"fra1": 5}, 5 * time.Second, 45, 0, nil},
	}
	for _, s := range steps {
		if s.after > 0 {
			now = now.Add(s.after)
			for _, m := range []string{"fra1", "ams1"} {
				if err := d.SetHealth(group, m, Health{State: probe.StateUp, Load: 100, Reported: now, Window: 10 * time.Second}); err != nil {
					t.Fatal(err)
				}
			}
		}
		err := d.Redirects(group, s.dispatcher, start.Add(s.at), s.rates)
		if !errors.Is(err, s.err) {
			t.Fatalf("%s: error %v, want %v", s.name, err, s.err)
		}
		if got := pending("fra1"); math.Abs(got-s.fra1) > 1 {
			t.Errorf("%s: fra1 pending %.1f, want %g", s.name, got, s.fra1)
		}
		if got := pending("ams1"); math.Abs(got-s.ams1) > 1 {
			t.Errorf("%s: ams1 pending %.1f, want %g", s.name, got, s.ams1)
		}
	}
	if err := d.Redirects("nope.example.org", "d1", now, nil); !errors.Is(err, dnsd.ErrUnknownGroup) {
		t.Errorf("unknown group: %v", err)
	}
}
