package members

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// Errors of the membership API.
var (
	// ErrStaticMember: the member is in the config file; change it there.
	ErrStaticMember = errors.New("members: member is in the config file; remove it there")
	// ErrInvalidMember: a GROUP-ADD body that is not a valid member.
	ErrInvalidMember = errors.New("members: invalid member")
	// ErrNoSecret: the group has no secret, so nothing can be signed for it.
	ErrNoSecret = errors.New("members: group has no secret: writes are disabled")
)

// Watcher is what the Controller needs from the prober.
type Watcher interface {
	Add(probe.MemberSpec) error
	Update(probe.MemberSpec) error
	Remove(group, member string) error
	State(group, member string) (probe.MemberStatus, bool)
	SetHealth(probe.HealthConfig)
}

// Answers is what the Controller needs from the dispatcher: prepare a Set
// with its drains (everything that can fail), then commit (a swap that can
// not fail). PrepareMembers is for a change of membership or drains only,
// and keeps what does not depend on them (the GeoIP database).
type Answers interface {
	Prepare(set *zones.Set, drained map[string][]string) (commit func(), err error)
	PrepareMembers(set *zones.Set, drained map[string][]string) (commit func(), err error)
	Live(group string) (map[string]dispatch.MemberLive, bool)
	FailingOpen(group string) bool
	LaggingFailOpen(group string) bool
}

// Snapshotter is what the Controller needs from the DNS server: prepare the
// query-time snapshot of a config Set, then commit it.
type Snapshotter interface {
	Prepare(set *zones.Set) (commit func(), err error)
}

// Options configure a Controller.
type Options struct {
	Logger *slog.Logger
	// Registry gets the controller's metrics; nil keeps them private.
	Registry prometheus.Registerer
	// Answers answers the groups: it gets every new membership.
	Answers Answers
	// Server serves the zones: it gets every new config.
	Server Snapshotter
	// Watcher probes the members; nil probes nothing.
	Watcher Watcher
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Store keeps the run-time state; nil is the state file that the
	// config names (a FileStore, opened again when a reload names
	// another). A store shared by an NS set (package cluster) is given
	// here, and reports changes made by other nodes through Apply.
	Store Store
}

// maxSaveAttempts bounds how often a change is tried again after losing
// a race with another node (each loss means another change was made).
const maxSaveAttempts = 64

// Controller owns the membership of the groups: the members of the config
// file plus those added at run time (GROUP-ADD, persisted in the state
// file) and operator drains; it never sees a load report (package intake
// takes them to the watcher, which watches every member). Every
// change is prepare (everything that can fail: validate, build the new
// answers) → persist (the state file, atomically) → commit (swaps that can
// not fail); a failed prepare or persist changes nothing, in memory or on
// disk. Member health does not pass through it: the watcher's updates go to
// the dispatcher directly, or, in an NS set, through the cluster store,
// which combines every node's view when quorum is on (cluster.Store.Observe).
type Controller struct {
	log   *slog.Logger
	disp  Answers
	srv   Snapshotter
	watch Watcher
	now   func() time.Time

	mu       sync.Mutex // serialises changes and store writes
	base     *zones.Set // the config file's set
	fixed    Store      // Options.Store, nil: the config's state file
	store    Store      // the store in use
	path     string     // state file of the FileStore in use
	state    State      // the run-time state served, as stored
	current  atomic.Pointer[zones.Set]
	watching map[string]probe.MemberSpec // "group\x00member" → spec

	changes *prometheus.CounterVec
}

// New returns a Controller. It reads nothing yet: Load reads the
// state file named by the config.
func New(o Options) (*Controller, error) {
	c := &Controller{
		log: o.Logger, disp: o.Answers, srv: o.Server, watch: o.Watcher, now: o.Now,
		fixed: o.Store, state: NewState(),
		watching: make(map[string]probe.MemberSpec),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.disp == nil || c.srv == nil {
		return nil, errors.New("members: controller needs a dispatcher and a server")
	}
	c.changes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "membership_changes_total",
		Help: "Run-time membership changes by operation (add, remove, drain, undrain) and result (ok, error).",
	}, []string{"op", "result"})
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if err := reg.Register(c.changes); err != nil {
		return nil, fmt.Errorf("members: register metrics: %w", err)
	}
	for _, op := range []string{"add", "remove", "drain", "undrain"} {
		for _, r := range []string{"ok", "error"} {
			c.changes.WithLabelValues(op, r)
		}
	}
	return c, nil
}

