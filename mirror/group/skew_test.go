package group

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler"
)

// skewSim is the TTL-skew scenario of the issue, in virtual time: four
// mirrors of equal capacity behind one group name, a dnsd that answers
// each resolver with the scheduler's geo-load policy from the mirrors'
// reports, and a resolver population where one resolver carries a large
// share of the requests and caches every answer for its TTL. Each mirror
// is the real public chain (Reporter → Redirector → content) on a
// virtual clock; a client follows a 302 to the sibling's own host name.
type skewSim struct {
	correct bool
	law     string // redirect.law ("": fair_share)
	// low, high and maxShare are the redirect rules' watermarks and
	// max_share (all 0: 0.5, 0.95 and 0.8).
	low, high, maxShare float64
	policy              string        // dnsd's global policy ("": geo-load)
	tau                 time.Duration // redirect.time_constant (0: the default)
	seed                uint64

	mirrors   int
	capacity  float64       // load units; 10 load units = 1 request/s
	rate      float64       // requests per second offered to the group
	heavy     float64       // share of the requests from resolver 0
	resolvers int           // how many resolvers in all
	ttl       time.Duration // answer TTL of the light resolvers
	heavyTTL  time.Duration // answer TTL of resolver 0 (0: ttl)
	period    time.Duration // view and report interval
	bin       time.Duration // the width of a result bin
	duration  time.Duration
}

// skewResult is what a simulation served: per bin and mirror.
type skewResult struct {
	served    [][]int // [bin][mirror]
	redirects int
	// arrived counts the requests that DNS sent each mirror (the first
	// hop), per second: [second][mirror]; moved the redirects per second.
	arrived [][]int
	moved   []int
}

// redirectsFrom is the number of redirects from the second warm on.
func (r skewResult) redirectsFrom(warm time.Duration) int {
	n := 0
	for _, m := range r.moved[int(warm/time.Second):] {
		n += m
	}
	return n
}

