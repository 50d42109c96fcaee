// Package sitesim simulates one site: the front end's policy (the very
// scheduler/site policy the mirror runs) spreading a workload's requests
// over simulated back ends (scheduler/sim/backend), in a closed loop that
// keeps a number of requests outstanding, so that the throughput is an
// outcome, as in the LARD paper's simulations. Time is virtual and every
// draw comes from the seed: the same Config and workload give the same
// Result.
//
// The front end is modelled as mirror/frontend behaves. It has a CPU of
// its own, which serves one piece of work at a time in the order it
// comes: reading each request (FrontendCosts.PerRequest) and, in proxy
// mode, relaying each response (FrontendCosts.PerKiB), so that it can
// be the bottleneck. It bounds the requests outstanding on the back
// ends (Config.Admission, site.AdmissionLimit by default) and holds the
// others in arrival order, each until a request completes. A request's
// way: the client sends it; the front end's CPU reads it; it waits for
// admission; the policy picks a back end (told the key and the client,
// not the size, which the live front end does not know yet); the back
// end serves it; in proxy mode the front end's CPU relays the response;
// the client has it, the policy is told (Done, with the size of a 200
// response, 0 for any other status, as the live front end tells it), the
// request's admission passes to the first request waiting, and the
// client sends its next request.
package sitesim

import (
	"container/heap"
	"errors"
	"fmt"
	"iter"
	"math"
	"net/netip"
	"time"

	"github.com/transmirror/transmirror/scheduler/sim/backend"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
	"github.com/transmirror/transmirror/scheduler/site"
)

// Config describes a site and how it is driven.
type Config struct {
	// Policy is the front end's policy (one of site.Names) and Params
	// its parameters; Seed seeds its randomness (see PolicyRand).
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
	// Mode is how the front end hands a request over: ModeProxy (the
	// default, "") or ModeHandoff.
	Mode string
	// Frontend is what the front end's CPU spends: nil takes
	// DefaultFrontendCosts(Mode, Backend.Costs); &FrontendCosts{} is a
	// front end that costs nothing.
	Frontend *FrontendCosts
	// Admission bounds the requests outstanding on the back ends, as
	// the live front end's site.admission.limit does: 0 is the policy's
	// own bound (site.AdmissionLimit over Backends back ends of weight
	// 1: LARD's S for lard, lard-r and tb-ccrd, none for the others),
	// less than 0 none, more than 0 that many.
	Admission int
	// Bin is the width of Result.Bins in virtual time (0: no bins).
	Bin time.Duration
	// OnPick, when not nil, is told of every pick, warm-up included: the
	// request's index in the workload and the back end's index.
	OnPick func(n, backend int)
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
	// Elapsed is the virtual time from the end of the warm-up (the send
	// of the first counted request) to the last completion; Throughput
	// is Requests over it, per second.
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
	// FrontendCPU is the front end's CPU utilization, alike.
	FrontendCPU float64
	// Admission is the bound applied (0: none), Queued how many counted
	// requests waited for it.
	Admission, Queued int
	// Bins are the counted requests by when they completed, Config.Bin
	// wide from the end of the warm-up; nil without Config.Bin.
	Bins []Bin
}

// Bin is what completed in one interval (Start, Start+Config.Bin] of
// the measured time (the first bin also holds what completed at 0).
type Bin struct {
	// Start is the bin's start, from the end of the warm-up.
	Start time.Duration
	// Requests is how many counted requests completed in the bin, and
	// Throughput that over its width (the last bin's ends with the run).
	Requests   int
	Throughput float64
	// HitRatio is the share of them that the back ends' caches hit.
	HitRatio float64
	// PerBackend is how many completed on each back end, MaxOverMean
	// and CV their spread (0 for an empty bin).
	PerBackend      []int
	MaxOverMean, CV float64
}

// Run replays w through a site as c describes it.
func Run(c Config, w Workload) (Result, error) {
	r, err := newRun(c, w)
	if err != nil {
		return Result{}, err
	}
	next, stop := iter.Pull(w.Requests)
	defer stop()
	r.next = next
	for range c.Outstanding { // the first requests, all at time 0
		if err := r.arrive(0); err != nil {
			return Result{}, err
		}
	}
	for len(r.events) > 0 {
		if err := r.handle(heap.Pop(&r.events).(event)); err != nil {
			return Result{}, err
		}
	}
	return r.result(), nil
}

// newRun checks c and builds the site it describes.
func newRun(c Config, w Workload) (*run, error) {
	if c.Backends < 1 || c.Outstanding < 1 || c.Warmup < 0 || c.Bin < 0 {
		return nil, errors.New("sitesim: want at least one back end and one outstanding request, and no negative warm-up or bin")
	}
	costs, err := frontendCosts(c)
	if err != nil {
		return nil, err
	}
	pol, err := site.New(c.Policy, c.Params, PolicyRand(c.Seed))
	if err != nil {
		return nil, fmt.Errorf("sitesim: %w", err)
	}
	r := &run{c: c, w: w, pol: pol, proxy: c.Mode != ModeHandoff, costs: costs, limit: admission(c),
		res: Result{PerBackend: make([]int, c.Backends)}, bins: bins{width: int64(c.Bin), backends: c.Backends}}
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

// admission is the bound c asks for, 0 for none.
func admission(c Config) int {
	switch {
	case c.Admission > 0:
		return c.Admission
	case c.Admission < 0:
		return 0
	}
	return site.AdmissionLimit(c.Policy, c.Params, float64(c.Backends))
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

// result sums the run up.
func (r *run) result() Result {
	res := r.res
	res.Admission = r.limit
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
	res.MaxOverMean, res.CV = spread(res.PerBackend)
	span := float64(max(r.last, 1))
	for _, b := range r.backs {
		st := b.Stats()
		res.CPU = append(res.CPU, float64(st.CPUBusy)/span)
		res.Disk = append(res.Disk, float64(st.DiskBusy)/span)
	}
	res.FrontendCPU = float64(r.fe.busy) / span
	res.Bins = r.bins.result(res.Elapsed)
	return res
}

// spread is the largest of counts over their mean, and their
// coefficient of variation; 0 and 0 when they add up to nothing.
func spread(counts []int) (maxOverMean, cv float64) {
	total := 0
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return 0, 0
	}
	mean := float64(total) / float64(len(counts))
	most, ss := 0, 0.0
	for _, n := range counts {
		most = max(most, n)
		ss += (float64(n) - mean) * (float64(n) - mean)
	}
	return float64(most) / mean, math.Sqrt(ss/float64(len(counts))) / mean
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
