package dispatch

import (
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler"
)

// MaxDispatchers bounds the dispatchers whose redirect rates a group
// remembers; a report from one more replaces the one heard from longest
// ago.
const MaxDispatchers = 64

// dispatcherRates are the redirect rates each dispatcher of a group last
// reported, by member name, with the report's time: what a new report's
// rates are compared with, and what it must be newer than.
type dispatcherRates struct {
	mu    sync.Mutex
	rates map[string]sentRates // by dispatcher
	order []string             // dispatchers, the one heard from longest ago first
}

// sentRates is one dispatcher's last report.
type sentRates struct {
	at    time.Time
	rates map[string]float64 // member → redirects per second
}

func newDispatcherRates() *dispatcherRates {
	return &dispatcherRates{rates: make(map[string]sentRates)}
}

// swap records rates, taken at at, as dispatcher's and returns what it
// reported before (nil: nothing). A report that is not newer than the
// dispatcher's last is refused (probe.ErrReportOutOfOrder: a reordering,
// or a replay that came by another way than the signature) and changes
// nothing, except that the last report again (same time, same rates) is
// taken with no effect: same is then true.
func (r *dispatcherRates) swap(dispatcher string, at time.Time, rates map[string]float64) (prev map[string]float64, same bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.rates[dispatcher]
	if ok && !at.After(last.at) {
		if at.Equal(last.at) && maps.Equal(rates, last.rates) {
			return last.rates, true, nil
		}
		return nil, false, fmt.Errorf("%w: time: %s not after dispatcher %s's newest report's %s",
			probe.ErrReportOutOfOrder, at.Format(time.RFC3339Nano), dispatcher, last.at.Format(time.RFC3339Nano))
	}
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
	r.rates[dispatcher] = sentRates{at, rates}
	return last.rates, false, nil
}

// Redirects books a dispatcher's redirect rates (redirects per second by
// member name) on the group's members: the change of each rate since the
// dispatcher's previous report, 10 load units per redirect per second, as
// load that the member's own report does not show yet (its requests on
// its own host name). In the window model of dnsd's estimators that
// booking ramps out over the member's report window, as the member's
// report takes the change in; a rate that falls books a negative load.
// A member name that is not in the group is an error, and nothing of the
// report is booked; a member left out of the report is sent none. at is
// the report's time: a report not newer than the dispatcher's last is
// refused (probe.ErrReportOutOfOrder) unless it is the last one again,
// which is taken with no effect.
func (d *Dispatcher) Redirects(group, dispatcher string, at time.Time, rates map[string]float64) error {
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
	prev, same, err := g.sent.swap(dispatcher, at, own)
	if err != nil || same {
		return err
	}
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
			k, e := []int{f.pos[i]}, f.src[srcRedirects]
			if delta > 0 {
				e.Move(k, nil, 0, load, now, now)
			} else {
				e.Move(nil, k, 1, load, now, now)
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
