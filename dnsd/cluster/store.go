// Package cluster shares dnsd's run-time state among the name servers of an
// NS set through etcd: run-time members and drains (one key per group,
// written with a transaction that compares its mod revision, so that two
// concurrent edits can not lose one), the pending load of each node's
// answers, and the list of nodes (under this node's lease, so that they
// expire with it). Load reports are not here: live data comes to every
// node from its source (a mirror pushes to every node), so etcd holds what
// must survive and what the nodes derive, not what mirrors report. Every
// node watches the deployment's prefix and hands what others changed to
// the member registry. Losing etcd never stops answering: the node serves
// from its last known state, says it is degraded, refuses membership
// changes (members.ErrStoreUnavailable), keeps taking pushes, and reads
// everything again when etcd is back. With quorum on, every node also
// publishes its own view of each member's health under its lease, and
// serves a member as down only when more than a share of the live nodes
// see it down (Verdict); without etcd each node serves its own view.
package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

// Applier is what the Store needs from the member registry (implemented
// by members.Controller): serve state others changed, serve the whole
// state read again.
type Applier interface {
	Apply(members.State) error
	Replace(members.State) error
}

var (
	_ members.Store = (*Store)(nil)
	_ Applier       = (*members.Controller)(nil)
	_ HealthSink    = (*dispatch.Dispatcher)(nil)
)

// retryInterval is the pause between two attempts to reach etcd again.
const retryInterval = 500 * time.Millisecond

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

// Store is the etcd store of an NS set.
type Store struct {
	log     *slog.Logger
	cli     *clientv3.Client
	node    string
	prefix  string
	timeout time.Duration
	ttl     time.Duration
	cache   *members.FileStore
	now     func() time.Time

	quorumCfg zones.QuorumConfig
	sink      HealthSink
	sharer    PendingSharer
	pendEvery time.Duration
	sharedOut map[string]sharedPending // what this node last shared, by group; session goroutine only
	fwd       sync.Mutex               // keeps the sink's updates in the order of the verdicts

	mu       sync.Mutex
	degraded bool
	since    time.Time // of the current degraded or connected spell
	lastErr  string
	known    members.State       // the shared state as this node last saw it
	nodes    map[string]NodeInfo // the nodes present in etcd, by name
	kick     chan struct{}
	q        quorum

	degradedGauge prometheus.Gauge
	conflicts     prometheus.Counter
	resyncs       prometheus.Counter
	sharedPending *prometheus.CounterVec
	downVotes     *prometheus.GaugeVec
}

// NodeInfo is a node's entry in etcd, under its lease.
type NodeInfo struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
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
	e := o.Config.Etcd
	cfg := clientv3.Config{
		Endpoints: slices.Clone(e.Endpoints), DialTimeout: e.DialTimeout.D(),
		Username: e.Username, Password: e.Password,
		Logger: zap.NewNop(), // the errors that matter come back to dnsd's own log
	}
	if e.TLS() {
		tc, err := tlsConfig(e)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd client: %w", err)
	}
	s := &Store{
		log: o.Logger, cli: cli, node: o.Config.Node, prefix: e.Prefix,
		timeout: e.RequestTimeout.D(), ttl: e.LeaseTTL.D(), cache: o.Cache, now: o.Now,
		degraded: true, known: members.NewState(), nodes: map[string]NodeInfo{},
		kick:      make(chan struct{}, 1),
		quorumCfg: o.Config.Quorum, sink: o.Health, q: newQuorum(),
		sharer: o.Pending, pendEvery: o.Config.PendingInterval.D(), sharedOut: map[string]sharedPending{},
	}
	if s.pendEvery <= 0 {
		s.pendEvery = zones.DefaultPendingInterval
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.since = s.now()
	s.degradedGauge = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_degraded",
		Help: "1 while this node can not reach etcd and serves from its last known state (membership changes refused), else 0.",
	})
	s.conflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_conflicts_total",
		Help: "Membership changes that lost a race with another node's and were made again on the newer state.",
	})
	s.resyncs = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_resyncs_total",
		Help: "Times this node read the whole shared state from etcd (at start and each time etcd came back).",
	})
	s.sharedPending = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_shared_pending_total",
		Help: "Shares of the pending load of a node's answers through etcd, by direction (out: a transaction of this node's groups that changed, in: another node's group taken) and result (ok, error).",
	}, []string{"direction", "result"})
	s.downVotes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_member_down_votes",
		Help: "With quorum on: the live nodes (this one included) that see the member down, as this node last saw their views; a member's series goes when this node stops watching it.",
	}, []string{"group", "member"})
	reg := o.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	for _, c := range []prometheus.Collector{s.degradedGauge, s.conflicts, s.resyncs, s.sharedPending, s.downVotes} {
		if err := reg.Register(c); err != nil {
			cli.Close()
			return nil, fmt.Errorf("cluster: register metrics: %w", err)
		}
	}
	for _, d := range []string{"in", "out"} {
		for _, r := range []string{"ok", "error"} {
			s.sharedPending.WithLabelValues(d, r)
		}
	}
	s.degradedGauge.Set(1)
	return s, nil
}

