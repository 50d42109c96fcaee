package scheduler

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Errors returned by New.
var (
	// ErrUnknownPolicy is returned for a policy name New does not know.
	ErrUnknownPolicy = errors.New("scheduler: unknown policy")
	// ErrParams is returned for watermarks or a tier slack that make no sense.
	ErrParams = errors.New("scheduler: invalid params")
)

// DefaultPolicy is the policy New builds for an empty name.
const DefaultPolicy = "geo-load"

// Defaults of Params.
const (
	// DefaultLowWatermark is the utilization where a member's share starts
	// to shrink.
	DefaultLowWatermark = 0.7
	// DefaultHighWatermark is the utilization from which a member takes no
	// new clients while another member has room.
	DefaultHighWatermark = 0.9
	// DefaultTierSlackKm is how much farther than the nearest member with
	// room a member may be and still share the geo-load tier.
	DefaultTierSlackKm = 1000
)

// Params tunes the load-aware policies. The zero value means the defaults.
type Params struct {
	// LowWatermark and HighWatermark are utilizations (see
	// Figures.Utilization);
	// when both are 0 they default to DefaultLowWatermark and
	// DefaultHighWatermark, otherwise 0 ≤ LowWatermark < HighWatermark.
	LowWatermark, HighWatermark float64
	// TierSlackKm is the width of a geo-load tier; 0 means
	// DefaultTierSlackKm, negative is invalid.
	TierSlackKm float64
}

