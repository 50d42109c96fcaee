package dispatch

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/bits"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler"
	"github.com/transmirror/transmirror/scheduler/geo"
	"github.com/transmirror/transmirror/zones"
)

// Health is what the prober last said of a member: its state and its
// newest load report.
type Health struct {
	// State is the member's health; a new member is probe.StateUnknown,
	// which is answered.
	State probe.State
	// Load is the last reported load in load units and BytesPerSecond
	// the response bytes per second of that report; Reported is when that
	// report was made (zero: no report yet).
	Load           float64
	BytesPerSecond float64
	Reported       time.Time
	// Requests is the report's requests per second and GroupRequests
	// those that came in on the group name (0: an older mirror that does
	// not say); Window is the report's window (0: the default 10 s).
	Requests, GroupRequests float64
	Window                  time.Duration
	// Generation is the report's generation, when the member's last
	// complete sync was taken from the master (zero: it does not say).
	Generation time.Time
}

// usage is what the estimator takes of a report.
func (h Health) usage() scheduler.Usage {
	return scheduler.Usage{Load: h.Load, BytesPerSecond: h.BytesPerSecond}
}

// MemberState is the live state of one member: the prober's verdict, the
// operator's drain and the group's freshness rule.
type MemberState struct {
	Health
	// Drained: an operator took the member out of the answers; it keeps
	// being probed.
	Drained bool
	// Freshness is the freshness rule's verdict (scheduler.FreshnessRule):
	// the member's lag behind the group's newest generation and whether
	// it leaves the answers for it.
	Freshness scheduler.Freshness
}

// answerable reports whether the member would go into answers but for its
// lag: it is not down and not drained.
func (s MemberState) answerable() bool { return !s.Drained && s.State != probe.StateDown }

// Answered reports whether the member goes into answers: it is not down,
// not drained and not lagging.
func (s MemberState) Answered() bool { return s.answerable() && !s.Freshness.Lagging }

// Name is the state as shown to operators: "draining" for a drained
// member, "lagging" for one the freshness rule takes out, else the
// prober's "unknown", "up" or "down".
func (s MemberState) Name() string {
	switch {
	case s.Drained:
		return "draining"
	case s.Freshness.Lagging && s.State != probe.StateDown:
		return StateLagging
	}
	return s.State.String()
}

// StateLagging is the state name of a member that the freshness rule
// takes out of the answers (MemberState.Name).
const StateLagging = "lagging"

