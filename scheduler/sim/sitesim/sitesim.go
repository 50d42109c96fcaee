// Package sitesim simulates one site: the front end's policy (the very
// scheduler/site policy the mirror runs) spreading a workload's requests
// over simulated back ends (scheduler/sim/backend), in a closed loop that
// keeps a number of requests outstanding, so that the throughput is an
// outcome, as in the LARD paper's simulations. Time is virtual and every
// draw comes from the seed: the same Config and workload give the same
// Result.
package sitesim

import (
	"container/heap"
	"errors"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/transmirror/transmirror/scheduler/sim/backend"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
	"github.com/transmirror/transmirror/scheduler/site"
)

// Config describes a site and how it is driven.
type Config struct {
	// Policy is the front end's policy (one of site.Names) and Params
	// its parameters; Seed seeds its randomness.
	Policy string
	Params site.Params
	Seed   uint64
	// Backends is how many back ends there are, each as Backend says
	// (its memory, largest cached object and costs).
	Backends int
	Backend  backend.Config
	// Outstanding is how many requests the clients keep in flight: each
	// completion sends the next request of the workload at once.
	Outstanding int
	// Warmup is how many leading requests are not counted.
	Warmup int
}

// Workload is what a run replays: requests in order and the names of
// their objects (the policy's keys) and clients.
type Workload struct {
	Requests iter.Seq[workload.Request]
	Objects  []string
	// Clients are the clients' addresses, by index (client-hash hashes
	// them); a client past its end, or whose address is not valid (a log
	// that names hosts), gets an address of its own from its index.
	Clients []netip.Addr
}

// Result is what a run measured over its counted requests.
type Result struct {
	Requests int
	// Elapsed is the virtual time from the end of the warm-up to the
	// last completion; Throughput is Requests over it, per second.
	Elapsed    time.Duration
	Throughput float64
	// HitRatio and ByteHitRatio are the back ends' cache hits.
	HitRatio, ByteHitRatio float64
	// PerBackend is each back end's share of the counted requests;
	// MaxOverMean and CV (coefficient of variation) are their spread.
	PerBackend      []int
	MaxOverMean, CV float64
	// CPU and Disk are each back end's utilizations over the whole run
	// (busy time over the time to the last completion).
	CPU, Disk []float64
}

// inflight is a request being served, by when it completes.
type inflight struct {
	done    int64
	backend int
	req     site.Request
	counted bool
}

type inflights []inflight

func (f inflights) Len() int           { return len(f) }
func (f inflights) Less(i, j int) bool { return f[i].done < f[j].done }
func (f inflights) Swap(i, j int)      { f[i], f[j] = f[j], f[i] }
func (f *inflights) Push(x any)        { *f = append(*f, x.(inflight)) }
func (f *inflights) Pop() any {
	old := *f
	x := old[len(old)-1]
	*f = old[:len(old)-1]
	return x
}

// run is one simulation in progress.
type run struct {
	c        Config
	w        Workload
	pol      site.Policy
	bs       []site.Backend
	backs    []*backend.Backend
	events   inflights
	res      Result
	n        int   // requests sent
	start    int64 // end of the warm-up (the first counted request's send)
	last     int64 // the last counted completion
	hits     int
	bytes    int64
	hitBytes int64
}

// Run replays w through a site as c describes it.
func Run(c Config, w Workload) (Result, error) {
	r, err := newRun(c, w)
	if err != nil {
		return Result{}, err
	}
	next, stop := iter.Pull(w.Requests)
	defer stop()
	for range c.Outstanding { // the first requests, all at time 0
		if rq, ok := next(); ok {
			if err := r.send(0, rq); err != nil {
				return Result{}, err
			}
		}
	}
	for len(r.events) > 0 {
		ev := heap.Pop(&r.events).(inflight)
		r.complete(ev)
		if rq, ok := next(); ok {
			if err := r.send(ev.done, rq); err != nil {
				return Result{}, err
			}
		}
	}
	return r.result(), nil
}

