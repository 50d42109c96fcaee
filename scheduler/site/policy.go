package site

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"time"
)

// Policy names, as written in configuration files and given to [New].
const (
	// WRR is smooth weighted round robin (nginx's upstream algorithm): every
	// pick adds each up back end's weight to its running score, takes the
	// highest score and subtracts the sum of the weights from it. Over a
	// period of Σweights picks each back end gets exactly its weight, spread
	// out as evenly as possible (weights 5,1,1 give a a b a c a a). State:
	// one float64 per known back end name.
	WRR = "wrr"

	// LeastConn sends each request to the up back end with the fewest
	// requests in flight per unit of weight (Active/Weight); ties are broken
	// uniformly with the injected random source, never by position. State:
	// none besides the random source.
	LeastConn = "least-conn"

	// ClientHash sends all requests of one client network (the address masked
	// to Params.PrefixV4, default /24, or Params.PrefixV6, default /64) to one
	// back end, with weighted rendezvous hashing (highest random weight) over
	// the up back ends. That is the ONE-IP failure property: when a back end
	// goes down only its clients move, and they spread over the others in
	// proportion to weight; a new back end takes about weight/Σweights of the
	// clients, all of them from the others proportionally. State: none.
	ClientHash = "client-hash"

	// LARD is locality-aware request distribution (Pai et al., "Locality-Aware
	// Request Distribution in Cluster-based Network Servers", ASPLOS 1998).
	// A target table maps each target (Request.Key) to a back end. A target
	// is (re)assigned to the least loaded up back end when it is unassigned,
	// when its back end is down or gone, when load(server) > T_high while some
	// back end has load < T_low, or when load(server) ≥ 2·T_high. The load is
	// Active/Weight; the paper's values T_low = 25 and T_high = 65 are the
	// defaults (Params.TLow, Params.THigh). The table is an LRU of at most
	// Params.MaxTargets entries (default 100,000); evicting a target forgets
	// its assignment. One client network (Params.PrefixV4, PrefixV6) adds
	// at most Params.ClientTargets new targets per Params.ClientWindow
	// (default 100 per second); past that a key without a target goes,
	// without getting one, to its owner by weighted rendezvous hashing (the
	// least loaded back end when the owner is overloaded), so that a client
	// asking for ever new keys can not wipe out the table (clients without
	// an address or on loopback are not bounded). Memory: MaxTargets ×
	// (len(key) + about 100 bytes), and MaxBudgetClients × about 100 bytes
	// for the budget.
	LARD = "lard"

	// LARDR is LARD with replication (LARD/R, same paper). Each target maps
	// to a set of back ends; a request goes to the least loaded up member. If
	// that member's load > T_high while some back end has load < T_low, or
	// its load ≥ 2·T_high, the least loaded back end of all joins the set and
	// takes the request. When the set has more than one member and has not
	// changed for K (Params.ReplicaHold, default 20 s, the paper's value),
	// its most loaded member leaves it. Bounded like LARD, with LARD's
	// per-client budget of new targets: memory is
	// MaxTargets × (len(key) + about 120 bytes + 16 bytes per member).
	LARDR = "lard-r"

	// WARD is workload-aware request distribution (Cherkasova & Karlsson,
	// "Scalable Web Server Cluster Design with Workload-Aware Request
	// Distribution Strategy WARD", WECWIS 2001), fitted to a front end that
	// dispatches every request. A core of files that every back end keeps
	// in memory goes to the least loaded up back end; every other file has
	// one owner (weighted rendezvous hashing of the key over the up back
	// ends) and goes there unless the owner is overloaded by LARD's rule.
	// The core is chosen by [WardCoreSize] (the ward-analysis, its cost
	// model is documented there): with the default Params.ForwardCost of 0
	// it holds only the few files too hot for one owner, those that would
	// make it carry more than Params.WardBalance (default 1.25) times its
	// fair share, and only while their copies take less from the partition
	// than they give back; a ForwardCost above 0 selects the paper's
	// architecture, in which each core request also saves a forward. The
	// analysis works from a space-saving top-K sketch of request
	// frequencies (Params.SketchEntries, default 10,000 entries, halved at
	// each analysis so that old popularity fades), a linear-counting
	// estimate of the distinct files requested (for the bytes of the files
	// the sketch does not hold), the file sizes seen by Pick and Done and
	// the up back ends' MemoryBytes. The first analysis runs one
	// Params.WardInterval (default 60 s, the injected clock) after the first
	// pick, and again every interval; until then the core is empty. Memory:
	// SketchEntries × (len(key) + about 120 bytes), a core set of at most
	// as many keys, and 16 KiB of bitmaps.
	WARD = "ward"

	// TBCCRD is tag-based cooperative caching request distribution. The
	// policy keeps a URL distribution table: a model of each back end's
	// memory cache, an [LRUBytes] of the back end's MemoryBytes that Done
	// fills with (key, size) just as the back end's own LRU cache would. A
	// request goes to the least loaded up back end that holds the key (a
	// "tag") unless that holder is overloaded (LARD's rule: load > T_high
	// while some back end is below T_low, or load ≥ 2·T_high); otherwise, or
	// when nobody holds it, to the least loaded up back end, which becomes a
	// holder when the request completes. Objects larger than
	// Params.MaxObjectBytes (default 1 MiB) are never cached, nor objects of
	// unknown size (Request.Size 0 at Done). The table is only a model: it
	// is right when the back ends really use byte-bounded LRU caches of
	// MemoryBytes. Memory: per back end at most Params.MaxTargets entries
	// × (len(key) + about 80 bytes).
	TBCCRD = "tb-ccrd"

	// CHBL is consistent hashing with bounded loads (Mirrokni, Thorup &
	// Zadimoghaddam, SODA 2018; HAProxy's hash-balance-factor, used by Vimeo).
	// Each back end has Params.VirtualNodes points (default 100) per unit of
	// weight on a 64-bit hash ring. A request hashes its key onto the ring and
	// walks clockwise to the first up back end that is not full; a back end
	// is full when Active+1 > ceil(c · (ΣActive+1) · weight/Σweight) over the
	// up back ends, c = Params.BalanceFactor (default 1.25). Since the
	// bounds add up to more than the load, some back end is never full.
	// Memory: 16 bytes per virtual node, rebuilt only when the set of
	// back ends or their weights change. With Request.Has, the bounds are
	// over the up back ends that have the file: the walk skips the
	// others, and some back end that has it is never full.
	CHBL = "chbl"
)