// Options configure a Dispatcher.
type Options struct {
	// Logger receives the dispatcher's logs; nil discards them.
	Logger *slog.Logger
	// Registry is where its metrics are registered; nil keeps them private.
	Registry prometheus.Registerer
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Seed seeds the random generators (one per concurrent query, from a
	// pool): generator k is PCG(Seed, k). Zero picks a random seed.
	Seed uint64
	// Serial gives every query generator 1, PCG(Seed, 1), instead of one
	// from the pool (which the garbage collector empties when it likes):
	// for a caller that asks one question at a time and must get the same
	// answers from the same seed, a simulation. Such a Dispatcher must not
	// be asked concurrently.
	Serial bool
	// MaxScopes bounds the client scopes whose rate is tracked per group
	// (default 16,384, about 4.8 MiB per group; see
	// scheduler.ScopeEntryBytes).
	MaxScopes int
	// OnAnswer, when set, is called for every member named in a group
	// answer with where the client is (the dashboard's answer flows). It
	// runs on the query path: it must be fast and must not block.
	OnAnswer func(group, member string, client scheduler.Location)
	// OnFailOpen, when set, is called once when a group starts answering
	// with all members because none is up (on) and once when that ends.
	OnFailOpen func(group string, on bool)
	// OnLagging, when set, is called when a member starts lagging (on:
	// its generation is more than the group's max_lag behind the newest)
	// and when it catches up, with its lag. It is called with the
	// dispatcher's writers held: it must not block nor call back.
	OnLagging func(group, member string, on bool, lag time.Duration)
}

// Dispatcher answers group names with the scheduler's policies: it locates
// the client (ECS or resolver address), asks the group's policy for the
// members, sets the TTL from the client scope's estimated request rate and
// books the answer's hidden load on the chosen members. It is the
// dnsd.GroupAnswerer that cmd/dnsd plugs into the Server.
type Dispatcher struct {
	log       *slog.Logger
	now       func() time.Time
	maxScopes int
	seed      uint64
	nextRand  atomic.Uint64
	rands     sync.Pool
	serial    *pickState // Options.Serial's one generator, else nil

	mu   sync.Mutex // serialises writers: commits and SetHealth
	snap atomic.Pointer[dsnap]

	answers     *prometheus.CounterVec
	failOpen    *prometheus.CounterVec
	lagFailOpen *prometheus.CounterVec
	ecs         *prometheus.CounterVec
	lookups     *prometheus.CounterVec
	// ecsBy and lookupsBy are the series of ecs and lookups by label,
	// read-only after New.
	ecsBy, lookupsBy map[string]prometheus.Counter

	onAnswer   func(group, member string, client scheduler.Location)
	onFailOpen func(group string, on bool)
	onLagging  func(group, member string, on bool, lag time.Duration)
	lagChanges *prometheus.CounterVec
}

var _ dnsd.GroupAnswerer = (*Dispatcher)(nil)

// pickState is the scratch of one pick, pooled: its generator (a
// *rand.Rand is not safe for concurrent use) and room for the picks.
type pickState struct {
	rng  *rand.Rand
	buf  [8]int
	from [8]int // the previous answer's members
}

// dsnap is what the dispatcher answers from, swapped whole: the locator and
// the groups by canonical name.
type dsnap struct {
	loc    *geo.Locator
	groups map[string]*dgroup
}

func (d *Dispatcher) groups() map[string]*dgroup { return d.snap.Load().groups }

// dgroup is one group as the dispatcher serves it; replaced whole by Load
// and by member state changes, except for the estimators and scope rates,
// which carry over.
type dgroup struct {
	cfg      *zones.GroupConfig
	policy   scheduler.Policy
	states   []MemberState // by member index
	fam      [2]*family    // A, AAAA
	rates    *scheduler.ScopeRates
	shares   *answerCounts        // answers per member over the last minute
	sent     *dispatcherRates     // the dispatchers' redirect rates, as last reported
	remote   *remotePending       // the other nodes' pending load, as last shared
	failOpen *atomic.Bool         // an episode is in progress (for logging once)
	answered []prometheus.Counter // group_answers_total by member index
	// fresh is the group's freshness rule (its master's generation
	// carried over) and lagOpen whether it fails open in this snapshot;
	// lagEpisode is lagOpen as last logged.
	fresh      scheduler.FreshnessRule
	lagOpen    bool
	lagEpisode *atomic.Bool
}

// family is the members of a group that have addresses of one family.
type family struct {
	idx   []int            // family index → member index
	pos   []int            // member index → family index, -1: none
	up    int              // members answered (the fair share's divisor)
	addrs [][]netip.Addr   // family index → the member's addresses of the family
	group *scheduler.Group // snapshot with states
	// src is the pending load by source, summed at pick time (the pick's
	// Load and Also, scheduler.PendingSum): see srcOwn.
	src [numSources]*scheduler.Estimator
	// drained: every member of the family is drained and the group
	// answers NODATA then (when_all_drained: nodata).
	drained bool
}

// The sources of a family's pending load, indexes of family.src. srcOwn
// books this node's answers and takes the members' reports (its loads are
// the ones a pick reads); it is what the node shares with the other nodes
// of an NS set (LocalPending). srcRedirects books the dispatchers'
// redirects (Redirects), ramped out by the same reports; they are not
// shared, since a dispatcher reports them to every node. srcNodes holds
// what the other nodes shared of their own (SetRemotePending).
const (
	srcOwn = iota
	srcRedirects
	srcNodes
	numSources
)

// pending returns member k's pending load at now, summed over the sources.
func (f *family) pending(k int, now time.Time) float64 {
	return scheduler.PendingSum(k, now, f.src[srcOwn], f.src[srcOwn+1:])
}

// ECS results, the values of the ecs_queries_total label.
const (
	ecsNone      = "none"
	ecsUsed      = "used"
	ecsOptOut    = "opt_out"
	ecsUntrusted = "untrusted"
)

// New returns a Dispatcher with its metrics registered. It answers
// nothing until the first Load.
func New(o Options) (*Dispatcher, error) {
	d := &Dispatcher{log: o.Logger, now: o.Now, maxScopes: o.MaxScopes, seed: o.Seed,
		onAnswer: o.OnAnswer, onFailOpen: o.OnFailOpen, onLagging: o.OnLagging}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	if d.maxScopes <= 0 {
		d.maxScopes = 16384
	}
	if d.seed == 0 {
		var b [8]byte
		if _, err := crand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("dispatch: seed: %w", err)
		}
		d.seed = binary.LittleEndian.Uint64(b[:])
	}
	d.rands.New = func() any { return &pickState{rng: rand.New(rand.NewPCG(d.seed, d.nextRand.Add(1)))} }
	if o.Serial {
		d.serial = d.rands.New().(*pickState)
	}
	d.snap.Store(&dsnap{groups: map[string]*dgroup{}})

	d.answers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "group_answers_total",
		Help: "Group answers that included the member, by group and member.",
	}, []string{"group", "member"})
	d.failOpen = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "group_fail_open_total",
		Help: "Group answers given from all members because none was up.",
	}, []string{"group"})
	d.lagFailOpen = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "group_lag_fail_open_total",
		Help: "Group answers given from the freshest lagging members because every member that could be answered lagged by more than max_lag.",
	}, []string{"group"})
	d.lagChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "member_lag_changes_total",
		Help: "Members that started lagging (to=lagging) or caught up (to=caught_up) under their group's max_lag, by group.",
	}, []string{"group", "to"})
	d.ecs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "ecs_queries_total",
		Help: "Group queries by EDNS Client Subnet use: none, used, opt_out, untrusted.",
	}, []string{"result"})
	d.lookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "geo_lookups_total",
		Help: "Client locations by source: static, mmdb, default.",
	}, []string{"source"})
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	for _, c := range []prometheus.Collector{d.answers, d.failOpen, d.lagFailOpen, d.lagChanges, d.ecs, d.lookups, newScopeCollector(d), newFreshnessCollector(d)} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("dispatch: register metrics: %w", err)
		}
	}
	// The series of fixed labels, resolved once: a query counts without
	// looking its labels up.
	d.ecsBy = make(map[string]prometheus.Counter)
	for _, r := range []string{ecsNone, ecsUsed, ecsOptOut, ecsUntrusted} {
		d.ecsBy[r] = d.ecs.WithLabelValues(r)
	}
	d.lookupsBy = make(map[string]prometheus.Counter)
	for _, s := range []string{geo.SourceStatic, geo.SourceMMDB, geo.SourceDefault} {
		d.lookupsBy[s] = d.lookups.WithLabelValues(s)
	}
	return d, nil
}

