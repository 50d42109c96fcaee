package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

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

// Verdict is the state this node serves for a member: its own probe's
// (own) when quorum is off or etcd can not be reached (connected false);
// with quorum on, down only when more than q.DownShare of the live nodes
// see it down, else up when any node has a verdict, else unknown. others
// are the views of the other live nodes (those present in etcd), live the
// number of live nodes counting this one; a node without a view of the
// member counts in live, not as a down vote.
func Verdict(q zones.QuorumConfig, connected bool, own probe.State, others []probe.State, live int) probe.State {
	if !q.Enabled || !connected {
		return own
	}
	live = max(live, len(others)+1)
	down, seen := 0, own != probe.StateUnknown
	if own == probe.StateDown {
		down++
	}
	for _, v := range others {
		if v == probe.StateDown {
			down++
		}
		seen = seen || v != probe.StateUnknown
	}
	switch {
	case float64(down) > q.DownShare*float64(live):
		return probe.StateDown
	case seen:
		return probe.StateUp
	}
	return probe.StateUnknown
}

// memberRef names a member of a group.
type memberRef struct{ group, member string }

// quorum is the Store's record of the members' health as every node sees
// it; guarded by Store.mu.
type quorum struct {
	own    map[memberRef]probe.Update           // this node's watcher's newest update
	views  map[string]map[memberRef]probe.State // other nodes' views, by node
	served map[memberRef]probe.State            // what the sink was last given
	queued map[memberRef]queuedView             // own views waiting to be published
}

// queuedView is an own view waiting to be put in etcd, or deleted (gone:
// the member is no longer watched).
type queuedView struct {
	state probe.State
	gone  bool
}

func newQuorum() quorum {
	return quorum{
		own: map[memberRef]probe.Update{}, views: map[string]map[memberRef]probe.State{},
		served: map[memberRef]probe.State{}, queued: map[memberRef]queuedView{},
	}
}

// refs returns every member that this node or a live node has a view of.
func (q *quorum) refs(live map[string]NodeInfo) map[memberRef]bool {
	out := map[memberRef]bool{}
	for r := range q.own {
		out[r] = true
	}
	for n, vs := range q.views {
		if _, ok := live[n]; !ok {
			continue
		}
		for r := range vs {
			out[r] = true
		}
	}
	return out
}

// Observe takes an update of this node's watcher (it is the watcher's
// OnUpdate in an NS set) and hands the member's state to serve to the
// sink: the update as it is with quorum off; with quorum on, its state is
// the Verdict of every live node's view, and a change of this node's own
// view is published under its lease. Like OnUpdate it never blocks on
// etcd.
func (s *Store) Observe(u probe.Update) {
	if !s.quorumCfg.Enabled {
		if s.sink != nil {
			s.sink.Observe(u)
		}
		return
	}
	s.fwd.Lock()
	defer s.fwd.Unlock()
	ref := memberRef{u.Group, u.Member}
	s.mu.Lock()
	prev, had := s.q.own[ref]
	s.q.own[ref] = u
	changed := !had || prev.State != u.State
	if changed {
		s.q.queued[ref] = queuedView{state: u.State}
	}
	u.State = s.verdictLocked(ref)
	s.q.served[ref] = u.State
	s.mu.Unlock()
	if changed {
		s.kickCheck()
	}
	if s.sink != nil {
		s.sink.Observe(u)
	}
}

// reconsider hands the sink every member whose verdict changed since it
// was last given one: after other nodes' views or the live nodes changed,
// or etcd was lost or found again.
func (s *Store) reconsider() {
	if !s.quorumCfg.Enabled {
		return
	}
	s.fwd.Lock()
	defer s.fwd.Unlock()
	var out []probe.Update
	s.mu.Lock()
	for ref := range s.q.refs(s.nodes) {
		v := s.verdictLocked(ref)
		if old, ok := s.q.served[ref]; ok && old == v {
			continue
		}
		s.q.served[ref] = v
		u, ok := s.q.own[ref]
		if !ok {
			u = probe.Update{Group: ref.group, Member: ref.member}
		}
		u.State = v
		out = append(out, u)
	}
	s.mu.Unlock()
	if s.sink == nil {
		return
	}
	for _, u := range out {
		s.sink.Observe(u)
	}
}

// Forget drops what the Store knows of a member that this node no
// longer watches: its view is deleted from etcd, its down votes gauge
// goes.
func (s *Store) Forget(group, member string) {
	if !s.quorumCfg.Enabled {
		return
	}
	ref := memberRef{group, member}
	s.mu.Lock()
	delete(s.q.own, ref)
	delete(s.q.served, ref)
	s.q.queued[ref] = queuedView{gone: true}
	s.downVotes.DeleteLabelValues(group, member)
	s.mu.Unlock()
	s.kickCheck()
}

