package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

// HealthSink is what the Store needs from the dispatcher (implemented by
// dispatch.Dispatcher): a member's state to serve, with its newest report.
type HealthSink interface {
	Observe(probe.Update)
}

// healthKeys is the health/ key family: each node's view of each member
// it watches (health/NODE/GROUP/MEMBER, the state's name), under the
// node's lease. With quorum on, this node publishes a change of its own
// view and serves each member the Verdict of the live nodes' views; off,
// it hands its watcher's updates to the sink as they are.
type healthKeys struct {
	log   *slog.Logger
	sess  *session
	nodes *nodeKeys
	cfg   zones.QuorumConfig
	sink  HealthSink
	fwd   sync.Mutex // keeps the sink's updates in the order of the verdicts

	mu     sync.Mutex
	v      views
	served map[memberRef]probe.State // what the sink was last given
	queued map[memberRef]queuedView  // own views waiting to be published

	downVotes *prometheus.GaugeVec
}

// queuedView is an own view waiting to be put in etcd, or deleted (gone:
// the member is no longer watched).
type queuedView struct {
	state probe.State
	gone  bool
}

var (
	_ family   = (*healthKeys)(nil)
	_ flusher  = (*healthKeys)(nil)
	_ listener = (*healthKeys)(nil)
)

func newHealthKeys(log *slog.Logger, sess *session, nodes *nodeKeys, cfg zones.QuorumConfig, sink HealthSink) *healthKeys {
	return &healthKeys{log: log, sess: sess, nodes: nodes, cfg: cfg, sink: sink, v: newViews(nodes.node),
		served: map[memberRef]probe.State{}, queued: map[memberRef]queuedView{},
		downVotes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_member_down_votes",
			Help: "With quorum on: the live nodes (this one included) that see the member down, as this node last saw their views; a member's series goes when this node stops watching it.",
		}, []string{"group", "member"})}
}

func (h *healthKeys) prefix() string { return h.sess.prefix + "health/" }

// key is where node's view of a member lives in etcd.
func (h *healthKeys) key(node string, ref memberRef) string {
	return h.prefix() + node + "/" + ref.group + "/" + ref.member
}

// decode reads a node's view of a member from its key and value (nil: the
// key went).
func (h *healthKeys) decode(key string, value []byte) (node string, ref memberRef, st probe.State, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(key, h.prefix()), "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", ref, st, false
	}
	if value != nil && st.UnmarshalText(value) != nil {
		h.log.Debug("health view does not decode", "key", key)
		return "", ref, st, false
	}
	return parts[0], memberRef{parts[1], parts[2]}, st, true
}

// resync replaces the other nodes' views with those read, and queues all
// of this node's to be published under the new lease.
func (h *healthKeys) resync(kvs []*mvccpb.KeyValue, _ int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.v.others = map[string]map[memberRef]probe.State{}
	for ref, u := range h.v.own {
		h.queued[ref] = queuedView{state: u.State}
	}
	for _, kv := range kvs {
		if n, ref, st, ok := h.decode(string(kv.Key), kv.Value); ok {
			h.v.set(n, ref, st, true)
		}
	}
}

// apply takes the other nodes' changed views and serves the verdicts that
// changed.
func (h *healthKeys) apply(evs []*clientv3.Event) {
	changed := false
	h.mu.Lock()
	for _, ev := range evs {
		var value []byte
		if ev.Type == mvccpb.PUT {
			value = ev.Kv.Value
		}
		if n, ref, st, ok := h.decode(string(ev.Kv.Key), value); ok {
			h.v.set(n, ref, st, ev.Type == mvccpb.PUT)
			changed = true
		}
	}
	h.mu.Unlock()
	if changed {
		h.reconsider()
	}
}

// connected serves the verdicts that changed with etcd found or lost;
// found, it publishes this node's views at once.
func (h *healthKeys) connected(on bool) {
	h.reconsider()
	if on {
		h.sess.kick()
	}
}