func tlsConfig(e zones.EtcdConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster: etcd ca_file %s: no PEM certificate", e.CAFile)
		}
		tc.RootCAs = pool
	}
	if e.CertFile != "" {
		c, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}

// Close closes the etcd client; Run must have returned.
func (s *Store) Close() { _ = s.cli.Close() }

func (s *Store) groupKey(group string) string { return s.prefix + "groups/" + group }
func (s *Store) nodeKey(node string) string   { return s.prefix + "nodes/" + node }

// Load reads the shared state from etcd. When etcd can not be reached it
// serves the local copy (the state file as last written), or an empty
// state without one, and the node starts degraded: answering never waits
// for etcd.
func (s *Store) Load() (members.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	resp, err := s.cli.Get(ctx, s.prefix+"groups/", clientv3.WithPrefix())
	if err != nil {
		s.setDegraded(true, err)
		st := members.NewState()
		if s.cache != nil {
			if st, err = s.cache.Load(); err != nil {
				return st, err
			}
		}
		s.mu.Lock()
		s.known = st.Clone()
		s.mu.Unlock()
		s.log.Warn("etcd unreachable at start: serving the last known state", "groups", len(st.Groups), "err", s.Status().Error)
		return st, nil
	}
	st := members.NewState()
	for _, kv := range resp.Kvs {
		s.decodeGroup(st, kv)
	}
	s.remember(st, true, resp.Header.Revision)
	s.setDegraded(false, nil)
	return st, nil
}

// decodeGroup puts the group of kv (a key under groups/) into st; a value
// that does not decode is logged and left out.
func (s *Store) decodeGroup(st members.State, kv *mvccpb.KeyValue) {
	group := strings.TrimPrefix(string(kv.Key), s.prefix+"groups/")
	var gs members.GroupState
	if len(kv.Value) > 0 {
		if err := json.Unmarshal(kv.Value, &gs); err != nil {
			s.log.Error("cluster: group state in etcd does not decode: left out", "key", string(kv.Key), "err", err)
			return
		}
	}
	st.Groups[group], st.Revisions[group] = gs, kv.ModRevision
}

// remember records st as the shared state (whole: replacing what was
// known, else merged in) and writes the local copy.
//
// A whole state is what a read at revision readRev saw; a group this node
// saved after that read (a change made while the session started) is
// newer than the read and is kept, so that the local copy never goes back
// to before a change that was accepted. The watch, which starts after the
// read, brings the same change to the Applier.
func (s *Store) remember(st members.State, whole bool, readRev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if whole {
		st = st.Clone()
		for g, rev := range s.known.Revisions {
			if rev > readRev && rev > st.Revisions[g] {
				st.Groups[g], st.Revisions[g] = s.known.Groups[g].Clone(), rev
			}
		}
		s.known = st
	} else {
		for g, rev := range st.Revisions {
			s.known.Groups[g], s.known.Revisions[g] = st.Groups[g].Clone(), rev
		}
	}
	if s.cache != nil {
		if err := s.cache.Replace(s.known); err != nil {
			s.log.Warn("cluster: local copy of the shared state not written", "err", err)
		}
	}
}

// Save writes group's state with a transaction that compares the key's
// mod revision with rev: it loses (a *members.ConflictError carrying the
// state now stored) when another node wrote the group since. While the
// node is degraded it refuses at once.
func (s *Store) Save(group string, rev int64, gs members.GroupState) (int64, error) {
	if st := s.Status(); st.Degraded {
		return 0, fmt.Errorf("%w (etcd: %s)", members.ErrStoreUnavailable, st.Error)
	}
	data, err := json.Marshal(gs)
	if err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	key := s.groupKey(group)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(data))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		if unavailable(err) {
			s.kickCheck()
			return 0, fmt.Errorf("%w (etcd: %v)", members.ErrStoreUnavailable, err)
		}
		return 0, fmt.Errorf("cluster: save %s: %w", group, err)
	}
	if !resp.Succeeded {
		s.conflicts.Inc()
		ce := &members.ConflictError{Group: group}
		cur := members.NewState()
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			s.decodeGroup(cur, r.Kvs[0])
			ce.State, ce.Revision = cur.Groups[group], cur.Revisions[group]
		}
		return 0, ce
	}
	saved := members.NewState()
	saved.Groups[group], saved.Revisions[group] = gs, resp.Header.Revision
	s.remember(saved, false, 0)
	return resp.Header.Revision, nil
}

