package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd/acme"
	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

var (
	_ members.Store = (*Store)(nil)
	_ HealthSink    = (*dispatch.Dispatcher)(nil)
)

// Options configure a Store.
type Options struct {
	// Config is the cluster block (zones.Build defaulted it).
	Config zones.ClusterConfig
	Logger *slog.Logger
	// Registry gets the store's metrics; nil keeps them private.
	Registry prometheus.Registerer
	// Cache is the local copy of the shared state (the state file): kept
	// up to date, and served when dnsd starts while etcd is away. Nil
	// keeps none.
	Cache *members.FileStore
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Health gets the state to serve of each member (see Observe); nil
	// gives it to nobody.
	Health HealthSink
	// Pending shares the pending load of this node's answers with the
	// other nodes every Config.PendingInterval and takes theirs; nil
	// shares none.
	Pending PendingSharer
}

// Store is the etcd store of an NS set: one session (the lease, the
// watch, degraded mode) and a type per key family registered with it,
// each owning its prefix: groups/ (run-time members and drains), nodes/
// (the live nodes), pending/ (each node's pending load), health/ (each
// node's views of the members) and acme/ (the live ACME challenges).
type Store struct {
	sess    *session
	groups  *groupKeys
	nodes   *nodeKeys
	pending *pendingKeys
	health  *healthKeys
	acme    *acmeKeys
}

// Status is what the dashboard shows of the cluster.
type Status struct {
	// Node is this node's name.
	Node string
	// Degraded is true while etcd can not be reached; Since is when that
	// (or the connected spell) began, Error the last failure.
	Degraded bool
	Since    time.Time
	Error    string
	// Nodes are the nodes present in etcd, as last seen, by name.
	Nodes []NodeInfo
	// Quorum is on, and DownShare the share of the live nodes that a
	// member's down votes must exceed; Votes are the members that some
	// live node sees down, by group and member.
	Quorum    bool
	DownShare float64
	Votes     []MemberVotes
}

// New returns a Store for the config's etcd; it connects lazily.
func New(o Options) (*Store, error) {
	cli, err := newClient(o.Config.Etcd)
	if err != nil {
		return nil, err
	}
	log, now := o.Logger, o.Now
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if now == nil {
		now = time.Now
	}
	e := o.Config.Etcd
	cfg := sessionConfig{node: o.Config.Node, prefix: e.Prefix, timeout: e.RequestTimeout.D(), ttl: e.LeaseTTL.D(),
		every: o.Config.PendingInterval.D()}
	if cfg.every <= 0 {
		cfg.every = zones.DefaultPendingInterval
	}
	sess := newSession(log, cli, cfg, now)
	s := &Store{sess: sess, groups: newGroupKeys(log, sess, o.Cache), nodes: newNodeKeys(sess, o.Config.Node),
		pending: newPendingKeys(log, sess, o.Config.Node, o.Pending)}
	s.health = newHealthKeys(log, sess, s.nodes, o.Config.Quorum, o.Health)
	s.acme = newACMEKeys(log, sess)
	s.nodes.changed = s.health.reconsider
	// The order of the read at a session's start: the groups first, so
	// that the others' pending load finds them.
	for _, f := range []family{s.groups, s.nodes, s.pending, s.health, s.acme} {
		sess.register(f)
	}
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	cs := append(sess.collectors(), s.groups.conflicts, s.pending.shared, s.health.downVotes)
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			cli.Close()
			return nil, fmt.Errorf("cluster: register metrics: %w", err)
		}
	}
	return s, nil
}

// Challenges is the NS set's store of ACME DNS-01 challenges (the acme/
// family), for acme.Options.Store.
func (s *Store) Challenges() acme.Store { return s.acme }

// Close closes the etcd client; Run must have returned.
func (s *Store) Close() { _ = s.sess.cli.Close() }

// Load reads the shared state from etcd. When etcd can not be reached it
// serves the local copy (the state file as last written), or an empty
// state without one, and the node starts degraded: answering never waits
// for etcd.
func (s *Store) Load() (members.State, error) { return s.groups.load() }

// Save writes group's state with a transaction that compares the key's
// mod revision with rev: it loses (a *members.ConflictError carrying the
// state now stored) when another node wrote the group since. While the
// node is degraded it refuses at once.
func (s *Store) Save(group string, rev int64, gs members.GroupState) (int64, error) {
	return s.groups.save(group, rev, gs)
}

// Status returns the cluster as this node sees it.
func (s *Store) Status() Status {
	st := Status{Node: s.nodes.node, Nodes: s.nodes.list(), Votes: s.health.votes(),
		Quorum: s.health.cfg.Enabled, DownShare: s.health.cfg.DownShare}
	st.Degraded, st.Since, st.Error = s.sess.state()
	return st
}

// Run keeps a session with etcd until ctx is done, starting a new one
// (after a pause) whenever one ends: each reads the whole shared state,
// hands it to app, then follows the watch.
func (s *Store) Run(ctx context.Context, app Applier) error {
	s.groups.app = app
	return s.sess.run(ctx)
}

// Observe takes an update of this node's watcher (it is the watcher's
// OnUpdate in an NS set) and hands the member's state to serve to the
// sink: the update as it is with quorum off; with quorum on, its state is
// the Verdict of every live node's view, and a change of this node's own
// view is published under its lease. Like OnUpdate it never blocks on
// etcd.
func (s *Store) Observe(u probe.Update) { s.health.observe(u) }

// Forget drops what the Store knows of a member that this node no
// longer watches: its view is deleted from etcd, its down votes gauge
// goes.
func (s *Store) Forget(group, member string) { s.health.forget(group, member) }

// Watching returns w, whose Remove also makes the Store forget the member
// (Forget): the Controller's watcher in an NS set.
func (s *Store) Watching(w members.Watcher) members.Watcher { return forgetting{w, s} }
