package cluster

import (
	"cmp"
	"slices"
	"strings"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones"
)

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

// views is what the nodes see of the members' health: this node's own
// (its watcher's newest update of each member) and the other nodes' (as
// their health/ keys say), by node. A value; its owner guards it.
type views struct {
	node   string
	own    map[memberRef]probe.Update
	others map[string]map[memberRef]probe.State
}

func newViews(node string) views {
	return views{node: node, own: map[memberRef]probe.Update{}, others: map[string]map[memberRef]probe.State{}}
}

// refs returns every member that this node or a live node has a view of.
func (v *views) refs(live map[string]NodeInfo) map[memberRef]bool {
	out := map[memberRef]bool{}
	for r := range v.own {
		out[r] = true
	}
	for n, vs := range v.others {
		if _, ok := live[n]; !ok {
			continue
		}
		for r := range vs {
			out[r] = true
		}
	}
	return out
}

// set records (put) or forgets (!put) another node's view of ref.
func (v *views) set(node string, ref memberRef, st probe.State, put bool) {
	if node == v.node {
		return
	}
	vs := v.others[node]
	if !put {
		delete(vs, ref)
		if len(vs) == 0 {
			delete(v.others, node)
		}
		return
	}
	if vs == nil {
		vs = map[memberRef]probe.State{}
		v.others[node] = vs
	}
	vs[ref] = st
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

// verdict is the Verdict of t.
func (t tally) verdict(q zones.QuorumConfig, connected bool) probe.State {
	return Verdict(q, connected, t.own, t.others, t.live)
}

// tally counts the views of ref by the live nodes.
func (v *views) tally(ref memberRef, live map[string]NodeInfo) tally {
	t := tally{live: len(live)}
	if _, ok := live[v.node]; !ok {
		t.live++
	}
	for n := range live {
		if n == v.node {
			continue
		}
		st := probe.StateUnknown
		if vs, ok := v.others[n]; ok {
			st = vs[ref]
		}
		t.others = append(t.others, st)
		if st == probe.StateDown {
			t.downBy = append(t.downBy, n)
		}
	}
	u, watched := v.own[ref]
	t.own, t.watched = u.State, watched
	if t.own == probe.StateDown {
		t.downBy = append(t.downBy, v.node)
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

// votes returns the members that at least one live node sees down, by
// group and member.
func (v *views) votes(live map[string]NodeInfo) []MemberVotes {
	var out []MemberVotes
	for ref := range v.refs(live) {
		if t := v.tally(ref, live); t.down > 0 {
			out = append(out, MemberVotes{Group: ref.group, Member: ref.member, Down: t.down, Live: t.live, DownBy: t.downBy})
		}
	}
	slices.SortFunc(out, func(a, b MemberVotes) int {
		return cmp.Or(strings.Compare(a.Group, b.Group), strings.Compare(a.Member, b.Member))
	})
	return out
}
