package group

import (
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler"
)

// sib is one sibling of a booking test's view: its name (host
// name.mirrors.example.org), capacity and reported load, in load units,
// and where it is.
type sib struct {
	name           string
	capacity, load float64
	lat, lon       float64
}

// bookingView is a view of siblings under policy, with the default
// watermarks (0.7, 0.9).
func bookingView(policy string, sibs ...sib) api.GroupView {
	v := api.GroupView{Name: "www.example.org.", Policy: policy}
	for _, s := range sibs {
		v.Members = append(v.Members, api.MemberView{
			MemberInfo: api.MemberInfo{
				Name: s.name, Host: s.name + ".mirrors.example.org", Capacity: s.capacity,
				Location: api.LocationView{Lat: ptr(s.lat), Lon: ptr(s.lon), Continent: "EU"},
			},
			State: "up", Load: s.load, Reported: t0.Add(-time.Second),
		})
	}
	return v
}

// tenSeconds is the booking of a group whose load reports take rates over
// the default 10 s window: 1 load unit per redirect.
var tenSeconds = BookingFor(10 * time.Second)

// redirectBurst makes n redirects on s at now, each picked for client
// and booked (unless book is false), and returns how many went to each
// member.
func redirectBurst(s *GroupSnapshot, client scheduler.Client, n int, rnd *rand.Rand, now time.Time, book bool) map[string]int {
	got := make(map[string]int)
	for range n {
		_, member, ok := s.Pick(client, rnd, now, true)
		if !ok {
			continue
		}
		got[member]++
		if book {
			s.Book(member, now)
		}
	}
	return got
}

var europe = scheduler.Client{Loc: scheduler.Location{Lat: 50.9, Lon: 6.9, HasCoords: true, Continent: "EU"}}

func TestBookingFor(t *testing.T) {
	tests := []struct {
		name     string
		window   time.Duration
		load     float64
		halfLife time.Duration
	}{
		// One request in a window of W raises r by 1/W, the load by 10/W.
		{"default window of 10s: 1 load unit", 0, 1, 6931471805 * time.Nanosecond},
		{"10s", 10 * time.Second, 1, 6931471805 * time.Nanosecond},
		{"1s", time.Second, 10, 693147180 * time.Nanosecond},
		{"200ms", 200 * time.Millisecond, 50, 138629436 * time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := BookingFor(tt.window)
			if math.Abs(b.Load-tt.load) > 1e-9 || (b.HalfLife-tt.halfLife).Abs() > time.Microsecond {
				t.Errorf("BookingFor(%v) = %+v, want load %g, half-life %v", tt.window, b, tt.load, tt.halfLife)
			}
		})
	}
	t.Run("zero fields take the defaults", func(t *testing.T) {
		s := snapshot(t, testView(nil), "fra1")
		if got := s.Booking(); got.Sent == nil || got.Load != BookingFor(0).Load || got.HalfLife != BookingFor(0).HalfLife || got.TimeConstant != DefaultTimeConstant {
			t.Errorf("booking %+v, want %+v", got, BookingFor(0))
		}
	})
}

