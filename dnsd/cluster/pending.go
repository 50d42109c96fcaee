package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/transmirror/transmirror/dnsd/dispatch"
)

// PendingSharer is what the Store needs from the dispatcher to share the
// hidden load of answers across the NS set (implemented by
// dispatch.Dispatcher): every node books the load of the answers it gives
// until the members' reports show it, and counts the other nodes' too, so
// that three nodes do not each send the same least-loaded member their
// resolvers at once; and every node says what its scopes explain of each
// member's group requests, so that the set calibrates its scope rates
// once (each node against its share of a member's report).
type PendingSharer interface {
	LocalPending() map[string]map[string]dispatch.FamilyPending
	SetRemotePending(group, node string, p map[string]dispatch.FamilyPending) error
	LocalExplained() map[string]map[string]float64
	SetRemoteExplained(group, node string, e map[string]float64) error
	ForgetRemotePending()
}

var _ PendingSharer = (*dispatch.Dispatcher)(nil)

// pendingKeys is the pending/ key family: each node's pending load of
// each group, with what its scopes explain (pending/NODE/GROUP, a JSON
// sharedPending), under the node's lease. This node publishes what of its
// own changed every publish interval and hands the others' to the sharer.
type pendingKeys struct {
	log    *slog.Logger
	sess   *session
	node   string
	sharer PendingSharer
	// sharedOut is what this node last shared, by group; session
	// goroutine only.
	sharedOut map[string]sharedPending

	shared *prometheus.CounterVec
}

var (
	_ family    = (*pendingKeys)(nil)
	_ publisher = (*pendingKeys)(nil)
	_ listener  = (*pendingKeys)(nil)
)

func newPendingKeys(log *slog.Logger, sess *session, node string, sharer PendingSharer) *pendingKeys {
	p := &pendingKeys{log: log, sess: sess, node: node, sharer: sharer, sharedOut: map[string]sharedPending{}}
	p.shared = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_shared_pending_total",
		Help: "Shares of the pending load of a node's answers through etcd, by direction (out: a transaction of this node's groups that changed, in: another node's group taken) and result (ok, error).",
	}, []string{"direction", "result"})
	for _, d := range []string{"in", "out"} {
		for _, r := range []string{"ok", "error"} {
			p.shared.WithLabelValues(d, r)
		}
	}
	return p
}

func (p *pendingKeys) prefix() string { return p.sess.prefix + "pending/" }

func (p *pendingKeys) key(node, group string) string { return p.prefix() + node + "/" + group }

// sharedPending is a node's pending load of one group in etcd, under its
// lease: pending/NODE/GROUP, with what its scopes explain of each
// member's group requests (requests per second; absent from a node of
// an older version).
type sharedPending struct {
	Node      string                            `json:"node"`
	Members   map[string]dispatch.FamilyPending `json:"members"`
	Explained map[string]float64                `json:"explained,omitempty"`
}

// empty reports whether p shares nothing.
func (p sharedPending) empty() bool { return len(p.Members) == 0 && len(p.Explained) == 0 }

// changed reports whether next differs from p, what was last shared, by
// more than the tolerances in some member.
func (p sharedPending) changed(next sharedPending) bool {
	return pendingChanged(p.Members, next.Members) || explainedChanged(p.Explained, next.Explained)
}

// explainedChanged reports whether a member's explained requests moved by
// more than 0.1 requests per second or 5 %, whichever is larger.
func explainedChanged(last, next map[string]float64) bool {
	tol := func(v float64) float64 { return max(0.1, 0.05*math.Abs(v)) }
	for name, v := range next {
		if math.Abs(v-last[name]) > tol(last[name]) {
			return true
		}
	}
	for name, l := range last {
		if _, ok := next[name]; !ok && l > tol(0) {
			return true
		}
	}
	return false
}

// pendingTolerance is how much a member's pending load may change before
// a node shares it again: 1 load unit (0.1 requests per second) or 5 %,
// whichever is larger. A load that ramps out is shared in a few steps,
// not at every tick.
func pendingTolerance(last float64) float64 { return max(1, 0.05*math.Abs(last)) }

// pendingChanged reports whether next differs from last by more than the
// tolerance in some member and family.
func pendingChanged(last, next map[string]dispatch.FamilyPending) bool {
	for name, v := range next {
		l := last[name]
		for f := range v {
			if math.Abs(v[f]-l[f]) > pendingTolerance(l[f]) {
				return true
			}
		}
	}
	for name, l := range last {
		if _, ok := next[name]; !ok && (math.Abs(l[0]) > pendingTolerance(0) || math.Abs(l[1]) > pendingTolerance(0)) {
			return true
		}
	}
	return false
}

