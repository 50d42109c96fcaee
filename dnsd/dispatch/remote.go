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
// a group's pending load: node → member name → per family.
type remotePending struct {
	mu sync.Mutex
	by map[string]map[string]FamilyPending
}

func newRemotePending() *remotePending {
	return &remotePending{by: make(map[string]map[string]FamilyPending)}
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

// apply sets each family estimator's remote pending load from the sums.
func (g *dgroup) applyRemote() {
	sums := g.remote.sums()
	for fi, f := range g.fam {
		if f == nil {
			continue
		}
		for k, i := range f.idx {
			f.est.SetRemote(k, sums[g.cfg.Members[i].Name][fi])
		}
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
				if v := f.est.LocalPending(k, now) - f.redir.LocalPending(k, now); math.Abs(v) > 1e-9 {
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
