package mirror

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
)

// skewSim is the TTL-skew scenario of the issue, in virtual time: four
// mirrors of equal capacity behind one group name, a dnsd that answers
// each resolver with the scheduler's geo-load policy from the mirrors'
// reports, and a resolver population where one resolver carries 60% of
// the requests and caches every answer for the TTL. Each mirror is the
// real public chain (Reporter → Redirector → content) on a virtual clock;
// a client follows a 302 to the sibling's own host name.
type skewSim struct {
	correct bool
	seed    uint64

	mirrors   int
	capacity  float64       // load units; 10 load units = 1 request/s
	rate      float64       // requests per second offered to the group
	heavy     float64       // share of the requests from resolver 0
	resolvers int           // how many resolvers in all
	ttl       time.Duration // answer TTL
	period    time.Duration // view and report interval
	duration  time.Duration
}

// skewResult is what a simulation served: per TTL period and mirror.
type skewResult struct {
	served    [][]int // [period][mirror]
	redirects int
}

// simView is a ViewSource that the simulation sets.
type simView struct{ s *GroupSnapshot }

func (v *simView) Snapshot() *GroupSnapshot { return v.s }

func (sim skewSim) run(t *testing.T) skewResult {
	t.Helper()
	now := t0
	clock := func() time.Time { return now }
	rnd := rand.New(rand.NewPCG(sim.seed, 1))
	name := func(i int) string { return fmt.Sprintf("m%d", i) }
	host := func(i int) string { return name(i) + ".mirrors.test" }

	periods := int(sim.duration / sim.ttl)
	res := skewResult{served: make([][]int, periods)}
	for p := range res.served {
		res.served[p] = make([]int, sim.mirrors)
	}
	period := 0

	type mirror struct {
		rep     *probe.Reporter
		view    *simView
		handler http.Handler
	}
	ms := make([]mirror, sim.mirrors)
	byHost := make(map[string]int)
	for i := range ms {
		rep, err := probe.NewReporter(probe.ReporterConfig{
			Group: testGroup, Member: name(i), Capacity: sim.capacity,
			RunQueue: func() (float64, error) { return 0, nil }, Clock: clock,
		})
		if err != nil {
			t.Fatal(err)
		}
		content := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			res.served[period][i]++
			w.WriteHeader(http.StatusOK)
		})
		view := &simView{}
		rd, err := NewRedirector(RedirectorOptions{
			Rules: RedirectRules{
				Group: testGroup, Host: host(i), Enabled: sim.correct,
				LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 0.8,
			},
			Next: content, Load: NewLoadMeter(rep, sim.capacity, 0, time.Second), View: view,
			Clock: clock, Rand: rand.New(rand.NewPCG(sim.seed, uint64(i)+2)),
		})
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = mirror{rep: rep, view: view, handler: rep.Wrap(rd)}
		byHost[host(i)] = i
	}

	// dnsd's side: every period the mirrors report and the view is built
	// again; dnsd answers from the same snapshot (self "": all members).
	var dnsView *GroupSnapshot
	refresh := func() {
		v := api.GroupView{Name: testGroup + ".", Policy: "geo-load", Watermarks: api.Watermarks{Low: 0.7, High: 0.9}}
		for i, m := range ms {
			r := m.rep.Snapshot(now)
			v.Members = append(v.Members, api.MemberView{
				MemberInfo: api.MemberInfo{Name: name(i), Host: host(i), Capacity: sim.capacity},
				State:      "up", Load: r.Load, Reported: r.Time,
			})
		}
		var err error
		if dnsView, err = NewGroupSnapshot(v, "", now, 3*sim.period, RedirectBooking{}); err != nil {
			t.Fatal(err)
		}
		for i, m := range ms {
			if m.view.s, err = NewGroupSnapshot(v, name(i), now, 3*sim.period, RedirectBooking{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	resolve := func() int {
		h, _, ok := dnsView.Pick(clientOf(RedirectRequest{}), rnd, now, true)
		if !ok {
			t.Fatal("dnsd: no member")
		}
		return byHost[h]
	}

	refresh()
	type cache struct {
		member  int
		expires time.Time
	}
	caches := make([]cache, sim.resolvers)
	for r := range caches {
		// The heavy resolver asks at 0; the others at random phases.
		caches[r] = cache{member: resolve(), expires: now.Add(time.Duration(rnd.Float64() * float64(sim.ttl)))}
	}
	caches[0].expires = now.Add(sim.ttl)

	send := func(m int, hostHeader string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "http://"+hostHeader+"/pool/f.iso", nil)
		req.RemoteAddr = "192.0.2.10:4321"
		w := httptest.NewRecorder()
		ms[m].handler.ServeHTTP(w, req)
		return w
	}
	nextRefresh := now.Add(sim.period)
	end := t0.Add(sim.duration)
	for {
		now = now.Add(time.Duration(rnd.ExpFloat64() / sim.rate * float64(time.Second)))
		if !now.Before(end) {
			break
		}
		period = int(now.Sub(t0) / sim.ttl)
		for !now.Before(nextRefresh) {
			refresh()
			nextRefresh = nextRefresh.Add(sim.period)
		}
		r := 0
		if rnd.Float64() >= sim.heavy {
			r = 1 + rnd.IntN(sim.resolvers-1)
		}
		if !now.Before(caches[r].expires) {
			caches[r] = cache{member: resolve(), expires: now.Add(sim.ttl)}
		}
		w := send(caches[r].member, testGroup)
		if w.Code == http.StatusFound {
			res.redirects++
			u, err := url.Parse(w.Header().Get("Location"))
			if err != nil {
				t.Fatal(err)
			}
			to, ok := byHost[u.Hostname()]
			if !ok || to == caches[r].member {
				t.Fatalf("redirect from %s to %q", name(caches[r].member), u.Hostname())
			}
			if w2 := send(to, u.Host); w2.Code != http.StatusOK {
				t.Fatalf("second hop to %s: %d", u.Host, w2.Code)
			}
		}
	}
	return res
}

// TestSkewCorrection is the "done when": one resolver carrying
// 60% of the requests with a 60 s TTL puts the mirror it is sent to at
// over twice its fair share; with 302 correction every mirror ends within
// 15% of its capacity share.
func TestSkewCorrection(t *testing.T) {
	base := skewSim{
		seed: 42, mirrors: 4, capacity: 100, rate: 32, heavy: 0.6, resolvers: 20,
		ttl: time.Minute, period: 5 * time.Second, duration: 10 * time.Minute,
	}
	fair := 1 / float64(base.mirrors) // equal capacities
	table := func(res skewResult) string {
		var b strings.Builder
		for p, row := range res.served {
			fmt.Fprintf(&b, "\n  %3ds-%3ds", p*60, (p+1)*60)
			for i, n := range row {
				fmt.Fprintf(&b, "  m%d %5d", i, n)
			}
		}
		return b.String()
	}

	t.Run("without correction", func(t *testing.T) {
		sim := base
		sim.correct = false
		res := sim.run(t)
		t.Logf("served per TTL period:%s", table(res))
		if res.redirects != 0 {
			t.Errorf("%d redirects with correction off", res.redirects)
		}
		for p, row := range res.served {
			total, top := 0, 0
			for _, n := range row {
				total += n
				top = max(top, n)
			}
			if ratio := float64(top) / float64(total) / fair; ratio <= 2 {
				t.Errorf("period %d: the busiest mirror served %.2f× its fair share, want > 2×", p, ratio)
			} else {
				t.Logf("period %d: busiest mirror at %.2f× its fair share", p, ratio)
			}
		}
	})
	t.Run("with correction", func(t *testing.T) {
		sim := base
		sim.correct = true
		res := sim.run(t)
		t.Logf("served per TTL period:%s", table(res))
		// The first TTL period is the warm-up: reports and views are
		// filling their windows.
		sums := make([]int, sim.mirrors)
		total := 0
		for _, row := range res.served[1:] {
			for i, n := range row {
				sums[i] += n
				total += n
			}
		}
		t.Logf("after warm-up: served %v of %d, %d redirects", sums, total, res.redirects)
		for i, n := range sums {
			share := float64(n) / float64(total)
			t.Logf("m%d: %.1f%% of the requests (capacity share %.1f%%)", i, 100*share, 100*fair)
			if math.Abs(share-fair) > 0.15*fair {
				t.Errorf("m%d served %.1f%%, want %.1f%% ± 15%%", i, 100*share, 100*fair)
			}
		}
	})
}