// Names lists every policy [New] knows, in a stable order.
func Names() []string {
	return []string{WRR, LeastConn, ClientHash, LARD, LARDR, WARD, TBCCRD, CHBL}
}

var (
	// ErrNoBackend is returned by Pick when no back end is up (and has
	// the file, Request.Has).
	ErrNoBackend = errors.New("site: no back end is up")
	// ErrUnknownPolicy is returned by New for a name not in [Names].
	ErrUnknownPolicy = errors.New("site: unknown policy")
	// ErrBadParams is wrapped by every error about a [Params] value.
	ErrBadParams = errors.New("site: bad parameters")
	// ErrNilRand is returned by New when no random source is given.
	ErrNilRand = errors.New("site: nil random source")
)

// Backend is one back end as the front end sees it at the time of a pick.
type Backend struct {
	// Name identifies the back end. Names are unique within a set, and
	// policies remember back ends by name, so the order of the slice may
	// change between calls. A name missing from a later set is forgotten.
	Name string
	// Weight is the back end's relative capacity; 0 or less counts as 1.
	Weight float64
	// MemoryBytes is the size of the back end's memory cache.
	MemoryBytes int64
	// MaxObjectBytes is the largest object the back end's cache keeps, 0
	// when not known (tb-ccrd then uses Params.MaxObjectBytes).
	MaxObjectBytes int64
	// Up reports whether the back end may take requests. Policies never
	// pick a back end that is not up.
	Up bool
	// Active is the number of requests in flight on the back end. The
	// caller maintains it: one more after a pick, one less when the
	// request completes. Policies read it as the back end's load.
	Active int
}

