package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// NodeInfo is a node's entry in etcd, under its lease.
type NodeInfo struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
}

// nodeKeys is the nodes/ key family: one entry per live node
// (nodes/NODE, a JSON NodeInfo) under the node's lease, so that it expires
// with it. This node puts its own at the start of each session and reads
// it back to check that the session still holds.
type nodeKeys struct {
	sess    *session
	node    string
	changed func() // the live nodes changed (nil: nobody asks)

	mu    sync.Mutex
	nodes map[string]NodeInfo // the nodes present in etcd, by name
}

var (
	_ family  = (*nodeKeys)(nil)
	_ joiner  = (*nodeKeys)(nil)
	_ checker = (*nodeKeys)(nil)
)

func newNodeKeys(sess *session, node string) *nodeKeys {
	return &nodeKeys{sess: sess, node: node, nodes: map[string]NodeInfo{}}
}

func (n *nodeKeys) prefix() string         { return n.sess.prefix + "nodes/" }
func (n *nodeKeys) key(node string) string { return n.prefix() + node }

// join puts this node's entry under the session's lease.
func (n *nodeKeys) join(ctx context.Context, l lease) error {
	c, cancel := context.WithTimeout(ctx, n.sess.timeout)
	defer cancel()
	info, _ := json.Marshal(NodeInfo{Node: n.node, Since: n.sess.now()})
	if _, err := n.sess.cli.Put(c, n.key(n.node), string(info), clientv3.WithLease(l.id)); err != nil {
		return fmt.Errorf("node entry: %w", err)
	}
	return nil
}

// check reads this node's entry: a linearizable read, which needs a
// leader of a quorum; a node whose entry is gone (its lease expired while
// the watch was stuck) starts again.
func (n *nodeKeys) check(ctx context.Context) error {
	c, cancel := context.WithTimeout(ctx, n.sess.timeout)
	defer cancel()
	resp, err := n.sess.cli.Get(c, n.key(n.node))
	if err != nil {
		return fmt.Errorf("health check: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return errors.New("node entry gone (lease expired)")
	}
	return nil
}

func (n *nodeKeys) resync(kvs []*mvccpb.KeyValue, _ int64) {
	nodes := map[string]NodeInfo{}
	for _, kv := range kvs {
		if info, ok := decodeNode(kv); ok {
			nodes[info.Node] = info
		}
	}
	n.mu.Lock()
	n.nodes = nodes
	n.mu.Unlock()
}

func (n *nodeKeys) apply(evs []*clientv3.Event) {
	n.mu.Lock()
	for _, ev := range evs {
		if ev.Type == mvccpb.DELETE {
			delete(n.nodes, strings.TrimPrefix(string(ev.Kv.Key), n.prefix()))
		} else if info, ok := decodeNode(ev.Kv); ok {
			n.nodes[info.Node] = info
		}
	}
	n.mu.Unlock()
	if n.changed != nil {
		n.changed()
	}
}

func decodeNode(kv *mvccpb.KeyValue) (NodeInfo, bool) {
	var n NodeInfo
	if err := json.Unmarshal(kv.Value, &n); err != nil || n.Node == "" {
		return n, false
	}
	return n, true
}

// live returns the nodes present in etcd, as last seen, by name.
func (n *nodeKeys) live() map[string]NodeInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	return maps.Clone(n.nodes)
}

// list returns the nodes present in etcd, by name.
func (n *nodeKeys) list() []NodeInfo {
	out := slices.Collect(maps.Values(n.live()))
	slices.SortFunc(out, func(a, b NodeInfo) int { return strings.Compare(a.Node, b.Node) })
	return out
}
