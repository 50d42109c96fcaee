package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"strings"

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

func (s *Store) pendingKey(node, group string) string {
	return s.prefix + "pending/" + node + "/" + group
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

// publishPending shares what of this node's pending load changed since it
// last did, under the lease, in as few transactions as etcd takes (one
// for up to maxTxnOps groups); a group this node no longer has is taken
// out.
func (s *Store) publishPending(ctx context.Context, lease clientv3.LeaseID) error {
	if s.sharer == nil {
		return nil
	}
	local := s.localShares()
	var ops []clientv3.Op
	next := map[string]*sharedPending{} // what the ops share, by group; nil: taken out
	for group, p := range local {
		last, had := s.sharedOut[group]
		if had && !last.changed(p) || !had && p.empty() {
			continue
		}
		data, err := json.Marshal(p)
		if err != nil {
			continue
		}
		ops = append(ops, clientv3.OpPut(s.pendingKey(s.node, group), string(data), clientv3.WithLease(lease)))
		next[group] = &p
	}
	for group := range s.sharedOut {
		if _, ok := local[group]; !ok {
			ops = append(ops, clientv3.OpDelete(s.pendingKey(s.node, group)))
			next[group] = nil
		}
	}
	for len(ops) > 0 {
		n := min(len(ops), maxTxnOps)
		c, cancel := context.WithTimeout(ctx, s.timeout)
		_, err := s.cli.Txn(c).Then(ops[:n]...).Commit()
		cancel()
		if err != nil {
			s.sharedPending.WithLabelValues("out", "error").Inc()
			return fmt.Errorf("share pending load: %w", err)
		}
		s.sharedPending.WithLabelValues("out", "ok").Inc()
		ops = ops[n:]
	}
	for group, p := range next {
		if p == nil {
			delete(s.sharedOut, group)
		} else {
			s.sharedOut[group] = *p
		}
	}
	return nil
}

// localShares is what this node has to share of each group: its pending
// load and what its scopes explain.
func (s *Store) localShares() map[string]sharedPending {
	out := map[string]sharedPending{}
	for group, members := range s.sharer.LocalPending() {
		out[group] = sharedPending{Node: s.node, Members: maps.Clone(members)}
	}
	for group, e := range s.sharer.LocalExplained() {
		p, ok := out[group]
		if !ok {
			p = sharedPending{Node: s.node}
		}
		p.Explained = maps.Clone(e)
		out[group] = p
	}
	return out
}

// takePending hands another node's pending load of a group (value nil:
// it has none any more, its key went) to the sharer.
func (s *Store) takePending(key string, value []byte) {
	if s.sharer == nil {
		return
	}
	node, group, ok := strings.Cut(strings.TrimPrefix(key, s.prefix+"pending/"), "/")
	if !ok || node == s.node || group == "" {
		return
	}
	var p sharedPending
	if value != nil {
		if err := json.Unmarshal(value, &p); err != nil || p.Node != node {
			s.sharedPending.WithLabelValues("in", "error").Inc()
			s.log.Debug("shared pending load does not decode", "key", key, "err", err)
			return
		}
	}
	err := s.sharer.SetRemotePending(group, node, p.Members)
	if err == nil {
		err = s.sharer.SetRemoteExplained(group, node, p.Explained)
	}
	if err != nil {
		s.sharedPending.WithLabelValues("in", "error").Inc()
		s.log.Debug("shared pending load not taken", "group", group, "from", node, "err", err)
		return
	}
	s.sharedPending.WithLabelValues("in", "ok").Inc()
}

// forgetPending drops every other node's pending load and what this node
// shared (a session ended: the keys under its lease go with it, and
// nothing updates the others' figures until the next session reads them
// again).
func (s *Store) forgetPending() {
	if s.sharer == nil {
		return
	}
	s.sharer.ForgetRemotePending()
	clear(s.sharedOut)
}