// unavailable reports whether err says etcd can not be reached (rather
// than refusing the request).
func unavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// kickCheck wakes the session to publish this node's views and check etcd
// now.
func (s *Store) kickCheck() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Status returns the cluster as this node sees it.
func (s *Store) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Status{Node: s.node, Degraded: s.degraded, Since: s.since, Error: s.lastErr}
	for _, n := range s.nodes {
		st.Nodes = append(st.Nodes, n)
	}
	slices.SortFunc(st.Nodes, func(a, b NodeInfo) int { return strings.Compare(a.Node, b.Node) })
	st.Quorum, st.DownShare, st.Votes = s.quorumCfg.Enabled, s.quorumCfg.DownShare, s.votesLocked()
	return st
}

func (s *Store) setDegraded(on bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lastErr = err.Error()
	}
	if on == s.degraded {
		return
	}
	s.degraded, s.since = on, s.now()
	if on {
		s.degradedGauge.Set(1)
		s.log.Warn("cluster degraded: etcd unreachable; serving the last known state, membership changes refused", "node", s.node, "err", s.lastErr)
		return
	}
	s.lastErr = ""
	s.degradedGauge.Set(0)
	s.log.Info("cluster connected: sharing state through etcd", "node", s.node)
}

// Run keeps a session with etcd until ctx is done, starting a new one
// (after a pause) whenever one ends: each reads the whole shared state,
// hands it to app, then follows the watch.
func (s *Store) Run(ctx context.Context, app Applier) error {
	for {
		err := s.session(ctx, app)
		s.forgetPending()
		if ctx.Err() != nil {
			return nil
		}
		s.setDegraded(true, err)
		s.reconsider() // each node on its own view
		t := time.NewTimer(retryInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// session is one life of this node in the cluster: a lease with this
// node's entry under it, the whole shared state read and served, then
// the watch of every change until something fails (its error) or ctx ends.
func (s *Store) session(ctx context.Context, app Applier) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lease, ka, err := s.join(ctx)
	if lease != 0 {
		defer func() { // leave at once rather than when the lease runs out
			c, cancel := context.WithTimeout(context.Background(), s.timeout)
			defer cancel()
			_, _ = s.cli.Revoke(c, lease)
		}()
	}
	if err != nil {
		return err
	}
	rev, err := s.resync(ctx, app)
	if err != nil {
		return err
	}
	return s.follow(ctx, app, lease, ka, rev)
}

// join grants this session's lease, keeps it alive and puts this node's
// entry under it.
func (s *Store) join(ctx context.Context) (clientv3.LeaseID, <-chan *clientv3.LeaseKeepAliveResponse, error) {
	rctx, rcancel := context.WithTimeout(ctx, s.timeout)
	defer rcancel()
	lease, err := s.cli.Grant(rctx, int64(s.ttl/time.Second))
	if err != nil {
		return 0, nil, fmt.Errorf("lease: %w", err)
	}
	ka, err := s.cli.KeepAlive(ctx, lease.ID)
	if err != nil {
		return lease.ID, nil, fmt.Errorf("lease keep-alive: %w", err)
	}
	info, _ := json.Marshal(NodeInfo{Node: s.node, Since: s.now()})
	if _, err := s.cli.Put(rctx, s.nodeKey(s.node), string(info), clientv3.WithLease(lease.ID)); err != nil {
		return lease.ID, nil, fmt.Errorf("node entry: %w", err)
	}
	return lease.ID, ka, nil
}

// resync reads the whole shared state (groups, nodes, pending load,
// health views), serves it through app and returns the revision read.
func (s *Store) resync(ctx context.Context, app Applier) (int64, error) {
	rctx, rcancel := context.WithTimeout(ctx, s.timeout)
	defer rcancel()
	resp, err := s.cli.Get(rctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("read state: %w", err)
	}
	st := members.NewState()
	nodes := map[string]NodeInfo{}
	var pendings []*mvccpb.KeyValue
	s.mu.Lock()
	s.q.views = map[string]map[memberRef]probe.State{}
	for ref, u := range s.q.own { // all of this node's views, under the new lease
		s.q.queued[ref] = queuedView{state: u.State}
	}
	s.mu.Unlock()
	for _, kv := range resp.Kvs {
		switch k := string(kv.Key); {
		case strings.HasPrefix(k, s.prefix+"groups/"):
			s.decodeGroup(st, kv)
		case strings.HasPrefix(k, s.prefix+"nodes/"):
			if n, ok := s.decodeNode(kv); ok {
				nodes[n.Node] = n
			}
		case strings.HasPrefix(k, s.prefix+"pending/"):
			pendings = append(pendings, kv)
		case strings.HasPrefix(k, s.prefix+"health/"):
			if n, ref, v, ok := s.view(k, kv.Value); ok {
				s.mu.Lock()
				s.setViewLocked(n, ref, v, true)
				s.mu.Unlock()
			}
		}
	}
	s.resyncs.Inc()
	s.remember(st, true, resp.Header.Revision)
	s.mu.Lock()
	st = s.known.Clone() // with what this node saved since the read
	s.mu.Unlock()
	if err := app.Replace(st); err != nil {
		s.log.Error("cluster: shared state not served", "err", err)
	}
	for _, kv := range pendings {
		s.takePending(string(kv.Key), kv.Value)
	}
	s.mu.Lock()
	s.nodes = nodes
	s.mu.Unlock()
	s.setDegraded(false, nil)
	s.reconsider()
	s.kickCheck() // this node's views

	return resp.Header.Revision, nil
}

// follow watches the shared state from revision rev on, keeps the lease
// and the node's entry alive, and shares this node's pending load and
// health views, until something fails or ctx ends.
func (s *Store) follow(ctx context.Context, app Applier, lease clientv3.LeaseID, ka <-chan *clientv3.LeaseKeepAliveResponse, rev int64) error {
	wch := s.cli.Watch(clientv3.WithRequireLeader(ctx), s.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	check := time.NewTicker(min(time.Second, s.ttl/3))
	defer check.Stop()
	share := time.NewTicker(s.pendEvery)
	defer share.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case wr, ok := <-wch:
			if !ok {
				return errors.New("watch ended")
			}
			if err := wr.Err(); err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			s.events(app, wr.Events)
		case _, ok := <-ka:
			if !ok {
				return errors.New("lease lost")
			}
		case <-check.C:
			if err := s.ping(ctx); err != nil {
				return err
			}
		case <-share.C:
			if err := s.publishPending(ctx, lease); err != nil {
				return err
			}
		case <-s.kick:
			if err := s.publishViews(ctx, lease); err != nil {
				return err
			}
			if err := s.ping(ctx); err != nil {
				return err
			}
		}
	}
}

// ping reads this node's entry: a linearizable read, which needs a
// leader of a quorum; a node whose entry is gone (its lease expired while
// the watch was stuck) starts again.
func (s *Store) ping(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	resp, err := s.cli.Get(c, s.nodeKey(s.node))
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return errors.New("node entry gone (lease expired)")
	}
	return nil
}