// TestBookingSpread makes 100 redirects between two views, on a fixed
// clock (no decay, no new view): the bookings spread them over the
// siblings in proportion to their spare capacity, capacity × (high
// watermark for geo-load, 1 for least-load) − load, where without them
// least-load sends every one to the same sibling.
//
// least-load ranks by utilization, so with bookings it fills the least
// utilized sibling until it is level with the next, and so on: its shares
// are the spare-capacity shares when the siblings start at one
// utilization (the "equal utilization" cases), and otherwise what levels
// the utilizations (the "levels" case, where the expected counts are the
// water level's, not the spare-capacity shares). It is deterministic
// but for the order of ties, so the tolerance is ±2 redirects. geo-load
// draws with weights ∝ spare capacity, recomputed with the bookings, so
// its expected counts are the spare-capacity shares while the siblings
// stay below the low watermark. Its draws are random; the seed is fixed
// (PCG 7, 7), and the tolerance, ±15 redirects and at most 1.5× the due,
// held for every one of 20,000 seeds tried for both geo-load cases (the
// worst deviations were 14.3 and 11.0 redirects; the bookings' feedback
// narrows the spread: the RMS deviation of the three equal siblings is
// 3.4 redirects with bookings, 4.7 without).
func TestBookingSpread(t *testing.T) {
	type due map[string]float64 // expected redirects of 100, by member
	spareShares := func(high float64, sibs ...sib) due {
		d, sum := due{}, 0.0
		for _, s := range sibs {
			sum += s.capacity*high - s.load
		}
		for _, s := range sibs {
			d[s.name] = 100 * (s.capacity*high - s.load) / sum
		}
		return d
	}
	// One region: all within the 1000 km of one geo-load tier.
	fra := func(capacity, load float64) sib { return sib{"fra1", capacity, load, 50.11, 8.68} }
	ams := func(capacity, load float64) sib { return sib{"ams1", capacity, load, 52.37, 4.90} }
	bru := func(capacity, load float64) sib { return sib{"bru1", capacity, load, 50.85, 4.35} }

	tests := []struct {
		name   string
		policy string
		sibs   []sib
		due    due
		tol    float64 // redirects
		herd   bool    // without bookings every redirect goes to one sibling
	}{
		{"least-load, equal utilization, capacities 4:2:1", "least-load",
			[]sib{fra(400, 100), ams(200, 50), bru(100, 25)},
			spareShares(1, fra(400, 100), ams(200, 50), bru(100, 25)), 2, false},
		{"least-load, equal utilization, one just below the others", "least-load",
			[]sib{fra(200, 59), ams(200, 60), bru(200, 60)},
			spareShares(1, fra(200, 59), ams(200, 60), bru(200, 60)), 2, true},
		// fra1 at 0.1 takes the first 40 alone, up to the others' 0.3;
		// the last 60 level all three at 0.42: 64, 24, 12 (the spare
		// shares would be 46, 36, 18).
		{"least-load levels unequal utilizations", "least-load",
			[]sib{fra(200, 20), ams(200, 60), bru(100, 30)},
			due{"fra1": 64, "ams1": 24, "bru1": 12}, 2, true},
		{"geo-load, equal siblings of one region", "geo-load",
			[]sib{fra(100, 20), ams(100, 20), bru(100, 20)},
			spareShares(scheduler.DefaultHighWatermark, fra(100, 20), ams(100, 20), bru(100, 20)), 15, false},
		{"geo-load, two siblings, one 30% full", "geo-load",
			[]sib{fra(100, 0), ams(100, 30)},
			spareShares(scheduler.DefaultHighWatermark, fra(100, 0), ams(100, 30)), 15, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := bookingView(tt.policy, tt.sibs...)
			s, err := NewGroupSnapshot(v, "", t0, time.Minute, tenSeconds)
			if err != nil {
				t.Fatal(err)
			}
			got := redirectBurst(s, europe, 100, rand.New(rand.NewPCG(7, 7)), t0, true)
			for _, sb := range tt.sibs {
				n, want := float64(got[sb.name]), tt.due[sb.name]
				t.Logf("%s: %3.0f redirects, due %5.1f (spare-capacity share %5.1f), booked %5.1f load units, utilization %.3f → %.3f",
					sb.name, n, want, spareShares(policyHigh(tt.policy), tt.sibs...)[sb.name], s.Booked(sb.name, t0),
					sb.load/sb.capacity, (sb.load+s.Booked(sb.name, t0))/sb.capacity)
				if math.Abs(n-want) > tt.tol {
					t.Errorf("%s got %.0f of 100 redirects, want %.1f ± %.0f", sb.name, n, want, tt.tol)
				}
				if n > 1.5*want {
					t.Errorf("%s got %.0f of 100 redirects, more than 1.5× its due %.1f", sb.name, n, want)
				}
			}
			// Without bookings the picks see the same loads every time.
			fresh, err := NewGroupSnapshot(v, "", t0, time.Minute, tenSeconds)
			if err != nil {
				t.Fatal(err)
			}
			unbooked := redirectBurst(fresh, europe, 100, rand.New(rand.NewPCG(7, 7)), t0, false)
			t.Logf("without bookings: %v", unbooked)
			if top := maxCount(unbooked); tt.herd && top != 100 {
				t.Errorf("without bookings the busiest sibling got %d of 100, want all 100 (the herd the bookings break)", top)
			}
		})
	}
}

func policyHigh(policy string) float64 {
	if policy == "least-load" {
		return 1
	}
	return scheduler.DefaultHighWatermark
}

func maxCount(m map[string]int) int {
	top := 0
	for _, n := range m {
		top = max(top, n)
	}
	return top
}

