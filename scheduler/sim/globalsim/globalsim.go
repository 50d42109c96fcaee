package globalsim

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/scheduler"
	"github.com/transmirror/transmirror/scheduler/geo"
	"github.com/transmirror/transmirror/scheduler/sim/workload"
	"github.com/transmirror/transmirror/zones"
)

// World is who asks: each client's resolver, each resolver's region and,
// when it is not its resolver's (a public resolver's clients are all
// over), each client's region.
type World struct {
	ClientResolver []uint32
	ResolverRegion []uint16
	// ClientRegion, when not nil, is each client's region.
	ClientRegion []uint16
}

// Workload is what a run replays: requests in time order (their Client
// indexes World.ClientResolver; their Object names the path asked for,
// their Size the response's body) and the world they come from.
type Workload struct {
	Requests iter.Seq[workload.Request]
	World    World
}

// node is one dnsd of the NS set: the dispatcher that answers and the
// controller whose view the mirrors fetch.
type node struct {
	disp *dispatch.Dispatcher
	ctl  *members.Controller
}

// cacheKey is what a resolver caches an answer under: itself and, with
// ECS, the client prefix of the answer's scope.
type cacheKey struct {
	resolver uint32
	scope    netip.Prefix
}

// cached is a resolver's cached answer.
type cached struct {
	mirror  int
	expires int64
}

// sim is one run in progress.
type sim struct {
	c       Config
	w       World
	now     time.Time
	nodes   []node
	mirrors []*mirror
	byHost  map[string]int
	byAddr  map[netip.Addr]int
	locs    []scheduler.Location // the regions'
	reports *reports
	cache   map[cacheKey]cached
	scopes  map[uint32][]int // the scope lengths each resolver has cached under (-1: no ECS)
	next    struct{ push, view time.Time }
	size    uint64 // the body of the request being served
	acc     accumulator
}

// Run replays w through the group c describes.
func Run(c Config, w Workload) (Result, error) {
	c, err := c.withDefaults()
	if err != nil {
		return Result{}, err
	}
	if len(w.World.ResolverRegion) == 0 || len(w.World.ResolverRegion) > 1<<17 {
		return Result{}, fmt.Errorf("globalsim: %d resolvers, want 1 to %d", len(w.World.ResolverRegion), 1<<17)
	}
	dir, err := os.MkdirTemp("", "globalsim")
	if err != nil {
		return Result{}, fmt.Errorf("globalsim: %w", err)
	}
	defer os.RemoveAll(dir)
	set, err := buildSet(c, dir)
	if err != nil {
		return Result{}, err
	}
	s, err := newSim(c, w.World, set)
	if err != nil {
		return Result{}, err
	}
	n := 0
	for rq := range w.Requests {
		if err := s.request(rq); err != nil {
			return Result{}, fmt.Errorf("globalsim: request %d: %w", n, err)
		}
		n++
	}
	return s.acc.result(c, s), nil
}

// newSim builds the NS set and the mirrors of c.
func newSim(c Config, w World, set *zones.Set) (*sim, error) {
	s := &sim{c: c, w: w, byHost: map[string]int{}, byAddr: map[netip.Addr]int{}, reports: &reports{m: map[string]probe.Report{}},
		cache: map[cacheKey]cached{}, scopes: map[uint32][]int{}}
	clock := func() time.Time { return s.now }
	for k := range c.Nodes {
		d, err := dispatch.New(dispatch.Options{Registry: prometheus.NewRegistry(), Now: clock, Seed: c.Seed*31 + uint64(k) + 1, Serial: true})
		if err != nil {
			return nil, fmt.Errorf("globalsim: %w", err)
		}
		ctl, err := members.New(members.Options{Registry: prometheus.NewRegistry(), Answers: d, Server: noServer{}, Watcher: s.reports, Now: clock})
		if err != nil {
			return nil, fmt.Errorf("globalsim: %w", err)
		}
		if err := ctl.Load(set); err != nil {
			return nil, fmt.Errorf("globalsim: %w", err)
		}
		s.nodes = append(s.nodes, node{disp: d, ctl: ctl})
	}
	loc, err := geo.FromConfig(set.Config.Geo)
	if err != nil {
		return nil, fmt.Errorf("globalsim: %w", err)
	}
	for _, r := range c.Regions {
		s.locs = append(s.locs, geo.LocationOf(location(r)))
	}
	for i := range c.Mirrors {
		m, err := newMirror(s, i, clock, loc)
		if err != nil {
			return nil, err
		}
		s.mirrors = append(s.mirrors, m)
		s.byHost[strings.TrimSuffix(m.host, ".")] = i
		s.byAddr[mirrorAddr(i)] = i
	}
	return s, nil
}