// Load builds the locator and the groups of set and swaps them in (Prepare
// and commit in one step, nothing drained). On error nothing changes.
func (d *Dispatcher) Load(set *zones.Set) error {
	commit, err := d.Prepare(set, nil)
	if err != nil {
		return err
	}
	commit()
	return nil
}

// Prepare does everything that can fail to answer set, with the members in
// drained (group → member names) drained: it opens the GeoIP database and
// builds every group's policy. The returned commit swaps it in and can not
// fail; member health, pending loads and scope rates of the groups and
// members that stay are carried over at that moment. Nothing changes until
// commit is called.
func (d *Dispatcher) Prepare(set *zones.Set, drained map[string][]string) (commit func(), err error) {
	if set == nil || set.Config == nil {
		return nil, dnsd.ErrNoConfig
	}
	loc, err := newLocator(set)
	if err != nil {
		return nil, err
	}
	return d.prepare(set, drained, loc)
}

// PrepareMembers is Prepare for a change of membership or drains only: the
// locator in service is kept, the GeoIP database is not read again.
func (d *Dispatcher) PrepareMembers(set *zones.Set, drained map[string][]string) (commit func(), err error) {
	if set == nil || set.Config == nil {
		return nil, dnsd.ErrNoConfig
	}
	return d.prepare(set, drained, nil)
}