// Request is what a policy knows about one request.
type Request struct {
	// Key names the target: the front end gives the URL path, or the path
	// with its query (its site.target_key). Every distinct key may take a
	// target table entry, within each client's budget (see [LARD]).
	Key string
	// Client is the client's address (for client-hash).
	Client netip.Addr
	// Size is the size of the object in bytes, 0 when not known. Pass the
	// response size to Done: tb-ccrd and ward learn sizes there.
	Size int64
	// Has, when not nil, says which back ends have the requested file:
	// Has[i] is about bs[i] of the same Pick. A back end whose entry is
	// false is never picked, as if it were down for this request only
	// (an entry past the end of Has counts as true). nil: every back end
	// has it. The policies' state follows what they pick: lard and lard-r
	// move the target to, or add to its set, a back end that has the
	// file; tb-ccrd takes a tag only on one that has it; client-hash,
	// ward, lard's untracked keys and chbl hash over the back ends that
	// have it; wrr's smooth scores run over them (the others keep theirs,
	// as nginx's tried peers do). Done is unchanged.
	Has []bool
}

// Policy picks a back end for each request and learns from completions.
// Every Policy returned by [New] is safe for concurrent use.
type Policy interface {
	// Name returns the policy's name, one of [Names].
	Name() string
	// Pick returns the index in bs of the back end for req, or
	// ErrNoBackend when no back end in bs is up and has the file
	// (req.Has). It never returns a back end that is down or lacks the
	// file, and it does not modify bs or req.Has.
	Pick(req Request, bs []Backend, now time.Time) (int, error)
	// Done reports that req, sent to the back end named backend, has
	// completed; req.Size should then be the size of the response.
	Done(req Request, backend string, now time.Time)
}

// Params tunes the policies. The zero value of a field means its default.
type Params struct {
	// TLow and THigh are LARD's load thresholds in requests in flight per
	// unit of weight (default 25 and 65, Pai et al.), used by lard, lard-r
	// and tb-ccrd.
	TLow, THigh float64
	// MaxTargets bounds the target tables of lard and lard-r and the
	// per-back-end cache models of tb-ccrd (default 100,000 entries).
	MaxTargets int
	// ReplicaHold is LARD/R's K: how long a replica set must stay unchanged
	// before its most loaded member is dropped (default 20 s).
	ReplicaHold time.Duration
	// PrefixV4 and PrefixV6 are the client prefix lengths client-hash hashes
	// (default 24 and 64).
	PrefixV4, PrefixV6 int
	// WardInterval is how often ward re-runs its analysis (default 60 s).
	WardInterval time.Duration
	// ForwardCost is ward's F: the cost of forwarding a request for a
	// non-core file to its owner, relative to the cost of a cache miss, in
	// the paper's architecture where every back end is also a front end.
	// The default, 0, is right for transmirror's front end, which
	// dispatches every request alike; a value above 0 selects the paper's
	// model (see [WardCoreSize]).
	ForwardCost float64
	// WardBalance is ward's s: a back end may carry up to s times its fair
	// share of the requests, and a file too hot for that goes into the
	// core (default 1.25, must be above 1).
	WardBalance float64
	// SketchEntries is the number of files ward counts (default 10,000).
	SketchEntries int
	// MaxObjectBytes is the largest object tb-ccrd models as cached
	// (default 1 MiB).
	MaxObjectBytes int64
	// BalanceFactor is chbl's c, at least 1 (default 1.25).
	BalanceFactor float64
	// VirtualNodes is chbl's number of ring points per unit of weight
	// (default 100).
	VirtualNodes int
	// ClientTargets and ClientWindow bound the new targets one client
	// network (PrefixV4, PrefixV6) adds to the target table of lard and
	// lard-r: at most ClientTargets per ClientWindow (default 100 per
	// 1 s). Past that a new key is dispatched without a target, by a
	// weighted rendezvous hash of the key (the least loaded back end when
	// its owner is overloaded). See [LARD].
	ClientTargets int
	ClientWindow  time.Duration
}

