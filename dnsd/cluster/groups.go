package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/transmirror/transmirror/dnsd/members"
)

// Applier is what the Store needs from the member registry (implemented
// by members.Controller): serve state others changed, serve the whole
// state read again.
type Applier interface {
	Apply(members.State) error
	Replace(members.State) error
}

var _ Applier = (*members.Controller)(nil)

// groupKeys is the groups/ key family: the run-time members and drains of
// each group, one key per group (groups/GROUP, a JSON members.GroupState
// with the format it is written in: groupValue),
// written with a transaction that compares its mod revision, so that two
// concurrent edits can not lose one. It keeps the shared state as this
// node last saw it, in memory and in the local copy, and hands what
// others changed to the Applier.
type groupKeys struct {
	log   *slog.Logger
	sess  *session
	cache *members.FileStore
	app   Applier // set by Run, before the session starts

	mu    sync.Mutex
	known members.State // the shared state as this node last saw it

	conflicts prometheus.Counter
}

var _ family = (*groupKeys)(nil)

func newGroupKeys(log *slog.Logger, sess *session, cache *members.FileStore) *groupKeys {
	return &groupKeys{log: log, sess: sess, cache: cache, known: members.NewState(),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "transmirror", Subsystem: "dnsd", Name: "cluster_conflicts_total",
			Help: "Membership changes that lost a race with another node's and were made again on the newer state.",
		})}
}

func (g *groupKeys) prefix() string          { return g.sess.prefix + "groups/" }
func (g *groupKeys) key(group string) string { return g.prefix() + group }

// load reads the shared state from etcd. When etcd can not be reached it
// serves the local copy (the state file as last written), or an empty
// state without one, and the node starts degraded: answering never waits
// for etcd.
func (g *groupKeys) load() (members.State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), g.sess.timeout)
	defer cancel()
	resp, err := g.sess.cli.Get(ctx, g.prefix(), clientv3.WithPrefix())
	if err != nil {
		g.sess.setDegraded(true, g.sess.cli.explain(err))
		st := members.NewState()
		if g.cache != nil {
			if st, err = g.cache.Load(); err != nil {
				return st, err
			}
		}
		g.mu.Lock()
		g.known = st.Clone()
		g.mu.Unlock()
		_, _, lastErr := g.sess.state()
		g.log.Warn("etcd unreachable or refusing this node at start: serving the last known state", "groups", len(st.Groups), "err", lastErr)
		return st, nil
	}
	st := members.NewState()
	for _, kv := range resp.Kvs {
		g.decode(st, kv)
	}
	g.remember(st, true, resp.Header.Revision)
	g.sess.setDegraded(false, nil)
	return st, nil
}

// groupsFormat is the format of the groups/ values this dnsd writes and
// the newest it reads. A value without a format is of format 1, as the
// values were written before they carried one; a dnsd of an older release
// reads a value with one, since JSON's unknown keys are ignored, so that
// an NS set can be upgraded one node at a time. A change that an older
// node would misread takes format 2, which those nodes leave out.
const groupsFormat = 1

// groupValue is a groups/GROUP value: the group's members.GroupState and
// the format it is written in.
type groupValue struct {
	Format int `json:"format,omitempty"`
	members.GroupState
}

// decode puts the group of kv (a key under groups/) into st; a value that
// does not decode, or is of a newer format than groupsFormat, is logged
// and left out.
func (g *groupKeys) decode(st members.State, kv *mvccpb.KeyValue) {
	group := strings.TrimPrefix(string(kv.Key), g.prefix())
	var v groupValue
	if len(kv.Value) > 0 {
		if err := json.Unmarshal(kv.Value, &v); err != nil {
			g.log.Error("cluster: group state in etcd does not decode: left out", "key", string(kv.Key), "err", err)
			return
		}
	}
	if v.Format > groupsFormat {
		g.log.Error("cluster: group state in etcd is of a newer format, written by a newer dnsd: left out (upgrade this node)",
			"key", string(kv.Key), "format", v.Format, "reads_up_to", groupsFormat)
		return
	}
	st.Groups[group], st.Revisions[group] = v.GroupState, kv.ModRevision
}