// prepare builds the groups' policies; a nil loc keeps the one in service.
func (d *Dispatcher) prepare(set *zones.Set, drained map[string][]string, loc *geo.Locator) (func(), error) {
	next := make(map[string]*dgroup, len(set.Groups))
	for name, gc := range set.Groups {
		policy, err := scheduler.New(gc.Policy.Name, scheduler.Params{
			LowWatermark: gc.Policy.LowWatermark, HighWatermark: gc.Policy.HighWatermark,
		})
		if err != nil {
			return nil, fmt.Errorf("dispatch: group %s: %w", name, err)
		}
		g := &dgroup{cfg: gc, policy: policy, states: make([]MemberState, len(gc.Members)),
			fresh: scheduler.FreshnessRule{MaxLag: gc.MaxLag.D(), MaxSkew: set.Config.Health.ReportMaxSkew.D()}}
		for i, m := range gc.Members {
			g.states[i].Drained = slices.Contains(drained[name], m.Name)
		}
		next[name] = g
	}
	return func() { d.commit(next, loc) }, nil
}

// commit swaps in the prepared groups (and locator, unless nil), carrying
// over what the groups in service have learned.
func (d *Dispatcher) commit(next map[string]*dgroup, loc *geo.Locator) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.snap.Load()
	if loc == nil {
		loc = cur.loc
	}
	now := d.now()
	for name, g := range next {
		prev := cur.groups[name]
		if prev != nil {
			g.rates, g.failOpen, g.shares, g.sent, g.remote = prev.rates, prev.failOpen, prev.shares, prev.sent, prev.remote
			g.lagEpisode, g.fresh.Master = prev.lagEpisode, prev.fresh.Master
			to := make([]int, len(prev.cfg.Members)) // old member index → new
			moved := len(prev.cfg.Members) != len(g.cfg.Members)
			for j, m := range prev.cfg.Members {
				to[j] = g.member(m.Name)
				moved = moved || to[j] != j
			}
			if moved {
				g.rates.Remap(to)
			}
			for i, m := range g.cfg.Members {
				if j := prev.member(m.Name); j >= 0 {
					g.states[i].Health, g.states[i].Freshness = prev.states[j].Health, prev.states[j].Freshness
				}
			}
		} else {
			g.rates = scheduler.NewScopeRates(scheduler.ScopeRatesConfig{MaxScopes: d.maxScopes})
			g.failOpen = new(atomic.Bool)
			g.shares = newAnswerCounts()
			g.sent = newDispatcherRates()
			g.remote = newRemotePending()
			g.lagEpisode = new(atomic.Bool)
			d.failOpen.WithLabelValues(name) // exported as 0 until the first episode
			d.lagFailOpen.WithLabelValues(name)
		}
		d.noteLagging(g, g.build(prev, now))
		g.applyRemote() // on estimators made anew, the other nodes' share
		g.answered = make([]prometheus.Counter, len(g.cfg.Members))
		for i, m := range g.cfg.Members {
			g.answered[i] = d.answers.WithLabelValues(g.cfg.Name, m.Name)
		}
	}
	// Forget the metric series of members and groups that are gone.
	for name, g := range cur.groups {
		ng := next[name]
		for _, m := range g.cfg.Members {
			if ng == nil || ng.member(m.Name) < 0 {
				d.answers.DeleteLabelValues(name, m.Name)
			}
		}
		if ng == nil {
			d.failOpen.DeleteLabelValues(name)
			d.lagFailOpen.DeleteLabelValues(name)
			d.lagChanges.DeletePartialMatch(prometheus.Labels{"group": name})
		}
	}
	d.snap.Store(&dsnap{loc: loc, groups: next})
}

// newLocator builds the locator of set's geo block, with the database
// path that Build resolved.
func newLocator(set *zones.Set) (*geo.Locator, error) {
	g := set.Config.Geo
	g.MMDB = set.MMDB
	loc, err := geo.FromConfig(g)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	return loc, nil
}

// location converts a configured location to the scheduler's.
func location(l zones.Location) scheduler.Location { return geo.LocationOf(l) }

// member returns the index of the member named name, or -1.
func (g *dgroup) member(name string) int {
	for i, m := range g.cfg.Members {
		if m.Name == name {
			return i
		}
	}
	return -1
}