// DefaultParams returns the parameters [New] uses for zero fields.
func DefaultParams() Params {
	return Params{
		TLow:           25,
		THigh:          65,
		MaxTargets:     100_000,
		ReplicaHold:    20 * time.Second,
		PrefixV4:       24,
		PrefixV6:       64,
		WardInterval:   60 * time.Second,
		WardBalance:    1.25,
		SketchEntries:  10_000,
		MaxObjectBytes: 1 << 20,
		BalanceFactor:  1.25,
		VirtualNodes:   100,
		ClientTargets:  100,
		ClientWindow:   time.Second,
	}
}

// withDefaults fills zero fields from DefaultParams.
func (p Params) withDefaults() Params {
	d := DefaultParams()
	if p.TLow == 0 {
		p.TLow = d.TLow
	}
	if p.THigh == 0 {
		p.THigh = d.THigh
	}
	if p.MaxTargets == 0 {
		p.MaxTargets = d.MaxTargets
	}
	if p.ReplicaHold == 0 {
		p.ReplicaHold = d.ReplicaHold
	}
	if p.PrefixV4 == 0 {
		p.PrefixV4 = d.PrefixV4
	}
	if p.PrefixV6 == 0 {
		p.PrefixV6 = d.PrefixV6
	}
	if p.WardInterval == 0 {
		p.WardInterval = d.WardInterval
	}
	if p.WardBalance == 0 {
		p.WardBalance = d.WardBalance
	}
	if p.SketchEntries == 0 {
		p.SketchEntries = d.SketchEntries
	}
	if p.MaxObjectBytes == 0 {
		p.MaxObjectBytes = d.MaxObjectBytes
	}
	if p.BalanceFactor == 0 {
		p.BalanceFactor = d.BalanceFactor
	}
	if p.VirtualNodes == 0 {
		p.VirtualNodes = d.VirtualNodes
	}
	if p.ClientTargets == 0 {
		p.ClientTargets = d.ClientTargets
	}
	if p.ClientWindow == 0 {
		p.ClientWindow = d.ClientWindow
	}
	return p
}

// validate reports every invalid field of p (after defaults) at once.
func (p Params) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrBadParams}, args...)...))
	}
	if !(p.TLow > 0) || math.IsInf(p.TLow, 0) {
		bad("t_low %v must be positive", p.TLow)
	}
	if !(p.THigh > p.TLow) || math.IsInf(p.THigh, 0) {
		bad("t_high %v must be above t_low %v", p.THigh, p.TLow)
	}
	if p.MaxTargets < 1 || p.MaxTargets > math.MaxInt32/2 {
		bad("max_targets %d must be in [1, %d]", p.MaxTargets, math.MaxInt32/2)
	}
	if p.ReplicaHold < 0 {
		bad("replica_hold %v must not be negative", p.ReplicaHold)
	}
	if p.PrefixV4 < 0 || p.PrefixV4 > 32 {
		bad("prefix_v4 %d must be in [0, 32]", p.PrefixV4)
	}
	if p.PrefixV6 < 0 || p.PrefixV6 > 128 {
		bad("prefix_v6 %d must be in [0, 128]", p.PrefixV6)
	}
	if p.WardInterval < 0 {
		bad("ward_interval %v must not be negative", p.WardInterval)
	}
	if !(p.ForwardCost >= 0) || math.IsInf(p.ForwardCost, 0) {
		bad("forward_cost %v must not be negative", p.ForwardCost)
	}
	if !(p.WardBalance > 1) || math.IsInf(p.WardBalance, 0) {
		bad("ward_balance %v must be above 1", p.WardBalance)
	}
	if p.SketchEntries < 1 || p.SketchEntries > math.MaxInt32/2 {
		bad("sketch_entries %d must be in [1, %d]", p.SketchEntries, math.MaxInt32/2)
	}
	if p.MaxObjectBytes < 0 {
		bad("max_object_bytes %d must not be negative", p.MaxObjectBytes)
	}
	if !(p.BalanceFactor >= 1) || math.IsInf(p.BalanceFactor, 0) {
		bad("balance_factor %v must be at least 1", p.BalanceFactor)
	}
	if p.VirtualNodes < 1 || p.VirtualNodes > 10_000 {
		bad("virtual_nodes %d must be in [1, 10000]", p.VirtualNodes)
	}
	if p.ClientTargets < 1 || p.ClientTargets > math.MaxInt32/2 {
		bad("client_targets %d must be in [1, %d]", p.ClientTargets, math.MaxInt32/2)
	}
	if p.ClientWindow < 0 {
		bad("client_window %v must not be negative", p.ClientWindow)
	}
	return errors.Join(errs...)
}