// events hands a batch of watched changes to app.
func (s *Store) events(app Applier, evs []*clientv3.Event) {
	st := members.NewState()
	votes := false // the live nodes or their views changed
	for _, ev := range evs {
		k := string(ev.Kv.Key)
		switch {
		case strings.HasPrefix(k, s.prefix+"groups/"):
			if ev.Type == mvccpb.DELETE {
				g := strings.TrimPrefix(k, s.prefix+"groups/")
				st.Groups[g], st.Revisions[g] = members.GroupState{}, ev.Kv.ModRevision
				continue
			}
			s.decodeGroup(st, ev.Kv)
		case strings.HasPrefix(k, s.prefix+"health/"):
			var value []byte
			if ev.Type == mvccpb.PUT {
				value = ev.Kv.Value
			}
			if n, ref, v, ok := s.view(k, value); ok {
				s.mu.Lock()
				s.setViewLocked(n, ref, v, ev.Type == mvccpb.PUT)
				s.mu.Unlock()
				votes = true
			}
		case strings.HasPrefix(k, s.prefix+"nodes/"):
			votes = true
			s.mu.Lock()
			if ev.Type == mvccpb.DELETE {
				delete(s.nodes, strings.TrimPrefix(k, s.prefix+"nodes/"))
			} else if n, ok := s.decodeNode(ev.Kv); ok {
				s.nodes[n.Node] = n
			}
			s.mu.Unlock()
		case strings.HasPrefix(k, s.prefix+"pending/"):
			var value []byte
			if ev.Type == mvccpb.PUT {
				value = ev.Kv.Value
			}
			s.takePending(k, value)
		}
	}
	if votes {
		s.reconsider()
	}
	if len(st.Revisions) == 0 {
		return
	}
	if err := app.Apply(st); err != nil {
		s.log.Error("cluster: watched state not served", "err", err)
	}
	s.remember(st, false, 0)
}

func (s *Store) decodeNode(kv *mvccpb.KeyValue) (NodeInfo, bool) {
	var n NodeInfo
	if err := json.Unmarshal(kv.Value, &n); err != nil || n.Node == "" {
		return n, false
	}
	return n, true
}