// withDefaults fills in defaults and validates p.
func (p Params) withDefaults() (Params, error) {
	if p.LowWatermark == 0 && p.HighWatermark == 0 {
		p.LowWatermark, p.HighWatermark = DefaultLowWatermark, DefaultHighWatermark
	}
	if p.TierSlackKm == 0 {
		p.TierSlackKm = DefaultTierSlackKm
	}
	switch {
	case !finite(p.LowWatermark) || !finite(p.HighWatermark) || p.LowWatermark < 0 || p.LowWatermark >= p.HighWatermark:
		return p, fmt.Errorf("%w: watermarks must satisfy 0 <= low < high, got low %g, high %g", ErrParams, p.LowWatermark, p.HighWatermark)
	case !finite(p.TierSlackKm) || p.TierSlackKm < 0:
		return p, fmt.Errorf("%w: tier slack must be a non-negative number of km, got %g", ErrParams, p.TierSlackKm)
	}
	return p, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// keep is the taper of a utilization u: 1 up to the low watermark, falling
// linearly to 0 at the high watermark, 0 above it.
func (p Params) keep(u float64) float64 {
	switch {
	case u <= p.LowWatermark:
		return 1
	case u >= p.HighWatermark:
		return 0
	}
	return (p.HighWatermark - u) / (p.HighWatermark - p.LowWatermark)
}

// Query is one question to a Policy.
type Query struct {
	// Client is who asks.
	Client Client
	// N is how many distinct members the answer should hold.
	N int
	// Rand is the randomness of this pick. Every policy but hash needs it;
	// a *rand.Rand is not safe for concurrent use, so give each goroutine
	// its own.
	Rand *rand.Rand
	// Now is the time of the query, for decaying pending load.
	Now time.Time
	// Load holds live loads and pending load; nil means the loads of the
	// Group snapshot and no pending load.
	Load *Estimator
	// Also holds further sources of pending load on the same members,
	// added to Load's in the pick (see PendingSum); their reported loads
	// are not read. Ignored without Load.
	Also []*Estimator
}

// Policy picks the members of one answer.
type Policy interface {
	// Pick appends to dst the indexes of up to q.N distinct members of g,
	// best first, and returns the extended slice. failOpen is true when no
	// member of g is up and the answer was drawn from all members, ignoring
	// their state. Pick allocates nothing when dst has room, except to
	// memoise a location bucket seen for the first time.
	Pick(g *Group, q Query, dst []int) (picked []int, failOpen bool)
	// DependsOn says what of the client the answers depend on, and so
	// which ECS scope a reply may carry.
	DependsOn() Dependence
}

// Dependence is what of the client a policy's answers depend on.
type Dependence int8

// The dependences of the policies.
const (
	// DependsOnNothing: the answer is the same for every client (ECS
	// scope 0).
	DependsOnNothing Dependence = iota
	// DependsOnLocation: the answer depends on where the client is (the
	// geo database's scope).
	DependsOnLocation
	// DependsOnPrefix: the answer depends on the client's own prefix (the
	// whole source prefix).
	DependsOnPrefix
)

var (
	_ Policy = weighted{}
	_ Policy = leastLoad{}
	_ Policy = nearest{}
	_ Policy = hashPolicy{}
	_ Policy = geoLoad{}
)

// Names returns the names New accepts.
func Names() []string {
	return []string{"geo-load", "hash", "least-load", "nearest", "weighted"}
}

// New returns the policy called name (DefaultPolicy when name is empty)
// tuned by p.
func New(name string, p Params) (Policy, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	switch name {
	case "weighted":
		return weighted{}, nil
	case "least-load":
		return leastLoad{}, nil
	case "nearest":
		return nearest{p}, nil
	case "hash":
		return hashPolicy{}, nil
	case "geo-load", "":
		return geoLoad{p}, nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownPolicy, name)
}

// view is the load picture of one Pick: the snapshot, the estimator (read
// locked for the duration of the pick) and the time.
type view struct {
	g    *Group
	e    *Estimator
	also []*Estimator // further sources of pending load (Query.Also)
	now  time.Time
	open bool // no member is up: treat all as up, ignore reported loads
}

// begin starts a pick; call end when done.
func begin(g *Group, q *Query) view {
	v := view{g: g, e: q.Load, now: q.Now, open: g.FailOpen()}
	if v.e != nil {
		v.also = q.Also
		v.e.mu.RLock()
		for _, e := range v.also {
			e.mu.RLock()
		}
	}
	return v
}

func (v *view) end() {
	if v.e != nil {
		for _, e := range v.also {
			e.mu.RUnlock()
		}
		v.e.mu.RUnlock()
	}
}

// eligible returns the members a pick may draw from.
func (v *view) eligible() []int {
	if v.open {
		return v.g.all
	}
	return v.g.up
}

func (v *view) up(i int) bool { return v.open || v.g.members[i].Up }

// util returns member i's utilization (Figures.Utilization), as an
// earlier pick computed it less than utilRecheck ago if nothing changed
// it since.
func (v *view) util(i int) float64 {
	if v.e == nil || v.open || i >= len(v.e.utils) {
		return v.figures(i).Utilization()
	}
	c := &v.e.utils[i]
	now := v.now.UnixNano()
	if at := c.at.Load(); at != 0 && now-at < int64(utilRecheck) && at-now < int64(utilRecheck) {
		return math.Float64frombits(c.bits.Load())
	}
	u := v.figures(i).Utilization()
	c.bits.Store(math.Float64bits(u))
	c.at.Store(max(now, 1))
	return u
}

// figures returns member i's figures: the estimator's latest report, else
// the snapshot's, with the pending load. Failing open, reported figures
// are ignored (the members are down, their reports stale).
func (v *view) figures(i int) Figures {
	m := &v.g.members[i]
	f := Figures{Load: m.Load, Capacity: m.Capacity, BytesPerSecond: m.BytesPerSecond, Bandwidth: m.Bandwidth}
	if v.open {
		f.Load, f.BytesPerSecond = 0, 0
	}
	if v.e != nil && i < len(v.e.m) {
		if en := &v.e.m[i]; en.reported && !v.open {
			f.Load, f.BytesPerSecond = en.load, en.bytesPerSecond
		}
	}
	if v.e != nil {
		f.Pending = pendingSum(i, v.now, v.e, v.also)
	}
	return f
}

// utilRecheck is how long a pick takes a member's utilization computed
// by an earlier pick to hold, unless a report, a booking or a new remote
// share on the Load estimator changes it (the Also estimators' changes,
// and a new Group snapshot's figures for a member without a report, show
// within utilRecheck; every caller passes a Load estimator with the same
// Also, whose figures the cached one is): in between, a windowed estimator's pending
// load only changes as the slow decay of bookings no report took in, and
// NewEstimator's halves every horizon (seconds to minutes). It spares
// each pick the figures of every member it weighs (pending load over
// every source), which made a 512-member group's answers cost twice a
// 4-member group's, and least-load's ranking O(members) of them.
const utilRecheck = 250 * time.Millisecond

// has reports whether i is in picked.
func has(picked []int, i int) bool {
	for _, j := range picked {
		if j == i {
			return true
		}
	}
	return false
}

// tieKey orders members that are otherwise equal in a random order fixed by
// seed; distinct members get distinct keys.
func tieKey(seed uint64, i int) uint64 { return mix64(seed ^ uint64(i)*0x9e3779b97f4a7c15) }