// Current returns the set being served: config plus run-time members.
func (c *Controller) Current() *zones.Set { return c.current.Load() }

// Load takes a new config Set (at start and on every reload): Prepare,
// then commit, with no membership change in between.
func (c *Controller) Load(base *zones.Set) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	commit, err := c.prepare(base)
	if err != nil {
		return err
	}
	commit()
	return nil
}

// Check does everything that loading the config Set base can fail at, and
// changes nothing: the first Prepare, and one for a config that names
// another state file, read the state file (a corrupt one is an error); the
// run-time members are merged in with the config's rules; the dispatcher
// opens the GeoIP database and builds the groups' policies; the server
// builds its snapshot. Load does the same, then swaps all of it in (a
// commit that can not fail); dnsd -check does only this. Run-time
// members of groups that are no longer configured, or whose names the
// config now uses, stay in the state file but are not served (logged).
func (c *Controller) Check(base *zones.Set) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.prepare(base)
	return err
}

// prepare is Check, returning the commit; c.mu is held for both.
func (c *Controller) prepare(base *zones.Set) (commit func(), err error) {
	st, store, path := c.state, c.store, c.path
	var dropped map[string]int // entries of the state file past a group's cap
	switch {
	case c.fixed != nil && c.base == nil:
		store = c.fixed
		if st, err = store.Load(); err != nil {
			return nil, err
		}
	case c.fixed == nil && (c.base == nil || base.StateFile != c.path):
		fs := NewFileStore(base.StateFile)
		if st, err = fs.Load(); err != nil {
			return nil, err
		}
		store, path, dropped = fs, base.StateFile, fs.Dropped()
	}
	set, err := c.merge(base, st, dropped)
	if err != nil {
		return nil, err
	}
	commitAnswers, err := c.disp.Prepare(set, drains(st))
	if err != nil {
		return nil, err
	}
	commitServer, err := c.srv.Prepare(set)
	if err != nil {
		return nil, err
	}
	return func() {
		commitAnswers()
		commitServer()
		c.base, c.store, c.path, c.state = base, store, path, st
		c.current.Store(set)
		if c.watch != nil {
			h := set.Config.Health
			c.watch.SetHealth(probe.HealthConfig{Rise: h.Rise, Fall: h.Fall,
				ReportMaxSkew: h.ReportMaxSkew.D(), ReportMaxAge: h.ReportMaxAge.D()})
		}
		c.syncWatcher(set)
	}, nil
}

// merge builds the served Set from base and the run-time members of st,
// leaving out those that no longer fit: the members of a group that is
// not configured, those past its max_runtime_members (not even
// validated), and invalid ones. dropped are the entries of each group
// that the state file held past the most a group can have (FileStore.
// Dropped; nil for none). The first maxLoggedProblems of these are logged
// one by one, the rest summed up in one line: a state file of 200,000
// members makes a handful of lines, not 200,000.
func (c *Controller) merge(base *zones.Set, st State, dropped map[string]int) (*zones.Set, error) {
	p := &problems{log: c.log}
	for _, g := range slices.Sorted(maps.Keys(dropped)) {
		p.warn("state file: entries past the most a group can have not read", "group", g, "entries", dropped[g], "max", zones.MaxGroupMembers)
	}
	extra := make(map[string][]zones.MemberConfig)
	for _, g := range slices.Sorted(maps.Keys(st.Groups)) {
		ms := st.Groups[g].Members
		gc := base.Group(g)
		if gc == nil {
			if len(ms) > 0 {
				p.warn("run-time members not served", "group", g, "members", len(ms), "err", zones.ErrUnknownGroup)
			}
			continue
		}
		for i, info := range ms {
			if len(extra[g]) >= gc.MaxRuntimeMembers {
				p.warn("run-time members not served", "group", g, "members", len(ms)-i,
					"err", fmt.Errorf("%w: max_runtime_members is %d", zones.ErrTooManyMembers, gc.MaxRuntimeMembers))
				break
			}
			mc, err := memberConfig(info)
			if err == nil {
				_, err = base.WithMembers(map[string][]zones.MemberConfig{g: {mc}})
			}
			if err != nil {
				p.warn("run-time member not served", "group", g, "member", info.Name, "err", err)
				continue
			}
			extra[g] = append(extra[g], mc)
		}
	}
	p.summary()
	return base.WithMembers(extra)
}