// TestBookingNewView checks that a new view starts with no bookings: its
// loads are the ones that include the redirects booked on the old view.
func TestBookingNewView(t *testing.T) {
	old, err := NewGroupSnapshot(bookingView("least-load",
		sib{"fra1", 100, 0, 50.11, 8.68}, sib{"ams1", 100, 10, 52.37, 4.90}), "", t0, time.Minute, tenSeconds)
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		old.Book("fra1", t0)
	}
	if _, m, _ := old.Pick(europe, rand.New(rand.NewPCG(1, 1)), t0, false); m != "ams1" {
		t.Fatalf("with fra1 booked to 0.30, the pick is %s, want ams1 at 0.10", m)
	}
	tests := []struct {
		name string
		fra1 float64 // fra1's load in the new view
		want string
	}{
		{"the redirected clients arrived: fra1's load has them", 30, "ams1"},
		{"they did not: fra1 is the least loaded again", 0, "fra1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(time.Second)
			s, err := NewGroupSnapshot(bookingView("least-load",
				sib{"fra1", 100, tt.fra1, 50.11, 8.68}, sib{"ams1", 100, 10, 52.37, 4.90}), "", now, time.Minute, tenSeconds)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"fra1", "ams1"} {
				if b := s.Booked(m, now); b != 0 {
					t.Errorf("%s: %g booked on the new view, want 0", m, b)
				}
			}
			if _, m, _ := s.Pick(europe, rand.New(rand.NewPCG(1, 1)), now, false); m != tt.want {
				t.Errorf("pick %s, want %s", m, tt.want)
			}
		})
	}
}

// TestBookingDecays checks that bookings halve every half-life, so a
// sibling booked over its high watermark on a view that is never
// refreshed comes back.
func TestBookingDecays(t *testing.T) {
	s, err := NewGroupSnapshot(bookingView("geo-load",
		sib{"fra1", 100, 0, 50.11, 8.68}, sib{"ams1", 100, 60, 52.37, 4.90}), "", t0, time.Hour, tenSeconds)
	if err != nil {
		t.Fatal(err)
	}
	for range 190 {
		s.Book("fra1", t0) // 190 load units: fra1 at 1.9, over its high watermark
	}
	h := tenSeconds.HalfLife
	tests := []struct {
		name   string
		after  time.Duration
		booked float64
		want   string // ams1: fra1 is never picked; fra1: fra1 is picked too
	}{
		{"at once: fra1 full, ams1 has room", 0, 190, "ams1"},
		{"one half-life: still full", h, 95, "ams1"},
		{"two half-lives: fra1 has room again", 2 * h, 47.5, "fra1"},
		{"an hour: nothing left", time.Hour, 0, "fra1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0.Add(tt.after)
			if b := s.Booked("fra1", now); math.Abs(b-tt.booked) > 1e-6*max(1, tt.booked) {
				t.Errorf("booked %g, want %g", b, tt.booked)
			}
			// Many draws: geo-load draws fra1 with its spare capacity.
			got := redirectBurst(s, europe, 20, rand.New(rand.NewPCG(3, 3)), now, false)
			if tt.want == "ams1" && got["fra1"] != 0 {
				t.Errorf("picks %v: fra1, over its high watermark by bookings, was picked", got)
			}
			if tt.want == "fra1" && got["fra1"] == 0 {
				t.Errorf("picks %v: fra1 never picked, its bookings have decayed", got)
			}
		})
	}
	t.Run("not a candidate: ignored", func(t *testing.T) {
		s.Book("nope", t0)
		if b := s.Booked("nope", t0); b != 0 {
			t.Errorf("booked %g on a member not in the view", b)
		}
	})
}

// staticView is a ViewSource with a snapshot the test sets.
type staticView struct{ s *GroupSnapshot }

func (v *staticView) Snapshot() *GroupSnapshot { return v.s }