func newRun(c Config, w Workload) (*run, error) {
	if c.Backends < 1 || c.Outstanding < 1 || c.Warmup < 0 {
		return nil, errors.New("sitesim: want at least one back end and one outstanding request, and no negative warm-up")
	}
	pol, err := site.New(c.Policy, c.Params, rand.New(rand.NewPCG(c.Seed, 0x73697465)))
	if err != nil {
		return nil, fmt.Errorf("sitesim: %w", err)
	}
	r := &run{c: c, w: w, pol: pol, res: Result{PerBackend: make([]int, c.Backends)}}
	for i := range c.Backends {
		b, err := backend.New(c.Backend)
		if err != nil {
			return nil, fmt.Errorf("sitesim: %w", err)
		}
		r.backs = append(r.backs, b)
		r.bs = append(r.bs, site.Backend{Name: fmt.Sprintf("b%d", i+1), Weight: 1, MemoryBytes: c.Backend.Memory,
			MaxObjectBytes: c.Backend.MaxObject, Up: true})
	}
	return r, nil
}

// send picks a back end for rq at time at and has it serve rq.
func (r *run) send(at int64, rq workload.Request) error {
	if int(rq.Object) >= len(r.w.Objects) {
		return fmt.Errorf("sitesim: request %d names object %d of %d", r.n, rq.Object, len(r.w.Objects))
	}
	req := site.Request{Key: r.w.Objects[rq.Object], Client: r.client(rq.Client), Size: int64(rq.Size)}
	i, err := r.pol.Pick(req, r.bs, time.Unix(0, at))
	if err != nil {
		return fmt.Errorf("sitesim: request %d: %w", r.n, err)
	}
	r.bs[i].Active++
	done, hit := r.backs[i].Serve(at, req.Key, req.Size)
	counted := r.n >= r.c.Warmup
	if counted {
		if r.res.Requests == 0 {
			r.start = at
		}
		r.res.Requests++
		r.res.PerBackend[i]++
		r.bytes += req.Size
		if hit {
			r.hits++
			r.hitBytes += req.Size
		}
	}
	r.n++
	heap.Push(&r.events, inflight{done: done, backend: i, req: req, counted: counted})
	return nil
}

// client is the address of client index i: the workload's, else one of
// 10.0.0.0/8, spread over its /24 networks as a site's clients are (for
// client-hash's sake); the first 2²⁴ indexes have one each (an odd
// multiplier is a bijection of the low 24 bits).
func (r *run) client(i uint32) netip.Addr {
	if int(i) < len(r.w.Clients) && r.w.Clients[i].IsValid() {
		return r.w.Clients[i]
	}
	h := i * 0x9e3779b1
	return netip.AddrFrom4([4]byte{10, byte(h >> 16), byte(h >> 8), byte(h)})
}

// complete ends ev: the back end has one request fewer, the policy hears
// of it.
func (r *run) complete(ev inflight) {
	r.bs[ev.backend].Active--
	r.pol.Done(ev.req, r.bs[ev.backend].Name, time.Unix(0, ev.done))
	if ev.counted {
		r.last = max(r.last, ev.done)
	}
}

// result sums the run up.
func (r *run) result() Result {
	res := r.res
	if res.Requests == 0 {
		return res
	}
	res.Elapsed = time.Duration(r.last - r.start)
	if res.Elapsed > 0 {
		res.Throughput = float64(res.Requests) / res.Elapsed.Seconds()
	}
	res.HitRatio = float64(r.hits) / float64(res.Requests)
	if r.bytes > 0 {
		res.ByteHitRatio = float64(r.hitBytes) / float64(r.bytes)
	}
	mean := float64(res.Requests) / float64(len(res.PerBackend))
	most, ss := 0, 0.0
	for _, n := range res.PerBackend {
		most = max(most, n)
		ss += (float64(n) - mean) * (float64(n) - mean)
	}
	res.MaxOverMean = float64(most) / mean
	res.CV = math.Sqrt(ss/float64(len(res.PerBackend))) / mean
	for _, b := range r.backs {
		st := b.Stats()
		res.CPU = append(res.CPU, float64(st.CPUBusy)/float64(max(r.last, 1)))
		res.Disk = append(res.Disk, float64(st.DiskBusy)/float64(max(r.last, 1)))
	}
	return res
}

// Mean is the mean of xs (0 for none).
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