// New returns the policy called name with parameters p (zero fields take
// their defaults) and random source rng, which the policy owns from then
// on: the caller must not use it concurrently.
func New(name string, p Params, rng *rand.Rand) (Policy, error) {
	if rng == nil {
		return nil, ErrNilRand
	}
	p = p.withDefaults()
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("site: policy %q: %w", name, err)
	}
	switch name {
	case WRR:
		return newWRR(), nil
	case LeastConn:
		return &leastConn{rng: rng}, nil
	case ClientHash:
		return &clientHash{v4: p.PrefixV4, v6: p.PrefixV6}, nil
	case LARD:
		return newLARD(p, rng), nil
	case LARDR:
		return newLARDR(p, rng), nil
	case WARD:
		return newWard(p, rng), nil
	case TBCCRD:
		return newTBCCRD(p, rng), nil
	case CHBL:
		return newCHBL(p), nil
	}
	return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownPolicy, name, Names())
}

// weight is b's weight, 1 when unset.
func weight(b *Backend) float64 {
	if b.Weight > 0 {
		return b.Weight
	}
	return 1
}

// serves reports whether bs[i] may take a request: it is up and has the
// file (has, a Request.Has).
func serves(bs []Backend, has []bool, i int) bool {
	return bs[i].Up && (i >= len(has) || has[i])
}

// load is b's requests in flight per unit of weight.
func load(b *Backend) float64 { return float64(b.Active) / weight(b) }

// leastLoaded returns the back end with the lowest load of those that
// serve (up and in has), ties broken uniformly with rng, and that load;
// -1 when none serves.
func leastLoaded(bs []Backend, has []bool, rng *rand.Rand) (int, float64) {
	best, bestLoad, ties := -1, 0.0, 0
	for i := range bs {
		if !serves(bs, has, i) {
			continue
		}
		l := load(&bs[i])
		switch {
		case best < 0 || l < bestLoad:
			best, bestLoad, ties = i, l, 1
		case l == bestLoad:
			// Reservoir sampling: the k-th tie replaces the pick with
			// probability 1/k, so every tie is equally likely.
			ties++
			if rng.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best, bestLoad
}

// overloaded is LARD's test for moving load away from a back end with load
// l when the least loaded back end has load minLoad.
func overloaded(l, minLoad float64, p *Params) bool {
	return (l > p.THigh && minLoad < p.TLow) || l >= 2*p.THigh
}

// indexOf returns the index of the back end called name in bs, trying hint
// first; -1 when absent.
func indexOf(bs []Backend, name string, hint int) int {
	if hint >= 0 && hint < len(bs) && bs[hint].Name == name {
		return hint
	}
	for i := range bs {
		if bs[i].Name == name {
			return i
		}
	}
	return -1
}

// aligned keeps one value per back end in the order of the last set seen,
// carried over by name when the set changes; names that left the set are
// forgotten. Its memory is one value per back end in use.
type aligned[T any] struct {
	names []string
	vals  []T
}

// sync lines a.vals up with bs and returns it. Values of new names come
// from fresh, or are zero when fresh is nil.
func (a *aligned[T]) sync(bs []Backend, fresh func(*Backend) T) []T {
	if len(a.names) == len(bs) {
		same := true
		for i := range bs {
			if a.names[i] != bs[i].Name {
				same = false
				break
			}
		}
		if same {
			return a.vals
		}
	}
	old := make(map[string]T, len(a.names))
	for i, n := range a.names {
		old[n] = a.vals[i]
	}
	names, vals := make([]string, len(bs)), make([]T, len(bs))
	for i := range bs {
		names[i] = bs[i].Name
		if v, ok := old[bs[i].Name]; ok {
			vals[i] = v
		} else if fresh != nil {
			vals[i] = fresh(&bs[i])
		}
	}
	a.names, a.vals = names, vals
	return vals
}
