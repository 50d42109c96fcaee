package sitesim

import (
	"container/heap"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/transmirror/transmirror/scheduler/sim/backend"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
	"github.com/transmirror/transmirror/scheduler/site"
)

// run is one simulation in progress.
type run struct {
	c        Config
	w        Workload
	next     func() (workload.Request, bool)
	pol      site.Policy
	bs       []site.Backend
	backs    []*backend.Backend
	proxy    bool
	costs    FrontendCosts
	fe       cpu
	limit    int        // the admission bound, 0 for none
	used     int        // requests admitted and not yet complete
	waiting  []*request // requests read and waiting for admission, in order
	events   events
	seq      uint64
	res      Result
	bins     bins
	n        int   // requests sent
	start    int64 // end of the warm-up (the first counted request's send)
	last     int64 // the last counted completion
	hits     int
	bytes    int64
	hitBytes int64
}

// request is one request of the workload on its way through the site.
type request struct {
	n        int // its index in the workload
	key      string
	client   netip.Addr
	size     int64 // what the back end sends
	doneSize int64 // what Done is told
	backend  int
	hit      bool
	counted  bool
}

// Kinds of event.
const (
	read   = iota // the front end has read the request: admit it or hold it
	served        // the back end has sent the response (proxy: relay it)
	done          // the client has the whole response
)

// event is what happens to a request at a time; seq orders the events
// of one time by when they were made.
type event struct {
	at   int64
	seq  uint64
	kind int
	r    *request
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	return e[i].at < e[j].at || e[i].at == e[j].at && e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// push schedules what happens to rq at at.
func (r *run) push(at int64, kind int, rq *request) {
	heap.Push(&r.events, event{at: at, seq: r.seq, kind: kind, r: rq})
	r.seq++
}

// arrive has the clients send the workload's next request at at, if
// any: the front end's CPU reads it.
func (r *run) arrive(at int64) error {
	wr, ok := r.next()
	if !ok {
		return nil
	}
	if int(wr.Object) >= len(r.w.Objects) {
		return fmt.Errorf("sitesim: request %d names object %d of %d", r.n, wr.Object, len(r.w.Objects))
	}
	rq := &request{n: r.n, key: r.w.Objects[wr.Object], client: r.client(wr.Client), size: int64(wr.Size),
		counted: r.n >= r.c.Warmup}
	if wr.Status == 0 || wr.Status == http.StatusOK {
		rq.doneSize = rq.size // the live front end tells Done the size of a 200 only
	}
	if r.n == r.c.Warmup {
		r.start = at
	}
	r.n++
	r.push(r.fe.serve(at, int64(r.costs.PerRequest)), read, rq)
	return nil
}

// handle makes ev happen.
func (r *run) handle(ev event) error {
	switch ev.kind {
	case read:
		if r.limit > 0 && r.used >= r.limit {
			r.waiting = append(r.waiting, ev.r)
			if ev.r.counted {
				r.res.Queued++
			}
			return nil
		}
		r.used++
		return r.dispatch(ev.at, ev.r)
	case served:
		r.push(r.fe.serve(ev.at, perKiB(r.costs.PerKiB, ev.r.size)), done, ev.r)
		return nil
	}
	r.complete(ev.at, ev.r)
	if len(r.waiting) > 0 { // its admission passes to the first waiting
		next := r.waiting[0]
		r.waiting[0] = nil
		r.waiting = r.waiting[1:]
		if err := r.dispatch(ev.at, next); err != nil {
			return err
		}
	} else {
		r.used--
	}
	return r.arrive(ev.at)
}

// dispatch has the policy pick a back end for rq at at, and the back end
// serve it. The policy is not told the size, as the live front end
// does not know it before the response.
func (r *run) dispatch(at int64, rq *request) error {
	i, err := r.pol.Pick(site.Request{Key: rq.key, Client: rq.client}, r.bs, time.Unix(0, at))
	if err != nil {
		return fmt.Errorf("sitesim: request %d: %w", rq.n, err)
	}
	r.bs[i].Active++
	if r.c.OnPick != nil {
		r.c.OnPick(rq.n, i)
	}
	end, hit := r.backs[i].Serve(at, rq.key, rq.size)
	rq.backend, rq.hit = i, hit
	if rq.counted {
		r.res.Requests++
		r.res.PerBackend[i]++
		r.bytes += rq.size
		if hit {
			r.hits++
			r.hitBytes += rq.size
		}
	}
	if r.proxy {
		r.push(end, served, rq)
	} else {
		r.push(end, done, rq)
	}
	return nil
}

// complete ends rq at at: its back end has one request fewer, the
// policy hears of it.
func (r *run) complete(at int64, rq *request) {
	b := &r.bs[rq.backend]
	b.Active--
	r.pol.Done(site.Request{Key: rq.key, Client: rq.client, Size: rq.doneSize}, b.Name, time.Unix(0, at))
	if rq.counted {
		r.last = max(r.last, at)
		r.bins.add(at-r.start, rq)
	}
}
