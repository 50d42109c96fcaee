package dispatch

import (
	"fmt"
	"math"
	"sync"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/dnsd"
)

// FamilyPending is one member's pending load in each address family (A,
// AAAA): the hidden load of the answers a dnsd gave that the member's
// reports do not show yet.
type FamilyPending [2]float64

// MaxRemoteNodes bounds the other nodes whose pending load a group
// remembers; a node beyond is ignored until one leaves.
const MaxRemoteNodes = 64

// remotePending is what the other dnsd nodes of an NS set last shared of
// a group: its pending load (node → member name → per family) and what
// their scopes explain of each member's group requests (node → member
// name → requests per second).
type remotePending struct {
	mu        sync.Mutex
	by        map[string]map[string]FamilyPending
	explained map[string]map[string]float64
}

func newRemotePending() *remotePending {
	return &remotePending{by: make(map[string]map[string]FamilyPending), explained: make(map[string]map[string]float64)}
}

// setExplained records what node's scopes explain (nil: nothing) and
// reports whether it took it (false: one node too many).
func (r *remotePending) setExplained(node string, e map[string]float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(e) == 0 {
		delete(r.explained, node)
		return true
	}
	if _, ok := r.explained[node]; !ok && len(r.explained) >= MaxRemoteNodes {
		return false
	}
	r.explained[node] = e
	return true
}

// explainedSums returns what the other nodes explain of each member, summed.
func (r *remotePending) explainedSums() map[string]float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]float64)
	for _, e := range r.explained {
		for name, v := range e {
			if !math.IsNaN(v) && !math.IsInf(v, 0) && v > 0 {
				out[name] += v
			}
		}
	}
	return out
}

// set records node's figures (nil: the node has none any more) and
// reports whether it took them (false: one node too many).
func (r *remotePending) set(node string, p map[string]FamilyPending) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(p) == 0 {
		delete(r.by, node)
		return true
	}
	if _, ok := r.by[node]; !ok && len(r.by) >= MaxRemoteNodes {
		return false
	}
	r.by[node] = p
	return true
}

// sums returns every member's total over the nodes.
func (r *remotePending) sums() map[string]FamilyPending {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]FamilyPending)
	for _, p := range r.by {
		for name, v := range p {
			s := out[name]
			for f := range v {
				if !math.IsNaN(v[f]) && !math.IsInf(v[f], 0) {
					s[f] += v[f]
				}
			}
			out[name] = s
		}
	}
	return out
}

// applyRemote sets each family's other-nodes pending load, and the
// scope rates' remote explained requests of each member, from the sums.
func (g *dgroup) applyRemote() {
	sums := g.remote.sums()
	for fi, f := range g.fam {
		if f == nil {
			continue
		}
		for k, i := range f.idx {
			f.src[srcNodes].SetRemote(k, sums[g.cfg.Members[i].Name][fi])
		}
	}
	explained := g.remote.explainedSums()
	for i, m := range g.cfg.Members {
		g.rates.SetRemoteExplained(i, explained[m.Name])
	}
}

// SetRemotePending takes the pending load that another dnsd node of the
// NS set (node) has booked for the answers it gave, by member name: it is
// added to this node's own in every pick, so that the nodes do not all
// send the same least-loaded member their clients at once. It replaces
// what node shared before; nil forgets the node (it left). Members the
// group does not have are ignored (a node on another config).
func (d *Dispatcher) SetRemotePending(group, node string, p map[string]FamilyPending) error {
	d.mu.Lock() // against a commit that makes new estimators meanwhile
	defer d.mu.Unlock()
	g := d.groups()[dns.CanonicalName(group)]
	if g == nil {
		return fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
	}
	if !g.remote.set(node, p) {
		return fmt.Errorf("dispatch: %s: more than %d other nodes share pending load", group, MaxRemoteNodes)
	}
	g.applyRemote()
	return nil
}

// ForgetRemotePending forgets what every other node shared, in every
// group: for a node that can no longer hear them (its store is away), so
// that figures nobody updates do not stay.
func (d *Dispatcher) ForgetRemotePending() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, g := range d.groups() {
		g.remote.mu.Lock()
		clear(g.remote.by)
		clear(g.remote.explained)
		g.remote.mu.Unlock()
		g.applyRemote()
	}
}

// LocalPending returns, by group and member name, the pending load of the
// answers this node gave (without what others shared, and without the
// dispatchers' redirects, which they report to every node): what it
// shares with them. Members with none in both families are left out.
func (d *Dispatcher) LocalPending() map[string]map[string]FamilyPending {
	now := d.now()
	out := make(map[string]map[string]FamilyPending)
	for name, g := range d.groups() {
		members := make(map[string]FamilyPending)
		for fi, f := range g.fam {
			if f == nil {
				continue
			}
			for k, i := range f.idx {
				if v := f.src[srcOwn].LocalPending(k, now); math.Abs(v) > 1e-9 {
					m := members[g.cfg.Members[i].Name]
					m[fi] = v
					members[g.cfg.Members[i].Name] = m
				}
			}
		}
		out[name] = members
	}
	return out
}

// SetRemoteExplained takes what another dnsd node of the NS set (node)
// says its scopes explain of each member's group requests, by member
// name (requests per second): this node's scopes are then calibrated
// against their share of the members' reports only, so that the set is
// calibrated once (see scheduler.ScopeRates.SetRemoteExplained). It
// replaces what node shared before; nil forgets the node. Members the
// group does not have are ignored.
func (d *Dispatcher) SetRemoteExplained(group, node string, e map[string]float64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := d.groups()[dns.CanonicalName(group)]
	if g == nil {
		return fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
	}
	if !g.remote.setExplained(node, e) {
		return fmt.Errorf("dispatch: %s: more than %d other nodes share what they explain", group, MaxRemoteNodes)
	}
	g.applyRemote()
	return nil
}

// LocalExplained returns, by group and member name, what this node's
// scopes explained of each member's group requests at its last report
// (requests per second): what it shares with the other nodes. Members
// with none are left out.
func (d *Dispatcher) LocalExplained() map[string]map[string]float64 {
	out := make(map[string]map[string]float64)
	for name, g := range d.groups() {
		members := make(map[string]float64)
		for i, m := range g.cfg.Members {
			if v := g.rates.Explained(i); v > 0 {
				members[m.Name] = v
			}
		}
		out[name] = members
	}
	return out
}