// build judges the members' freshness and makes the per-family snapshots
// from cfg and states. Estimators are kept from prev when the family's
// members are the same, else rebuilt from the last reports. It returns the
// members whose lagging changed.
func (g *dgroup) build(prev *dgroup, now time.Time) []lagFlip {
	flips := g.judge(now)
	for fi := range g.fam {
		f := &family{pos: make([]int, len(g.cfg.Members))}
		var members []scheduler.Member
		for i, m := range g.cfg.Members {
			var addrs []netip.Addr
			for _, a := range m.Addresses {
				if a.Is4() == (fi == 0) {
					addrs = append(addrs, a)
				}
			}
			if len(addrs) == 0 {
				f.pos[i] = -1
				continue
			}
			st := g.states[i]
			f.pos[i] = len(f.idx)
			if st.Answered() {
				f.up++
			}
			f.idx = append(f.idx, i)
			f.addrs = append(f.addrs, addrs)
			members = append(members, scheduler.Member{
				Name: m.Name, Up: st.Answered(), Load: st.Load, BytesPerSecond: st.BytesPerSecond,
				Capacity: m.Capacity, Bandwidth: m.Bandwidth.BytesPerSecond(),
				Weight: m.Weight, Loc: location(m.Location),
			})
		}
		f.drained = g.cfg.WhenAllDrained == zones.WhenAllDrainedNoData && len(f.idx) > 0 &&
			!slices.ContainsFunc(f.idx, func(i int) bool { return !g.states[i].Drained })
		f.group = scheduler.NewGroup(members)
		if prev != nil && sameMembers(prev.fam[fi], prev.cfg, f, g.cfg) {
			f.src = prev.fam[fi].src
		} else {
			for s := range f.src {
				f.src[s] = scheduler.NewWindowEstimator(time.Duration(g.cfg.TTL.Max) * time.Second)
			}
			for k, i := range f.idx {
				if st := g.states[i]; !st.Reported.IsZero() {
					f.report(k, st.Health, now)
				}
			}
		}
		g.fam[fi] = f
	}
	return flips
}

// report gives member k's report to the sources its window ramps out:
// the own answers' and the redirects'. The other nodes' figures are
// theirs to ramp out.
func (f *family) report(k int, h Health, now time.Time) {
	f.src[srcOwn].ReportWindow(k, h.usage(), now, h.Window)
	f.src[srcRedirects].ReportWindow(k, h.usage(), now, h.Window)
}

func sameMembers(a *family, acfg *zones.GroupConfig, b *family, bcfg *zones.GroupConfig) bool {
	if a == nil || len(a.idx) != len(b.idx) {
		return false
	}
	for k := range a.idx {
		if acfg.Members[a.idx[k]].Name != bcfg.Members[b.idx[k]].Name {
			return false
		}
	}
	return true
}

// Observe takes a watcher update (probe.WatcherConfig.OnUpdate): the
// member's new health goes into the answers at once. Updates for groups or
// members that are not (or no longer) served are dropped.
func (d *Dispatcher) Observe(u probe.Update) {
	h := Health{State: u.State}
	if u.HasReport {
		r := u.Report
		h.Load, h.BytesPerSecond, h.Reported = r.Load, r.BytesPerSecond, r.Time
		h.Requests, h.GroupRequests, h.Window = r.R, r.GroupRequestsPerSecond, r.WindowOrDefault()
		h.Generation = r.Generation
	}
	_ = d.SetHealth(u.Group, u.Member, h)
}

// SetHealth records one member's new health. A change of state rebuilds
// the group's snapshot; a new report (a later Reported) goes to the
// estimator, which takes in the answers its window shows, and calibrates
// the group's scope rates. The report is taken as made now, on the
// dispatcher's clock, since the answers are timed by it. An unknown group
// or member is an error and changes nothing.
func (d *Dispatcher) SetHealth(group, member string, h Health) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur := d.snap.Load()
	g := cur.groups[dns.CanonicalName(group)]
	if g == nil {
		return fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
	}
	i := g.member(member)
	if i < 0 {
		return fmt.Errorf("%w: %s in %s", ErrUnknownMember, member, group)
	}
	prev := g.states[i].Health
	changed := h.State != prev.State || !h.Generation.Equal(prev.Generation)
	reported := !h.Reported.IsZero() && h.Reported.After(prev.Reported)
	if !changed && !reported {
		return nil
	}
	now := d.now()
	ng := *g
	ng.states = slices.Clone(g.states)
	ng.states[i].Health = h
	if changed {
		d.noteLagging(&ng, ng.build(g, now))
	}
	if reported {
		for _, f := range ng.fam {
			if k := f.pos[i]; k >= 0 {
				f.report(k, h, now)
			}
		}
		g.rates.Report(i, scheduler.MemberReport{Requests: h.Requests, GroupRequests: h.GroupRequests, Window: h.Window, At: now})
	}
	next := maps.Clone(cur.groups)
	next[g.cfg.Name] = &ng
	d.snap.Store(&dsnap{loc: cur.loc, groups: next})
	return nil
}

