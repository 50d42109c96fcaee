package dispatch

import (
	"fmt"
	"sync"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/scheduler"
)

// MaxDispatchers bounds the dispatchers whose redirect rates a group
// remembers; a report from one more replaces the one heard from longest
// ago.
const MaxDispatchers = 64

// dispatcherRates are the redirect rates each dispatcher of a group last
// reported, by member name: what a new report's rates are compared with.
type dispatcherRates struct {
	mu    sync.Mutex
	rates map[string]map[string]float64 // dispatcher → member → redirects per second
	order []string                      // dispatchers, the one heard from longest ago first
}

func newDispatcherRates() *dispatcherRates {
	return &dispatcherRates{rates: make(map[string]map[string]float64)}
}

// swap records rates as dispatcher's and returns what it reported before
// (nil: nothing).
func (r *dispatcherRates) swap(dispatcher string, rates map[string]float64) map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, ok := r.rates[dispatcher]
	if ok {
		for i, d := range r.order {
			if d == dispatcher {
				r.order = append(r.order[:i], r.order[i+1:]...)
				break
			}
		}
	} else if len(r.order) >= MaxDispatchers {
		delete(r.rates, r.order[0])
		r.order = r.order[1:]
	}
	r.order = append(r.order, dispatcher)
	r.rates[dispatcher] = rates
	return prev
}

// Redirects books a dispatcher's redirect rates (redirects per second by
// member name) on the group's members: the change of each rate since the
// dispatcher's previous report, 10 load units per redirect per second, as
// load that the member's own report does not show yet (its requests on
// its own host name). In the window model of dnsd's estimators that
// booking ramps out over the member's report window, as the member's
// report takes the change in; a rate that falls books a negative load.
// A member name that is not in the group is an error, and nothing of the
// report is booked; a member left out of the report is sent none.
func (d *Dispatcher) Redirects(group, dispatcher string, rates map[string]float64) error {
	g := d.groups()[dns.CanonicalName(group)]
	if g == nil {
		return fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
	}
	for name := range rates {
		if g.member(name) < 0 {
			return fmt.Errorf("%w: %s in %s", ErrUnknownMember, name, g.cfg.Name)
		}
	}
	own := make(map[string]float64, len(rates))
	for name, v := range rates {
		own[name] = sane(v)
	}
	prev := g.sent.swap(dispatcher, own)
	now := d.now()
	book := func(name string, delta float64) {
		i := g.member(name)
		if i < 0 || delta == 0 {
			return
		}
		load := scheduler.HiddenLoad(max(delta, -delta))
		for _, f := range g.fam {
			if f == nil || i >= len(f.pos) || f.pos[i] < 0 {
				continue
			}
			k := []int{f.pos[i]}
			if delta > 0 {
				f.est.Move(k, nil, 0, load, now, now)
			} else {
				f.est.Move(nil, k, 1, load, now, now)
			}
		}
	}
	for name, v := range own {
		book(name, v-prev[name])
	}
	for name, v := range prev {
		if _, ok := own[name]; !ok {
			book(name, -v)
		}
	}
	return nil
}

// sane maps what is not a rate (negative, NaN, infinite) to 0.
func sane(v float64) float64 {
	if !(v >= 0) || v > 1e9 {
		return 0
	}
	return v
}