// Watching returns w, whose Remove also makes the Store forget the member
// (Forget): the Controller's watcher in an NS set.
func (s *Store) Watching(w members.Watcher) members.Watcher { return forgetting{w, s} }

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

// verdictLocked is the Verdict for ref from what the Store knows, and
// sets its down votes gauge; s.mu held.
func (s *Store) verdictLocked(ref memberRef) probe.State {
	t := s.tallyLocked(ref)
	if t.watched { // a series only for the members Forget will be told of
		s.downVotes.WithLabelValues(ref.group, ref.member).Set(float64(t.down))
	}
	return Verdict(s.quorumCfg, !s.degraded, t.own, t.others, t.live)
}

// tally is what the live nodes see of one member.
type tally struct {
	own     probe.State   // this node's view
	watched bool          // this node watches the member
	others  []probe.State // the other live nodes' views
	live    int           // the live nodes, this one included
	down    int           // the views that are down, this node's included
	downBy  []string      // the nodes whose view is down, by name
}

// tallyLocked counts the views of ref; s.mu held.
func (s *Store) tallyLocked(ref memberRef) tally {
	t := tally{live: len(s.nodes)}
	if _, ok := s.nodes[s.node]; !ok {
		t.live++
	}
	for n := range s.nodes {
		if n == s.node {
			continue
		}
		v := probe.StateUnknown
		if vs, ok := s.q.views[n]; ok {
			v = vs[ref]
		}
		t.others = append(t.others, v)
		if v == probe.StateDown {
			t.downBy = append(t.downBy, n)
		}
	}
	u, watched := s.q.own[ref]
	t.own, t.watched = u.State, watched
	if t.own == probe.StateDown {
		t.downBy = append(t.downBy, s.node)
	}
	t.down = len(t.downBy)
	slices.Sort(t.downBy)
	return t
}

// MemberVotes is what quorum counts of one member: Down of the Live nodes
// see it down, namely DownBy.
type MemberVotes struct {
	Group, Member string
	Down, Live    int
	DownBy        []string
}

// votesLocked returns, with quorum on, the members that at least one live
// node sees down, by group and member; s.mu held.
func (s *Store) votesLocked() []MemberVotes {
	if !s.quorumCfg.Enabled {
		return nil
	}
	var out []MemberVotes
	for ref := range s.q.refs(s.nodes) {
		if t := s.tallyLocked(ref); t.down > 0 {
			out = append(out, MemberVotes{Group: ref.group, Member: ref.member, Down: t.down, Live: t.live, DownBy: t.downBy})
		}
	}
	slices.SortFunc(out, func(a, b MemberVotes) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Member, b.Member))
	})
	return out
}

// healthKey is where node's view of a member lives in etcd.
func (s *Store) healthKey(node string, ref memberRef) string {
	return s.prefix + "health/" + node + "/" + ref.group + "/" + ref.member
}

// view reads a node's view of a member from its key and value.
func (s *Store) view(key string, value []byte) (node string, ref memberRef, st probe.State, ok bool) {
	parts := strings.SplitN(strings.TrimPrefix(key, s.prefix+"health/"), "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", ref, st, false
	}
	if value != nil && st.UnmarshalText(value) != nil {
		s.log.Debug("health view does not decode", "key", key)
		return "", ref, st, false
	}
	return parts[0], memberRef{parts[1], parts[2]}, st, true
}

// setView records (put) or forgets (!put) another node's view; s.mu held.
func (s *Store) setViewLocked(node string, ref memberRef, st probe.State, put bool) {
	if node == s.node {
		return
	}
	vs := s.q.views[node]
	if !put {
		delete(vs, ref)
		if len(vs) == 0 {
			delete(s.q.views, node)
		}
		return
	}
	if vs == nil {
		vs = map[memberRef]probe.State{}
		s.q.views[node] = vs
	}
	vs[ref] = st
}

// publishViews puts this node's waiting views under the lease.
func (s *Store) publishViews(ctx context.Context, lease clientv3.LeaseID) error {
	s.mu.Lock()
	batch := s.q.queued
	s.q.queued = map[memberRef]queuedView{}
	s.mu.Unlock()
	for ref, v := range batch {
		c, cancel := context.WithTimeout(ctx, s.timeout)
		var err error
		if v.gone {
			_, err = s.cli.Delete(c, s.healthKey(s.node, ref))
		} else {
			_, err = s.cli.Put(c, s.healthKey(s.node, ref), v.state.String(), clientv3.WithLease(lease))
		}
		cancel()
		if err != nil {
			s.mu.Lock()
			for r, v := range batch {
				if _, newer := s.q.queued[r]; !newer {
					s.q.queued[r] = v
				}
			}
			s.mu.Unlock()
			return fmt.Errorf("publish health view: %w", err)
		}
	}
	return nil
}
