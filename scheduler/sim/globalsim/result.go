package globalsim

import (
	"time"
)

// Result is what a run measured over its counted requests (those after
// the warm-up).
type Result struct {
	// Mirrors names the mirrors, in Config order; Served is what each
	// served (after redirects), Arrived what DNS sent each (the first
	// hop).
	Mirrors         []string
	Requests        int
	Served, Arrived []int
	// Redirected is the requests that were redirected (each at most
	// once); NotFound those that ended in a 404 (a mirror without the
	// file, and no rescue); Queries the questions the resolvers asked
	// dnsd, over the whole run.
	Redirected, NotFound, Queries int
	// Busiest is the most loaded mirror's served requests over its fair
	// share (the requests times its share of the capacity); ArrivedBusiest
	// the same of what DNS sent (before correction).
	Busiest, ArrivedBusiest float64
	// Bins are the counted time in bins of Config.Bin; MeanBin and
	// WorstBin the mean and the worst of their Busiest.
	Bins              []Bin
	MeanBin, WorstBin float64
	// MeanKm is the mean great-circle distance from a client to the
	// mirror that served it.
	MeanKm float64
}

// Bin is one bin of a run.
type Bin struct {
	Start   time.Duration // since the end of the warm-up
	Served  []int
	Busiest float64
}

// accumulator counts a run as it goes.
type accumulator struct {
	begin, counted  time.Time // the first request; the end of the warm-up
	requests        int
	redirected      int
	notFound        int
	queries         int
	served, arrived []int
	bins            [][]int
	km              float64
}

func (a *accumulator) start(s *sim, at time.Time) {
	a.begin, a.counted = at, at.Add(s.c.Warmup)
	a.served, a.arrived = make([]int, len(s.mirrors)), make([]int, len(s.mirrors))
}

// note counts one request that DNS sent to first and by served (or
// answered 404).
func (a *accumulator) note(s *sim, first, by int, redirected, notFound bool, km float64) {
	if s.now.Before(a.counted) {
		return
	}
	a.requests++
	a.served[by]++
	a.arrived[first]++
	if redirected {
		a.redirected++
	}
	if notFound {
		a.notFound++
	}
	a.km += km
	b := 0
	if s.c.Bin > 0 {
		b = int(s.now.Sub(a.counted) / s.c.Bin)
	}
	for len(a.bins) <= b {
		a.bins = append(a.bins, make([]int, len(s.mirrors)))
	}
	a.bins[b][by]++
}

// result sums the run up.
func (a *accumulator) result(c Config, s *sim) Result {
	r := Result{Requests: a.requests, Served: a.served, Arrived: a.arrived, Redirected: a.redirected, NotFound: a.notFound, Queries: a.queries}
	for _, m := range c.Mirrors {
		r.Mirrors = append(r.Mirrors, m.Name)
	}
	if a.requests == 0 {
		return r
	}
	r.Busiest, r.ArrivedBusiest = busiest(c, a.served), busiest(c, a.arrived)
	r.MeanKm = a.km / float64(a.requests)
	for k, row := range a.bins {
		b := Bin{Start: time.Duration(k) * c.Bin, Served: row, Busiest: busiest(c, row)}
		r.Bins = append(r.Bins, b)
		r.MeanBin += b.Busiest / float64(len(a.bins))
		r.WorstBin = max(r.WorstBin, b.Busiest)
	}
	return r
}

// busiest is the largest of each mirror's count over its fair share of
// the total, by capacity (0 for no request).
func busiest(c Config, counts []int) float64 {
	total, capacity := 0, 0.0
	for i, n := range counts {
		total += n
		capacity += c.Mirrors[i].Capacity
	}
	if total == 0 || capacity == 0 {
		return 0
	}
	most := 0.0
	for i, n := range counts {
		most = max(most, float64(n)/(float64(total)*c.Mirrors[i].Capacity/capacity))
	}
	return most
}