// maxTxnOps bounds the operations of one etcd transaction (etcd's
// --max-txn-ops is 128 by default).
const maxTxnOps = 100

// publish shares what of this node's pending load changed since it last
// did, under the lease, in as few transactions as etcd takes (one for up
// to maxTxnOps groups); a group this node no longer has is taken out.
func (p *pendingKeys) publish(ctx context.Context, l lease) error {
	if p.sharer == nil {
		return nil
	}
	ops, next := p.changes(l)
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		c, cancel := context.WithTimeout(ctx, p.sess.timeout)
		_, err := p.sess.cli.Txn(c).Then(ops[:n]...).Commit()
		cancel()
		if err != nil {
			p.shared.WithLabelValues("out", "error").Inc()
			return fmt.Errorf("share pending load: %w", err)
		}
		p.shared.WithLabelValues("out", "ok").Inc()
		ops = ops[n:]
	}
	for group, sp := range next {
		if sp == nil {
			delete(p.sharedOut, group)
		} else {
			p.sharedOut[group] = *sp
		}
	}
	return nil
}

// changes returns the operations that share what changed, and what they
// share by group (nil: taken out).
func (p *pendingKeys) changes(l lease) ([]clientv3.Op, map[string]*sharedPending) {
	local := p.localShares()
	var ops []clientv3.Op
	next := map[string]*sharedPending{}
	for group, sp := range local {
		last, had := p.sharedOut[group]
		if had && !last.changed(sp) || !had && sp.empty() {
			continue
		}
		data, err := json.Marshal(sp)
		if err != nil {
			continue
		}
		ops = append(ops, clientv3.OpPut(p.key(p.node, group), string(data), clientv3.WithLease(l.id)))
		next[group] = &sp
	}
	for group := range p.sharedOut {
		if _, ok := local[group]; !ok {
			ops = append(ops, clientv3.OpDelete(p.key(p.node, group)))
			next[group] = nil
		}
	}
	return ops, next
}

// localShares is what this node has to share of each group: its pending
// load and what its scopes explain.
func (p *pendingKeys) localShares() map[string]sharedPending {
	out := map[string]sharedPending{}
	for group, members := range p.sharer.LocalPending() {
		out[group] = sharedPending{Node: p.node, Members: maps.Clone(members)}
	}
	for group, e := range p.sharer.LocalExplained() {
		sp, ok := out[group]
		if !ok {
			sp = sharedPending{Node: p.node}
		}
		sp.Explained = maps.Clone(e)
		out[group] = sp
	}
	return out
}

// resync takes every other node's pending load as read.
func (p *pendingKeys) resync(kvs []*mvccpb.KeyValue, _ int64) {
	for _, kv := range kvs {
		p.take(string(kv.Key), kv.Value)
	}
}

// apply takes the other nodes' changes (a deleted key: the node has none
// of the group any more).
func (p *pendingKeys) apply(evs []*clientv3.Event) {
	for _, ev := range evs {
		var value []byte
		if ev.Type == mvccpb.PUT {
			value = ev.Kv.Value
		}
		p.take(string(ev.Kv.Key), value)
	}
}

// take hands another node's pending load of a group (value nil: it has
// none any more, its key went) to the sharer.
func (p *pendingKeys) take(key string, value []byte) {
	if p.sharer == nil {
		return
	}
	node, group, ok := strings.Cut(strings.TrimPrefix(key, p.prefix()), "/")
	if !ok || node == p.node || group == "" {
		return
	}
	var sp sharedPending
	if value != nil {
		if err := json.Unmarshal(value, &sp); err != nil || sp.Node != node {
			p.shared.WithLabelValues("in", "error").Inc()
			p.log.Debug("shared pending load does not decode", "key", key, "err", err)
			return
		}
	}
	err := p.sharer.SetRemotePending(group, node, sp.Members)
	if err == nil {
		err = p.sharer.SetRemoteExplained(group, node, sp.Explained)
	}
	if err != nil {
		p.shared.WithLabelValues("in", "error").Inc()
		p.log.Debug("shared pending load not taken", "group", group, "from", node, "err", err)
		return
	}
	p.shared.WithLabelValues("in", "ok").Inc()
}

// connected, when a session ended, drops every other node's pending load
// and what this node shared: the keys under its lease go with it, and
// nothing updates the others' figures until the next session reads them
// again.
func (p *pendingKeys) connected(on bool) {
	if on || p.sharer == nil {
		return
	}
	p.sharer.ForgetRemotePending()
	clear(p.sharedOut)
}