// TestRedirectorBooks drives the Redirector's ServeHTTP, a dispatcher and
// an overloaded member, on a fixed clock: every redirect is booked on the
// snapshot it was decided on, so 100 requests spread over the siblings
// by their spare capacity, and each is counted by its target member in
// transmirror_mirror_sibling_redirects_total, whose series come with the
// view (at 0, before any redirect) and go when a member leaves it.
func TestRedirectorBooks(t *testing.T) {
	sibs := []sib{{"fra1", 400, 100, 50.11, 8.68}, {"ams1", 200, 50, 52.37, 4.90}, {"bru1", 100, 25, 50.85, 4.35}}
	due := map[string]int{"fra1": 57, "ams1": 29, "bru1": 14} // least-load: capacity − load, equal utilization
	tests := []struct {
		name   string
		rules  RedirectRules
		self   string
		reason string
	}{
		{"dispatcher", RedirectRules{Group: "www.example.org", Host: "d.example.org", Dispatcher: true}, "", ReasonDispatch},
		{"overloaded member", RedirectRules{Group: "www.example.org", Host: "self.mirrors.example.org", Enabled: true,
			Law: LawWatermark, LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1}, "self", ReasonOverload},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := bookingView("least-load", append(sibs, sib{"self", 100, 500, 50.11, 8.68})...)
			s, err := NewGroupSnapshot(v, tt.self, t0, time.Minute, tenSeconds)
			if err != nil {
				t.Fatal(err)
			}
			view := &staticView{s}
			reg := prometheus.NewRegistry()
			var next http.Handler
			var load LoadSource
			if !tt.rules.Dispatcher {
				next = http.NotFoundHandler()
				load = fixedUtilization(2)
			}
			rd, err := NewRedirector(RedirectorOptions{
				Rules: tt.rules, Next: next, Load: load, View: view, Registerer: reg,
				Clock: func() time.Time { return t0 }, Rand: rand.New(rand.NewPCG(5, 5)),
			})
			if err != nil {
				t.Fatal(err)
			}
			const metric = "transmirror_mirror_sibling_redirects_total"
			if m := gatherLabels(t, reg, metric, "member"); len(m) != s.Candidates() {
				t.Errorf("series by member %v before any redirect, want one per candidate (%d)", m, s.Candidates())
			}
			got := make(map[string]int)
			for range 100 {
				w := httptest.NewRecorder()
				rd.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://www.example.org/f.iso", nil))
				if w.Code != http.StatusFound {
					t.Fatalf("status %d, want 302", w.Code)
				}
				u, err := url.Parse(w.Header().Get("Location"))
				if err != nil {
					t.Fatal(err)
				}
				got[strings.TrimSuffix(u.Hostname(), ".mirrors.example.org")]++
			}
			for _, sb := range sibs {
				n := got[sb.name]
				c := testutil.ToFloat64(rd.targets.vec.WithLabelValues(sb.name))
				t.Logf("%s: %d redirects (due %d), counted %g, booked %.1f", sb.name, n, due[sb.name], c, s.Booked(sb.name, t0))
				if n < due[sb.name]-2 || n > due[sb.name]+2 {
					t.Errorf("%s got %d of 100, want %d ± 2", sb.name, n, due[sb.name])
				}
				if c != float64(n) {
					t.Errorf("%s: %s{member=%q} = %g, want %d", sb.name, metric, sb.name, c, n)
				}
				if b := s.Booked(sb.name, t0); math.Abs(b-float64(n)*tenSeconds.Load) > 1e-9 {
					t.Errorf("%s: booked %g, want %d × %g", sb.name, b, n, tenSeconds.Load)
				}
			}
			if got["self"] != 0 {
				t.Errorf("%d redirects to the mirror itself", got["self"])
			}
			if n := testutil.ToFloat64(rd.redirects.WithLabelValues(tt.reason)); n != 100 {
				t.Errorf("transmirror_mirror_redirects_total{reason=%q} = %g, want 100", tt.reason, n)
			}

			// bru1 leaves the group: its series goes with the next view.
			v2 := bookingView("least-load", sibs[:2]...)
			if view.s, err = NewGroupSnapshot(v2, tt.self, t0, time.Minute, tenSeconds); err != nil {
				t.Fatal(err)
			}
			members := map[string]bool{}
			for _, m := range gatherLabels(t, reg, metric, "member") {
				members[m] = true
			}
			if members["bru1"] || !members["fra1"] || !members["ams1"] {
				t.Errorf("series by member %v after bru1 left, want fra1 and ams1", members)
			}
		})
	}
}

// fixedUtilization is a LoadSource at one utilization, of a mirror of
// capacity 100.
type fixedUtilization float64

func (u fixedUtilization) Read(time.Time) LoadReading {
	return LoadReading{Utilization: float64(u), Capacity: 100}
}

// gatherLabels returns the values of label over the series of the metric
// name in reg.
func gatherLabels(t *testing.T, reg *prometheus.Registry, name, label string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					out = append(out, l.GetValue())
				}
			}
		}
	}
	return out
}