// needed is the fewest redirects that would have had every mirror serve
// the mean of what arrived in each second: the requests over the mean,
// summed over the seconds and the mirrors from the second warm on. A law
// that redirects much more than this sends clients on a second hop that
// evens out nothing.
func (r skewResult) needed(warm time.Duration) int {
	need := 0
	for _, row := range r.arrived[int(warm/time.Second):] {
		total := 0
		for _, n := range row {
			total += n
		}
		for _, n := range row {
			need += max(n*len(row)-total, 0) // ×len(row): in whole requests, exactly
		}
	}
	return need / len(r.arrived[0])
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

	if sim.low == 0 && sim.high == 0 && sim.maxShare == 0 {
		sim.low, sim.high, sim.maxShare = 0.5, 0.95, 0.8
	}
	if sim.policy == "" {
		sim.policy = "geo-load"
	}
	if sim.heavyTTL == 0 {
		sim.heavyTTL = sim.ttl
	}
	if sim.bin == 0 {
		sim.bin = sim.ttl
	}
	periods := int(sim.duration / sim.bin)
	res := skewResult{served: make([][]int, periods), arrived: make([][]int, int(sim.duration/time.Second)), moved: make([]int, int(sim.duration/time.Second))}
	for p := range res.served {
		res.served[p] = make([]int, sim.mirrors)
	}
	for p := range res.arrived {
		res.arrived[p] = make([]int, sim.mirrors)
	}
	period := 0

	type mirror struct {
		rep     *probe.Reporter
		view    *simView
		handler http.Handler
		rd      *Redirector
		sent    *SentMeter
	}
	ms := make([]mirror, sim.mirrors)
	byHost := make(map[string]int)
	for i := range ms {
		flows := NewFlowMeter(sim.tau)
		rep, err := probe.NewReporter(probe.ReporterConfig{
			Group: testGroup, Member: name(i), Capacity: sim.capacity,
			RunQueue: func() (float64, error) { return 0, nil }, Clock: clock, Serving: flows.Served,
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
				Group: testGroup, Host: host(i), Enabled: sim.correct, Law: sim.law,
				LowWatermark: sim.low, HighWatermark: sim.high, MaxShare: sim.maxShare,
			},
			Next: content, Load: NewLoadMeter(rep, sim.capacity, 0, time.Second), Flows: flows, View: view,
			Clock: clock, Rand: rand.New(rand.NewPCG(sim.seed, uint64(i)+2)),
		})
		if err != nil {
			t.Fatal(err)
		}
		ms[i] = mirror{rep: rep, view: view, handler: rep.Wrap(rd), rd: rd, sent: NewSentMeter(0)}
		byHost[host(i)] = i
	}

	// dnsd's side: every period the mirrors report and the view is built
	// again; dnsd answers from the same snapshot (self "": all members).
	var dnsView *GroupSnapshot
	refresh := func() {
		v := api.GroupView{Name: testGroup + ".", Policy: sim.policy, Watermarks: api.Watermarks{Low: 0.7, High: 0.9}}
		for i, m := range ms {
			r := m.rep.Snapshot(now)
			v.Members = append(v.Members, api.MemberView{
				MemberInfo: api.MemberInfo{Name: name(i), Host: host(i), Capacity: sim.capacity},
				State:      "up", Load: r.Load, Reported: r.Time, LastReport: &r,
			})
		}
		var err error
		if dnsView, err = NewGroupSnapshot(v, "", now, 3*sim.period, RedirectBooking{}); err != nil {
			t.Fatal(err)
		}
		for i, m := range ms {
			if m.view.s, err = NewGroupSnapshot(v, name(i), now, 3*sim.period, RedirectBooking{Sent: m.sent}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// dnsd books each answer's hidden load, the resolver's request rate,
	// on the member it names, as its calibrated estimator does.
	resolverRate := func(r int) float64 {
		if r == 0 {
			return sim.rate * sim.heavy
		}
		return sim.rate * (1 - sim.heavy) / float64(sim.resolvers-1)
	}
	resolve := func(r int) int {
		h, member, ok := dnsView.Pick(clientOf(RedirectRequest{}), rnd, now, true)
		if !ok {
			t.Fatal("dnsd: no member")
		}
		dnsView.booked.Add([]int{dnsView.index[member]}, probe.LoadOf(resolverRate(r), 0), now)
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
		caches[r] = cache{member: resolve(r), expires: now.Add(time.Duration(rnd.Float64() * float64(sim.ttl)))}
	}
	caches[0].expires = now.Add(sim.heavyTTL)

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
		period = int(now.Sub(t0) / sim.bin)
		for !now.Before(nextRefresh) {
			refresh()
			nextRefresh = nextRefresh.Add(sim.period)
		}
		r := 0
		if rnd.Float64() >= sim.heavy {
			r = 1 + rnd.IntN(sim.resolvers-1)
		}
		if !now.Before(caches[r].expires) {
			ttl := sim.ttl
			if r == 0 {
				ttl = sim.heavyTTL
			}
			caches[r] = cache{member: resolve(r), expires: now.Add(ttl)}
		}
		res.arrived[int(now.Sub(t0)/time.Second)][caches[r].member]++
		w := send(caches[r].member, testGroup)
		if w.Code == http.StatusFound {
			res.redirects++
			res.moved[int(now.Sub(t0)/time.Second)]++
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

// ratios returns, for the bins from warm on, the busiest mirror's served
// count over the mean in each bin and over all of them together (equal
// capacities: × its fair share).
func (r skewResult) ratios(warm int) (bins []float64, window float64) {
	sums := make([]int, len(r.served[0]))
	for _, row := range r.served[warm:] {
		total, top := 0, 0
		for i, n := range row {
			total += n
			top = max(top, n)
			sums[i] += n
		}
		bins = append(bins, float64(top)*float64(len(row))/float64(total))
	}
	total, top := 0, 0
	for _, n := range sums {
		total += n
		top = max(top, n)
	}
	return bins, float64(top) * float64(len(sums)) / float64(total)
}

func (r skewResult) table() string {
	var b strings.Builder
	for p, row := range r.served {
		fmt.Fprintf(&b, "\n  bin %2d", p)
		for i, n := range row {
			fmt.Fprintf(&b, "  m%d %5d", i, n)
		}
	}
	return b.String()
}

func meanWorst(xs []float64) (mean, worst float64) {
	for _, x := range xs {
		mean += x
		worst = max(worst, x)
	}
	return mean / float64(len(xs)), worst
}

// TestSkewCorrection is the scenario in virtual time: four mirrors
// of equal capacity at 70% of the group's capacity, 20 resolvers, one of
// them with 50% of the requests and a 20 s TTL (the others 45 s), views
// and reports every 250 ms. Without correction the mirror the heavy
// resolver is on serves about twice its fair share; with the fair-share
// law the busiest serves within 5% of its fair share over the run and
// within 25% in every 10 s bin after the first 30 s; the watermark law of
// earlier releases is logged for comparison. The fair-share law must also
// not get there by redirecting more than it needs: after the first 30 s at
// most 1.5× (with skew) and 1.75× (without) the redirects that would have
// had every mirror serve the mean of each second (skewResult.needed; the
// law takes 1.4× with skew and 1.5× without, 1.2× and 1.4× before a
// measurably overloaded mirror could send past the siblings' limit, one
// aimed at half its target 1.8× and 4×).
func TestSkewCorrection(t *testing.T) {
	base := skewSim{
		seed: 42, mirrors: 4, capacity: 1000, rate: 280, heavy: 0.5, resolvers: 20,
		ttl: 45 * time.Second, heavyTTL: 20 * time.Second, period: 250 * time.Millisecond,
		bin: 10 * time.Second, duration: 3 * time.Minute,
	}
	const warm = 3 // bins
	tests := []struct {
		name         string
		correct      bool
		law          string
		heavy        float64
		window, bins float64 // the bounds; 0: none
		moved        float64 // bound on the redirects after warm, × those needed; 0: none
		atLeast      float64 // the mean bin ratio is at least this (skew is there)
	}{
		{"skew, no correction", false, "", 0.5, 0, 0, 0, 1.6},
		{"skew, fair share", true, LawFairShare, 0.5, 1.05, 1.25, 1.5, 0},
		{"no skew, fair share", true, LawFairShare, 1.0 / 20, 1.05, 1.25, 1.75, 0},
		{"skew, watermark law", true, LawWatermark, 0.5, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sim := base
			sim.correct, sim.law, sim.heavy = tt.correct, tt.law, tt.heavy
			res := sim.run(t)
			bins, window := res.ratios(warm)
			mean, worst := meanWorst(bins)
			t.Logf("served per bin:%s", res.table())
			need, moved := res.needed(warm*sim.bin), res.redirectsFrom(warm*sim.bin)
			t.Logf("busiest/mean: window %.3f, bins mean %.3f, worst %.3f; %d redirects, after %v %d for %d needed (%.2f×)",
				window, mean, worst, res.redirects, warm*sim.bin, moved, need, float64(moved)/float64(need))
			if !tt.correct && res.redirects != 0 {
				t.Errorf("%d redirects with correction off", res.redirects)
			}
			if tt.window > 0 && window > tt.window {
				t.Errorf("the busiest mirror served %.3f× its fair share over the window, want ≤ %.2f", window, tt.window)
			}
			if tt.bins > 0 && worst > tt.bins {
				t.Errorf("the busiest mirror served %.3f× its fair share in a 10 s bin, want ≤ %.2f in every bin", worst, tt.bins)
			}
			if tt.moved > 0 && float64(moved) > tt.moved*float64(need) {
				t.Errorf("%d redirects after %v, want ≤ %.1f× the %d needed to even out each second: a law that aims too low passes the ratios by moving clients for nothing",
					moved, warm*sim.bin, tt.moved, need)
			}
			if mean < tt.atLeast {
				t.Errorf("bins mean %.3f, want ≥ %.2f: the scenario is not skewed", mean, tt.atLeast)
			}
		})
	}
}

// TestSkewDefaults is TestSkewCorrection's skewed scenario with nothing
// set but the group's policy: views and reports every DefaultViewInterval
// and DefaultPushInterval, the fair-share law with the group's default
// watermarks and DefaultMaxShare. Every global policy meets the targets
// with the defaults (2 s and 0.8 give 1.13× to 1.17× in the worst bin;
// 5 s gave 1.24× to 1.32×, a max_share of 0.5 1.38× to 1.44×).
func TestSkewDefaults(t *testing.T) {
	if DefaultPushInterval != DefaultViewInterval {
		t.Fatalf("the simulation has one period; the defaults are %v and %v", DefaultPushInterval, DefaultViewInterval)
	}
	const warm = 3 // bins
	for _, policy := range []string{"geo-load", "least-load", "weighted"} {
		t.Run(policy, func(t *testing.T) {
			sim := skewSim{
				seed: 42, mirrors: 4, capacity: 1000, rate: 280, heavy: 0.5, resolvers: 20,
				ttl: 45 * time.Second, heavyTTL: 20 * time.Second, period: DefaultViewInterval,
				bin: 10 * time.Second, duration: 3 * time.Minute, correct: true, policy: policy,
				low: scheduler.DefaultLowWatermark, high: scheduler.DefaultHighWatermark, maxShare: DefaultMaxShare,
			}
			res := sim.run(t)
			bins, window := res.ratios(warm)
			mean, worst := meanWorst(bins)
			need, moved := res.needed(warm*sim.bin), res.redirectsFrom(warm*sim.bin)
			t.Logf("%s: busiest/mean: window %.3f, bins mean %.3f, worst %.3f; after %v %d redirects for %d needed (%.2f×)",
				policy, window, mean, worst, warm*sim.bin, moved, need, float64(moved)/float64(need))
			if window > 1.05 {
				t.Errorf("the busiest mirror served %.3f× its fair share over the window, want ≤ 1.05", window)
			}
			if worst > 1.25 {
				t.Errorf("the busiest mirror served %.3f× its fair share in a 10 s bin, want ≤ 1.25 in every bin:%s", worst, res.table())
			}
			if float64(moved) > 1.5*float64(need) {
				t.Errorf("%d redirects after %v, want ≤ 1.5× the %d needed", moved, warm*sim.bin, need)
			}
		})
	}
}