// MemberLive is what the dispatcher knows of a member at one moment.
type MemberLive struct {
	State MemberState
	// Pending is the hidden load of recent answers not yet in a report
	// (the larger of the two families').
	Pending float64
	// Answers is how many answers named the member in the last minute.
	Answers uint64
}

// Live returns the live figures of every member of group, by name.
func (d *Dispatcher) Live(group string) (map[string]MemberLive, bool) {
	g := d.groups()[dns.CanonicalName(group)]
	if g == nil {
		return nil, false
	}
	now := d.now()
	out := make(map[string]MemberLive, len(g.cfg.Members))
	for i, m := range g.cfg.Members {
		l := MemberLive{State: g.states[i], Answers: g.shares.count(m.Name, now)}
		for _, f := range g.fam {
			for k, j := range f.idx {
				if j == i {
					l.Pending = max(l.Pending, f.pending(k, now))
				}
			}
		}
		out[m.Name] = l
	}
	return out, true
}

// FailingOpen reports whether group is answering from all members because
// none is up.
func (d *Dispatcher) FailingOpen(group string) bool {
	g := d.groups()[dns.CanonicalName(group)]
	return g != nil && g.failOpen.Load()
}

// ErrUnknownMember is returned for a member name that is not in the group.
var ErrUnknownMember = errors.New("dispatch: unknown member")

// AnswerGroup answers one group question.
func (d *Dispatcher) AnswerGroup(_ context.Context, q dnsd.GroupQuery) (dnsd.GroupAnswer, error) {
	g := d.groups()[q.Group]
	if g == nil {
		return dnsd.GroupAnswer{ScopePrefix: -1}, fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, q.Group)
	}
	now := d.now()
	c := d.locate(q, g.policy.DependsOn())
	ans := dnsd.GroupAnswer{ScopePrefix: c.scope, TTL: g.cfg.TTL.Max}
	f := g.fam[familyOf(q.Qtype)]
	if len(f.idx) == 0 || f.drained {
		return ans, nil
	}
	ps := d.serial
	if ps == nil {
		ps = d.rands.Get().(*pickState)
		defer d.rands.Put(ps)
	}
	picked, failOpen := g.policy.Pick(f.group, scheduler.Query{
		Client: scheduler.Client{Loc: c.res.Loc, Key: scheduler.ScopeKey(c.prefix)},
		N:      answersOf(g.cfg), Rand: ps.rng, Now: now,
		Load: f.src[srcOwn], Also: f.src[srcOwn+1:],
	}, ps.buf[:0])
	// One round trip: the TTL from what is known of the scope, and the
	// answer recorded for the calibration.
	a := g.rates.Answer(c.prefix, f.scopeAnswer(g.cfg, familyOf(q.Qtype), picked), now)
	ans.TTL = a.TTL
	// The scope's load comes to the members picked and leaves those of
	// its previous answer, as their reports' windows will show.
	from := f.members(ps.from[:0], a.Prev)
	f.src[srcOwn].Move(picked, from, a.PrevN, scheduler.HiddenLoad(scheduler.AnswerRate(a.Rate, a.Copies)), a.PrevEnd, now)
	ans.Addrs = answerAddrs(q.Addrs[:0], f.addrs, picked, answersOf(g.cfg))
	for _, k := range picked {
		name := g.cfg.Members[f.idx[k]].Name
		g.answered[f.idx[k]].Inc()
		g.shares.add(name, now)
		if d.onAnswer != nil {
			d.onAnswer(g.cfg.Name, name, c.res.Loc)
		}
	}
	d.noteFailOpen(g, failOpen)
	d.noteLagFailOpen(g)
	return ans, nil
}