// TestFairShareRedirectsSpread: under the fair-share law, 100 redirects
// between two views, 10 ms apart, spread over the siblings in proportion
// to their spare capacity (least-load), as the bookings make each
// redirect see the ones before; and a sibling is not sent more than its
// room below the target: with the clock stopped (100 redirects at once,
// a rate of 100/τ), each takes what fits under the target and the rest
// is served.
func TestFairShareRedirectsSpread(t *testing.T) {
	sibs := []sib{{"fra1", 4000, 1000, 50.11, 8.68}, {"ams1", 2000, 500, 52.37, 4.90}, {"bru1", 1000, 250, 50.85, 4.35}}
	due := map[string]int{"fra1": 57, "ams1": 29, "bru1": 14} // capacity − load: 3000, 1500, 750
	rules := RedirectRules{Group: "www.example.org", Host: "self.mirrors.example.org", Enabled: true,
		Law: LawFairShare, LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1}
	run := func(t *testing.T, sibs []sib, step time.Duration) (map[string]int, int, *GroupSnapshot, *Redirector, time.Time) {
		v := bookingView("least-load", append(sibs, sib{"self", 100, 500, 50.11, 8.68})...)
		s, err := NewGroupSnapshot(v, "self", t0, time.Minute, tenSeconds)
		if err != nil {
			t.Fatal(err)
		}
		flows := NewFlowMeter(time.Second)
		for range 2000 { // 2000 requests a second coming in, all redirectable
			flows.Note(t0, true, true)
		}
		now := t0
		rd, err := NewRedirector(RedirectorOptions{
			Rules: rules, Next: http.NotFoundHandler(), Load: fixedUtilization(2), Flows: flows,
			View: &staticView{s}, Clock: func() time.Time { return now }, Rand: rand.New(rand.NewPCG(5, 5)),
		})
		if err != nil {
			t.Fatal(err)
		}
		got, served := make(map[string]int), 0
		for range 100 {
			now = now.Add(step)
			w := httptest.NewRecorder()
			rd.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://www.example.org/f.iso", nil))
			if w.Code != http.StatusFound {
				served++
				continue
			}
			u, err := url.Parse(w.Header().Get("Location"))
			if err != nil {
				t.Fatal(err)
			}
			got[strings.TrimSuffix(u.Hostname(), ".mirrors.example.org")]++
		}
		return got, served, s, rd, now
	}
	t.Run("100 redirects in a second", func(t *testing.T) {
		got, served, _, _, _ := run(t, sibs, 10*time.Millisecond)
		t.Logf("redirects %v, served %d", got, served)
		if served != 0 {
			t.Errorf("%d requests served, want all 100 redirected (the siblings have room)", served)
		}
		for _, sb := range sibs {
			if n := got[sb.name]; n < due[sb.name]-3 || n > due[sb.name]+3 {
				t.Errorf("%s got %d of 100, want %d ± 3 (its share of the spare capacity)", sb.name, n, due[sb.name])
			}
		}
	})
	t.Run("100 at once: each sibling up to the limit", func(t *testing.T) {
		// A tenth of the capacity: the target is the fair utilization
		// (175 + 500) / 800 = 0.84, and this mirror (capacity 100) serves
		// what the siblings can not take, which raises the limit with it
		// (SiblingLimit). Coming in at 20× its capacity it is measurably
		// over its target (Overloaded), so a sibling may read up to its
		// serving figure's noise over the limit (PickWithin). No sibling
		// ends more than that and one redirect (10 load units at τ = 1 s)
		// over the limit.
		small := []sib{{"fra1", 400, 100, 50.11, 8.68}, {"ams1", 200, 50, 52.37, 4.90}, {"bru1", 100, 25, 50.85, 4.35}}
		got, served, s, rd, now := run(t, small, 0)
		limit := SiblingLimit(rules, Correction{Flows: rd.Flows().Flows(now), Capacity: 100, Fair: s.FairUtilization()})
		t.Logf("redirects %v, served %d, limit %.2f", got, served, limit)
		if served == 0 {
			t.Errorf("all 100 redirected at once: the siblings took more than their room")
		}
		for _, sb := range small {
			i := s.index[sb.name]
			if u := s.Serving(i, now); u > limit+s.servingNoise(i)+10/sb.capacity+1e-9 {
				t.Errorf("%s at %.3f after %d redirects, over the limit %.3f and its noise %.3f", sb.name, u, got[sb.name], limit, s.servingNoise(i))
			}
		}
	})
}