// request replays one request: the clock moves to it (the pushes and
// views due by then happen first), its resolver answers it from its
// cache or asks dnsd, and the client gets it from the mirror, following
// one redirect.
func (s *sim) request(rq workload.Request) error {
	at := time.Unix(0, rq.At)
	if s.next.push.IsZero() {
		s.start(at)
	}
	if at.Before(s.now) {
		return errors.New("out of time order")
	}
	s.advance(at)
	if int(rq.Client) >= len(s.w.ClientResolver) {
		return fmt.Errorf("client %d of %d", rq.Client, len(s.w.ClientResolver))
	}
	r := s.w.ClientResolver[rq.Client]
	if int(r) >= len(s.w.ResolverRegion) {
		return fmt.Errorf("client %d: resolver %d of %d", rq.Client, r, len(s.w.ResolverRegion))
	}
	region := int(s.w.ResolverRegion[r])
	if s.w.ClientRegion != nil {
		region = int(s.w.ClientRegion[rq.Client])
	}
	if region >= len(s.c.Regions) {
		return fmt.Errorf("client %d: region %d of %d", rq.Client, region, len(s.c.Regions))
	}
	client := clientAddr(region, rq.Client)
	first, err := s.resolve(r, client)
	if err != nil {
		return err
	}
	return s.fetch(rq, first, client, region)
}

// fetch has the client get rq from mirror first, following a redirect
// to a sibling once, and counts what happened.
func (s *sim) fetch(rq workload.Request, first int, client netip.Addr, region int) error {
	path := "/o/" + strconv.FormatUint(uint64(rq.Object), 10)
	s.size = rq.Size
	code, to, err := s.mirrors[first].serve(groupName, path, client)
	if err != nil {
		return err
	}
	by, redirected := first, false
	if code == 302 {
		t, ok := s.byHost[strings.TrimSuffix(to, ".")]
		if !ok || t == first {
			return fmt.Errorf("%s redirected to %q", s.mirrors[first].name, to)
		}
		if code, _, err = s.mirrors[t].serve(to, path, client); err != nil {
			return err
		}
		by, redirected = t, true
	}
	if code != 200 && code != 404 {
		return fmt.Errorf("%s answered %d", s.mirrors[by].name, code)
	}
	s.acc.note(s, first, by, redirected, code == 404, scheduler.DistanceKm(s.locs[region], s.locs[s.c.Mirrors[by].Region]))
	return nil
}

// resolve returns the mirror resolver r sends client to: its cached
// answer for the client's scope, else a new one from its dnsd node.
func (s *sim) resolve(r uint32, client netip.Addr) (int, error) {
	var ecs netip.Prefix
	if s.c.ECS {
		ecs = netip.PrefixFrom(client, 24).Masked()
	}
	now := s.now.UnixNano()
	for _, bits := range s.scopes[r] {
		if e, ok := s.cache[cacheKey{r, scopeOf(ecs, bits)}]; ok && now < e.expires {
			return e.mirror, nil
		}
	}
	s.acc.queries++
	k := int(r) % len(s.nodes)
	ans, err := s.nodes[k].disp.AnswerGroup(context.Background(), dnsd.GroupQuery{Group: groupName, Qtype: dns.TypeA,
		Client: resolverAddr(int(s.w.ResolverRegion[r]), r), ECS: ecs})
	if err != nil {
		return 0, err
	}
	if len(ans.Addrs) == 0 {
		return 0, errors.New("dnsd answered no address")
	}
	m, ok := s.byAddr[ans.Addrs[0]]
	if !ok {
		return 0, fmt.Errorf("dnsd answered %v, no mirror's", ans.Addrs[0])
	}
	bits := -1
	if s.c.ECS && ans.ScopePrefix >= 0 {
		bits = min(ans.ScopePrefix, 24)
	}
	ttl := max(time.Duration(ans.TTL)*time.Second, s.c.MinTTL)
	s.cache[cacheKey{r, scopeOf(ecs, bits)}] = cached{mirror: m, expires: now + int64(ttl)}
	if !slices.Contains(s.scopes[r], bits) {
		s.scopes[r] = append(s.scopes[r], bits)
	}
	return m, nil
}