// answerAddrs appends to dst the addresses of the picked members (family
// indexes into addrs), at most n (the group's answers) in all: the first
// address of each picked member in the order picked, then the second of
// each, and so on. Every picked member (the policy picks at most n) is
// in the answer, a member with many addresses crowds out no other, and
// an answer's A or AAAA RRset has at most n records whatever the members
// hold: its size over UDP and TCP is bounded by the group's answers.
func answerAddrs(dst []netip.Addr, addrs [][]netip.Addr, picked []int, n int) []netip.Addr {
	for j := 0; len(dst) < n; j++ {
		more := false
		for _, k := range picked {
			if j >= len(addrs[k]) {
				continue
			}
			more = true
			if dst = append(dst, addrs[k][j]); len(dst) == n {
				return dst
			}
		}
		if !more {
			break
		}
	}
	return dst
}

// scopeAnswer is what ScopeRates records of an answer naming picked
// (family indexes) and the bounds of its TTL.
func (f *family) scopeAnswer(gc *zones.GroupConfig, fam int, picked []int) scheduler.ScopeAnswer {
	var mask uint64
	for _, k := range picked {
		if i := f.idx[k]; i < scheduler.MaxTrackedMembers {
			mask |= 1 << i
		}
	}
	return scheduler.ScopeAnswer{Family: fam, Members: mask, N: len(picked),
		Min: gc.TTL.Min, Max: gc.TTL.Max, Unseen: gc.TTL.Unseen, Fair: f.up}
}

// members appends to dst the family indexes of the members in mask (by
// member index), as many as dst has room for.
func (f *family) members(dst []int, mask uint64) []int {
	for ; mask != 0 && len(dst) < cap(dst); mask &= mask - 1 {
		i := bits.TrailingZeros64(mask)
		if i < len(f.pos) && f.pos[i] >= 0 {
			dst = append(dst, f.pos[i])
		}
	}
	return dst
}

func familyOf(qtype uint16) int {
	if qtype == dns.TypeAAAA {
		return 1
	}
	return 0
}

func answersOf(gc *zones.GroupConfig) int {
	if gc.Answers > 0 {
		return gc.Answers
	}
	return dnsd.DefaultAnswers
}

// noteFailOpen counts fail-open answers and logs each episode once.
func (d *Dispatcher) noteFailOpen(g *dgroup, failOpen bool) {
	if failOpen {
		d.failOpen.WithLabelValues(g.cfg.Name).Inc()
	}
	if g.failOpen.CompareAndSwap(!failOpen, failOpen) {
		if failOpen {
			d.log.Warn("no member is up: answering with all members", "group", g.cfg.Name)
		} else {
			d.log.Info("members are up again: fail-open over", "group", g.cfg.Name)
		}
		if d.onFailOpen != nil {
			d.onFailOpen(g.cfg.Name, failOpen)
		}
	}
}

// located is where a query's client is and the ECS scope that follows.
type located struct {
	prefix netip.Prefix // the client prefix the answer is for
	res    geo.Result
	scope  int // reply ECS scope, -1 for no option
	ecs    string
}

// locate finds the client of q. The reply scope is the prefix length the
// answer really depended on: the geo scope for proximity policies, the
// client prefix for hash, 0 for policies that ignore the client.
func (d *Dispatcher) locate(q dnsd.GroupQuery, dep scheduler.Dependence) located {
	hasECS := q.ECS.IsValid()
	c := located{prefix: geo.ClientPrefix(q.Client, q.ECS, hasECS), scope: -1, ecs: ecsNone}
	if loc := d.snap.Load().loc; loc != nil {
		c.res = loc.Locate(c.prefix)
	} else {
		c.res = geo.Result{Source: geo.SourceDefault}
	}
	if n := d.lookupsBy[c.res.Source]; n != nil {
		n.Inc()
	} else {
		d.lookups.WithLabelValues(c.res.Source).Inc()
	}
	if hasECS {
		switch {
		case geo.ECSOptOut(q.ECS):
			c.ecs = ecsOptOut
		case !geo.TrustedECS(q.ECS):
			c.ecs = ecsUntrusted
		default:
			c.ecs = ecsUsed
		}
		switch dep {
		case scheduler.DependsOnLocation:
			c.scope = geo.ReplyScope(q.ECS, c.res)
		case scheduler.DependsOnPrefix:
			c.scope = geo.ReplyScope(q.ECS, geo.Result{Scope: c.prefix.Bits()})
		default:
			c.scope = 0
		}
	}
	d.ecsBy[c.ecs].Inc()
	return c
}