// remember records st as the shared state (whole: replacing what was
// known, else merged in) and writes the local copy.
//
// A whole state is what a read at revision readRev saw; a group this node
// saved after that read (a change made while the session started) is
// newer than the read and is kept, so that the local copy never goes back
// to before a change that was accepted. The watch, which starts after the
// read, brings the same change to the Applier.
func (g *groupKeys) remember(st members.State, whole bool, readRev int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if whole {
		st = st.Clone()
		for name, rev := range g.known.Revisions {
			if rev > readRev && rev > st.Revisions[name] {
				st.Groups[name], st.Revisions[name] = g.known.Groups[name].Clone(), rev
			}
		}
		g.known = st
	} else {
		for name, rev := range st.Revisions {
			g.known.Groups[name], g.known.Revisions[name] = st.Groups[name].Clone(), rev
		}
	}
	if g.cache != nil {
		if err := g.cache.Replace(g.known); err != nil {
			g.log.Warn("cluster: local copy of the shared state not written", "err", err)
		}
	}
}

// save writes group's state with a transaction that compares the key's
// mod revision with rev (see Store.Save).
func (g *groupKeys) save(group string, rev int64, gs members.GroupState) (int64, error) {
	if d, _, lastErr := g.sess.state(); d {
		return 0, fmt.Errorf("%w (etcd: %s)", members.ErrStoreUnavailable, lastErr)
	}
	data, err := json.Marshal(groupValue{Format: groupsFormat, GroupState: gs})
	if err != nil {
		return 0, fmt.Errorf("cluster: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.sess.timeout)
	defer cancel()
	key := g.key(group)
	resp, err := g.sess.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(data))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		if unavailable(err) {
			g.sess.kick()
			return 0, fmt.Errorf("%w (etcd: %v)", members.ErrStoreUnavailable, err)
		}
		return 0, fmt.Errorf("cluster: save %s: %w", group, err)
	}
	if !resp.Succeeded {
		g.conflicts.Inc()
		ce := &members.ConflictError{Group: group}
		cur := members.NewState()
		if r := resp.Responses[0].GetResponseRange(); r != nil && len(r.Kvs) > 0 {
			g.decode(cur, r.Kvs[0])
			ce.State, ce.Revision = cur.Groups[group], cur.Revisions[group]
		}
		return 0, ce
	}
	saved := members.NewState()
	saved.Groups[group], saved.Revisions[group] = gs, resp.Header.Revision
	g.remember(saved, false, 0)
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

// resync serves the whole shared state read at rev, with what this node
// saved since the read.
func (g *groupKeys) resync(kvs []*mvccpb.KeyValue, rev int64) {
	st := members.NewState()
	for _, kv := range kvs {
		g.decode(st, kv)
	}
	g.remember(st, true, rev)
	g.mu.Lock()
	st = g.known.Clone()
	g.mu.Unlock()
	if err := g.app.Replace(st); err != nil {
		g.log.Error("cluster: shared state not served", "err", err)
	}
}

// apply serves the groups that others changed (a deleted key: the group
// has no run-time state any more).
func (g *groupKeys) apply(evs []*clientv3.Event) {
	st := members.NewState()
	for _, ev := range evs {
		if ev.Type == mvccpb.DELETE {
			name := strings.TrimPrefix(string(ev.Kv.Key), g.prefix())
			st.Groups[name], st.Revisions[name] = members.GroupState{}, ev.Kv.ModRevision
			continue
		}
		g.decode(st, ev.Kv)
	}
	if len(st.Revisions) == 0 {
		return
	}
	if err := g.app.Apply(st); err != nil {
		g.log.Error("cluster: watched state not served", "err", err)
	}
	g.remember(st, false, 0)
}