// flush puts this node's waiting views under the lease.
func (h *healthKeys) flush(ctx context.Context, l lease) error {
	h.mu.Lock()
	batch := h.queued
	h.queued = map[memberRef]queuedView{}
	h.mu.Unlock()
	for ref, v := range batch {
		c, cancel := context.WithTimeout(ctx, h.sess.timeout)
		var err error
		if v.gone {
			_, err = h.sess.cli.Delete(c, h.key(h.v.node, ref))
		} else {
			_, err = h.sess.cli.Put(c, h.key(h.v.node, ref), v.state.String(), clientv3.WithLease(l.id))
		}
		cancel()
		if err != nil {
			h.requeue(batch)
			return fmt.Errorf("publish health view: %w", err)
		}
	}
	return nil
}

// requeue puts back the views of a batch that failed, unless newer ones
// came meanwhile.
func (h *healthKeys) requeue(batch map[memberRef]queuedView) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for r, v := range batch {
		if _, newer := h.queued[r]; !newer {
			h.queued[r] = v
		}
	}
}

// observe is Store.Observe.
func (h *healthKeys) observe(u probe.Update) {
	if !h.cfg.Enabled {
		if h.sink != nil {
			h.sink.Observe(u)
		}
		return
	}
	h.fwd.Lock()
	defer h.fwd.Unlock()
	live, conn := h.nodes.live(), h.sess.connected()
	ref := memberRef{u.Group, u.Member}
	h.mu.Lock()
	prev, had := h.v.own[ref]
	h.v.own[ref] = u
	changed := !had || prev.State != u.State
	if changed {
		h.queued[ref] = queuedView{state: u.State}
	}
	u.State = h.verdictLocked(ref, live, conn)
	h.served[ref] = u.State
	h.mu.Unlock()
	if changed {
		h.sess.kick()
	}
	if h.sink != nil {
		h.sink.Observe(u)
	}
}

// reconsider hands the sink every member whose verdict changed since it
// was last given one: after other nodes' views or the live nodes changed,
// or etcd was lost or found again.
func (h *healthKeys) reconsider() {
	if !h.cfg.Enabled {
		return
	}
	h.fwd.Lock()
	defer h.fwd.Unlock()
	live, conn := h.nodes.live(), h.sess.connected()
	var out []probe.Update
	h.mu.Lock()
	for ref := range h.v.refs(live) {
		v := h.verdictLocked(ref, live, conn)
		if old, ok := h.served[ref]; ok && old == v {
			continue
		}
		h.served[ref] = v
		u, ok := h.v.own[ref]
		if !ok {
			u = probe.Update{Group: ref.group, Member: ref.member}
		}
		u.State = v
		out = append(out, u)
	}
	h.mu.Unlock()
	if h.sink == nil {
		return
	}
	for _, u := range out {
		h.sink.Observe(u)
	}
}

// verdictLocked is the Verdict for ref from what is known, and sets its
// down votes gauge; h.mu held.
func (h *healthKeys) verdictLocked(ref memberRef, live map[string]NodeInfo, connected bool) probe.State {
	t := h.v.tally(ref, live)
	if t.watched { // a series only for the members forget will be told of
		h.downVotes.WithLabelValues(ref.group, ref.member).Set(float64(t.down))
	}
	return t.verdict(h.cfg, connected)
}

// forget is Store.Forget.
func (h *healthKeys) forget(group, member string) {
	if !h.cfg.Enabled {
		return
	}
	ref := memberRef{group, member}
	h.mu.Lock()
	delete(h.v.own, ref)
	delete(h.served, ref)
	h.queued[ref] = queuedView{gone: true}
	h.downVotes.DeleteLabelValues(group, member)
	h.mu.Unlock()
	h.sess.kick()
}

// votes returns, with quorum on, the members that at least one live node
// sees down, by group and member.
func (h *healthKeys) votes() []MemberVotes {
	if !h.cfg.Enabled {
		return nil
	}
	live := h.nodes.live()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.v.votes(live)
}

// forgetting is a members.Watcher whose Remove also forgets the member.
type forgetting struct {
	members.Watcher
	s *Store
}

func (f forgetting) Remove(group, member string) error {
	err := f.Watcher.Remove(group, member)
	f.s.Forget(group, member)
	return err
}