// maxLoggedProblems is how many problems of the run-time state merge logs
// one by one; the rest are counted in one line.
const maxLoggedProblems = 5

// problems logs the first maxLoggedProblems warnings and counts the rest.
type problems struct {
	log *slog.Logger
	n   int
}

func (p *problems) warn(msg string, args ...any) {
	p.n++
	if p.n <= maxLoggedProblems {
		p.log.Warn(msg, args...)
	}
}

// summary logs how many problems there were, when not all were logged.
func (p *problems) summary() {
	if p.n > maxLoggedProblems {
		p.log.Warn("run-time state: more problems, not logged one by one", "problems", p.n, "logged", maxLoggedProblems)
	}
}

// memberConfig converts a GROUP-ADD body into a member config; zones
// validates the rest.
func memberConfig(info api.MemberInfo) (zones.MemberConfig, error) {
	mc := zones.MemberConfig{
		Name: info.Name, Host: info.Host, Capacity: info.Capacity, Bandwidth: zones.Bandwidth(info.Bandwidth),
		Weight: info.Weight, Probe: info.Probe, Joined: info.Joined,
		Location: zones.Location{Lat: info.Location.Lat, Lon: info.Location.Lon,
			Country: info.Location.Country, Continent: info.Location.Continent},
	}
	for i, s := range info.Addresses {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return mc, fmt.Errorf("%w: member %q: addresses[%d]: %q is not an IP address", ErrInvalidMember, info.Name, i, s)
		}
		mc.Addresses = append(mc.Addresses, a)
	}
	return mc, nil
}

// memberInfo is the inverse of memberConfig.
func memberInfo(m zones.MemberConfig) api.MemberInfo {
	info := api.MemberInfo{
		Name: m.Name, Host: m.Host, Capacity: m.Capacity, Bandwidth: m.Bandwidth.BytesPerSecond(),
		Weight: m.Weight, Probe: m.Probe, Joined: m.Joined,
		Location: api.LocationView{Lat: m.Location.Lat, Lon: m.Location.Lon,
			Country: m.Location.Country, Continent: m.Location.Continent},
	}
	for _, a := range m.Addresses {
		info.Addresses = append(info.Addresses, a.String())
	}
	return info
}

// Add is GROUP-ADD: it validates info with the config's rules and those
// of run-time members (zones.Set.WithMembers: globally reachable
// addresses unless the group has allow_private, host names, bounds, at
// most max_runtime_members), persists it and serves it. On any error
// nothing changes.
func (c *Controller) Add(group string, info api.MemberInfo) (api.MemberInfo, error) {
	out, err := c.add(group, info)
	c.count("add", err)
	return out, err
}

func (c *Controller) add(group string, info api.MemberInfo) (api.MemberInfo, error) {
	group = dns.CanonicalName(group)
	mc, err := memberConfig(info)
	if err != nil {
		return api.MemberInfo{}, err
	}
	var added zones.MemberConfig
	err = c.update(group, func(cur *zones.Set, gs GroupState) (*zones.Set, GroupState, error) {
		set, err := cur.WithMembers(map[string][]zones.MemberConfig{group: {mc}})
		if err != nil {
			if errors.Is(err, zones.ErrDuplicateMember) || errors.Is(err, zones.ErrTooManyMembers) {
				return nil, gs, err
			}
			return nil, gs, fmt.Errorf("%w: %w", ErrInvalidMember, err)
		}
		added = set.Group(group).Members[len(set.Group(group).Members)-1]
		gs.Members = append(gs.Members, memberInfo(added))
		return set, gs, nil
	})
	if err != nil {
		return api.MemberInfo{}, err
	}
	c.log.Info("member added", "group", group, "member", added.Name)
	return memberInfo(added), nil
}