// scopeOf is the cache key's prefix of ecs at bits (-1: none).
func scopeOf(ecs netip.Prefix, bits int) netip.Prefix {
	if bits < 0 || !ecs.IsValid() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(ecs.Addr(), bits).Masked()
}

// start sets the clock to the first request's time, has every mirror
// report and fetch its view.
func (s *sim) start(at time.Time) {
	s.now = at
	s.acc.start(s, at)
	s.push()
	s.view()
	s.next.push, s.next.view = at.Add(s.c.PushInterval), at.Add(s.c.ViewInterval)
}

// advance runs the pushes and views due up to at, in time order, and
// sets the clock to at.
func (s *sim) advance(at time.Time) {
	for {
		t := s.next.push
		if s.next.view.Before(t) {
			t = s.next.view
		}
		if t.After(at) {
			break
		}
		s.now = t
		if t.Equal(s.next.push) {
			s.push()
			s.next.push = t.Add(s.c.PushInterval)
		}
		if t.Equal(s.next.view) {
			s.view()
			s.next.view = t.Add(s.c.ViewInterval)
		}
	}
	s.now = at
}

// push is every mirror's load report to every node, then the NS set's
// exchange of what each node booked and explains.
func (s *sim) push() {
	for _, m := range s.mirrors {
		r := m.rep.Snapshot(s.now)
		s.reports.m[m.name] = r
		for _, n := range s.nodes {
			n.disp.Observe(probe.Update{Group: groupName, Member: m.name, State: probe.StateUp, Report: r, HasReport: true})
		}
	}
	if len(s.nodes) < 2 {
		return
	}
	for k, n := range s.nodes {
		name := "ns" + strconv.Itoa(k+1)
		pending, explained := n.disp.LocalPending()[groupName], n.disp.LocalExplained()[groupName]
		for j, o := range s.nodes {
			if j != k {
				_ = o.disp.SetRemotePending(groupName, name, pending)
				_ = o.disp.SetRemoteExplained(groupName, name, explained)
			}
		}
	}
}

// view has every mirror take the group view from its node, as its view
// watcher does.
func (s *sim) view() {
	for i, m := range s.mirrors {
		v, err := s.nodes[i%len(s.nodes)].ctl.View(groupName)
		if err != nil {
			continue // the group is in the set: it does not happen
		}
		if snap, err := group.NewGroupSnapshot(v, m.name, s.now, 3*s.c.ViewInterval, group.RedirectBooking{Sent: m.sent}); err == nil {
			m.view.s = snap
		}
	}
}

// reports is the nodes' record of the mirrors' last reports, what the
// view shows of each member (members.Watcher: the simulation has no
// prober; the mirrors push).
type reports struct{ m map[string]probe.Report }

func (r *reports) Add(probe.MemberSpec) error    { return nil }
func (r *reports) Update(probe.MemberSpec) error { return nil }
func (r *reports) Remove(string, string) error   { return nil }
func (r *reports) SetHealth(probe.HealthConfig)  {}
func (r *reports) State(_, member string) (probe.MemberStatus, bool) {
	rep, ok := r.m[member]
	return probe.MemberStatus{State: probe.StateUp, Report: rep, HasReport: ok}, true
}

// noServer is the DNS server the controllers prepare nothing for.
type noServer struct{}

func (noServer) Prepare(*zones.Set) (func(), error) { return func() {}, nil }