// Remove is GROUP-EXIT: the member leaves the answers at once. Members of
// the config file can not be removed this way.
func (c *Controller) Remove(group, member string) error {
	err := c.remove(group, member)
	c.count("remove", err)
	return err
}

func (c *Controller) remove(group, member string) error {
	group = dns.CanonicalName(group)
	err := c.update(group, func(cur *zones.Set, gs GroupState) (*zones.Set, GroupState, error) {
		g := cur.Group(group)
		i := slices.IndexFunc(g.Members, func(m zones.MemberConfig) bool { return m.Name == member })
		if i < 0 {
			return nil, gs, fmt.Errorf("%w: %s in %s", dispatch.ErrUnknownMember, member, group)
		}
		if !g.Members[i].Runtime {
			return nil, gs, fmt.Errorf("%w: %s in %s", ErrStaticMember, member, group)
		}
		gs.Members = slices.DeleteFunc(gs.Members, func(m api.MemberInfo) bool { return m.Name == member })
		gs.Drained = slices.DeleteFunc(gs.Drained, func(m string) bool { return m == member })
		return nil, gs, nil
	})
	if err != nil {
		return err
	}
	c.log.Info("member removed", "group", group, "member", member)
	return nil
}

// Drain stops (on) or resumes (off) answering with a member; it keeps
// being probed. The drain survives restarts.
func (c *Controller) Drain(group, member string, on bool) error {
	err := c.drain(group, member, on)
	op := "drain"
	if !on {
		op = "undrain"
	}
	c.count(op, err)
	return err
}

func (c *Controller) drain(group, member string, on bool) error {
	group = dns.CanonicalName(group)
	err := c.update(group, func(cur *zones.Set, gs GroupState) (*zones.Set, GroupState, error) {
		if !slices.ContainsFunc(cur.Group(group).Members, func(m zones.MemberConfig) bool { return m.Name == member }) {
			return nil, gs, fmt.Errorf("%w: %s in %s", dispatch.ErrUnknownMember, member, group)
		}
		gs.Drained = slices.DeleteFunc(gs.Drained, func(m string) bool { return m == member })
		if on {
			gs.Drained = append(gs.Drained, member)
		}
		return cur, gs, nil
	})
	if err != nil {
		return err
	}
	c.log.Info("member drain changed", "group", group, "member", member, "drained", on)
	return nil
}

// update is a membership change of group: edit gets the served set and
// a copy of the group's run-time state and returns the new state, with
// the set it serves (nil: merged again from the config). Then prepare
// the answers (everything that can fail), save the state to the store,
// commit (swaps that can not fail). When another node saved the group
// first, its state is served and edit runs again on it: two concurrent
// changes never lose one. On any other error nothing changed.
func (c *Controller) update(group string, edit func(cur *zones.Set, gs GroupState) (*zones.Set, GroupState, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 1; ; attempt++ {
		cur := c.current.Load()
		if cur == nil || cur.Group(group) == nil {
			return fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
		}
		set, gs, err := edit(cur, c.state.Groups[group].Clone())
		if err != nil {
			return err
		}
		st := c.state.Clone()
		if gs.Empty() {
			delete(st.Groups, group)
		} else {
			st.Groups[group] = gs
		}
		if set == nil {
			if set, err = c.merge(c.base, st, nil); err != nil {
				return err
			}
		}
		commit, err := c.disp.PrepareMembers(set, drains(st))
		if err != nil {
			return err
		}
		rev, err := c.store.Save(group, c.state.Revisions[group], gs)
		var conflict *ConflictError
		if errors.As(err, &conflict) && attempt < maxSaveAttempts {
			c.log.Debug("membership change lost a race: again on the newer state", "group", group, "revision", conflict.Revision)
			next := c.state.Clone()
			next.Groups[group], next.Revisions[group] = conflict.State, conflict.Revision
			if conflict.State.Empty() {
				delete(next.Groups, group)
			}
			if err := c.applyLocked(next); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		st.Revisions[group] = rev
		commit()
		c.state = st
		c.current.Store(set)
		c.syncWatcher(set)
		return nil
	}
}

// Apply serves the groups of st whose revision is newer than the one
// served: changes another node of an NS set made, as the shared store
// reports them (watched). The store has them already, so nothing is
// persisted: prepare, then commit. A state that does not prepare is
// returned as the error and not served.
func (c *Controller) Apply(st State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.state.Clone()
	changed := false
	for g, rev := range st.Revisions {
		if rev <= next.Revisions[g] {
			continue
		}
		changed = true
		next.Revisions[g] = rev
		if gs := st.Groups[g]; gs.Empty() {
			delete(next.Groups, g)
		} else {
			next.Groups[g] = gs.Clone()
		}
	}
	if !changed {
		return nil
	}
	return c.applyLocked(next)
}

// Replace serves st whole, whatever the revisions: the shared store's
// state read again after it was away (a store started afresh counts
// from the start again).
func (c *Controller) Replace(st State) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applyLocked(st.Clone())
}

// applyLocked serves st, a state already stored; c.mu held.
func (c *Controller) applyLocked(st State) error {
	if c.base == nil {
		c.state = st // not loaded yet: Load serves it
		return nil
	}
	set, err := c.merge(c.base, st, nil)
	if err != nil {
		return err
	}
	commit, err := c.disp.PrepareMembers(set, drains(st))
	if err != nil {
		return err
	}
	commit()
	c.state = st
	c.current.Store(set)
	c.syncWatcher(set)
	return nil
}

// drains are the drained members of st by group, as the dispatcher takes
// them.
func drains(st State) map[string][]string {
	out := make(map[string][]string, len(st.Groups))
	for g, gs := range st.Groups {
		if len(gs.Drained) > 0 {
			out[g] = slices.Clone(gs.Drained)
		}
	}
	return out
}

func (c *Controller) count(op string, err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	c.changes.WithLabelValues(op, r).Inc()
}

// Secrets returns the secrets that the group's signed requests may be
// made with now: its secret, then, while a rotation's
// previous_secret_until has not passed, the previous one.
func (c *Controller) Secrets(group string) ([][]byte, error) {
	set := c.current.Load()
	if set == nil {
		return nil, dnsd.ErrNoConfig
	}
	g := set.Group(group)
	if g == nil {
		return nil, fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
	}
	if g.Secret == "" {
		return nil, fmt.Errorf("%w: %s", ErrNoSecret, g.Name)
	}
	return g.Secrets(c.now()), nil
}

// SignatureWindow is the configured window of signed requests.
func (c *Controller) SignatureWindow() time.Duration {
	if set := c.current.Load(); set != nil {
		return set.Config.Health.SignatureWindow.D()
	}
	return api.DefaultSignatureWindow
}

// spec is the watcher spec of a member of group.
func (c *Controller) spec(group string, m zones.MemberConfig) probe.MemberSpec {
	set := c.current.Load()
	h := set.Config.Health
	g := set.Group(group)
	return probe.MemberSpec{Group: group, Member: m.Name, URL: m.Probe,
		Interval: h.Interval.D(), Jitter: h.Jitter.D(), Timeout: h.Timeout.D(), Capacity: m.Capacity,
		PublicOnly: g.PublicOnly(m)}
}

// syncWatcher makes the watcher watch exactly the members of set: those
// with a probe URL are pulled, the others (push-only) are watched with
// none and wait for their first push. Called with c.mu held.
func (c *Controller) syncWatcher(set *zones.Set) {
	if c.watch == nil {
		return
	}
	want := make(map[string]probe.MemberSpec)
	for _, g := range set.Groups {
		for _, m := range g.Members {
			want[g.Name+"\x00"+m.Name] = c.spec(g.Name, m)
		}
	}
	for key, spec := range c.watching {
		if _, ok := want[key]; !ok {
			if err := c.watch.Remove(spec.Group, spec.Member); err != nil {
				c.log.Warn("watcher remove", "group", spec.Group, "member", spec.Member, "err", err)
			}
			delete(c.watching, key)
		}
	}
	for key, spec := range want {
		old, ok := c.watching[key]
		var err error
		switch {
		case !ok:
			err = c.watch.Add(spec)
		case old != spec:
			err = c.watch.Update(spec)
		}
		if err != nil {
			c.log.Warn("watcher", "group", spec.Group, "member", spec.Member, "err", err)
			continue
		}
		c.watching[key] = spec
	}
}
