package site

import (
	"net/netip"
	"time"
)

// MaxBudgetClients is how many client networks a target table's
// per-client budget remembers (the least recently seen is forgotten, and
// with it what it had spent).
const MaxBudgetClients = 10_000

// targetBudget bounds the new targets that one client network (its
// address masked to Params.PrefixV4 or PrefixV6, as client-hash masks
// it) may add to a target table: at most Params.ClientTargets in each
// window of Params.ClientWindow, a fixed window that starts at the
// network's first new target after the last one ended. The threat is a
// client that asks for ever new keys (unique paths, or unique queries
// with site.target_key: path_query): each would take a table entry, up to
// MaxTargets, evicting the targets that carry the site's locality. Past
// its budget, a request is still served (see untracked), it only adds no
// target. A client without an address (the zero netip.Addr) or on a
// loopback address is not bounded: the site's own tools and benchmarks.
// Many networks can still add their budget each; the bound makes churn
// take as many networks as the table has entries over the window's
// budget. Memory: at most MaxBudgetClients entries of about 100 bytes.
// Not safe for concurrent use: the policy's lock guards it.
type targetBudget struct {
	limit   int
	window  time.Duration
	v4, v6  int
	clients lru[budgetSpell]
	// refused counts the new targets refused (for State).
	refused uint64
}

// budgetSpell is what one client network spent in its current window.
type budgetSpell struct {
	start time.Time
	n     int
}

func newTargetBudget(p Params) targetBudget {
	b := targetBudget{limit: p.ClientTargets, window: p.ClientWindow, v4: p.PrefixV4, v6: p.PrefixV6}
	b.clients.init()
	return b
}

// allow reports whether client may add one more target at now, and if so
// counts it.
func (b *targetBudget) allow(client netip.Addr, now time.Time) bool {
	a := client.Unmap()
	if !a.IsValid() || a.IsLoopback() {
		return true
	}
	bits := b.v6
	if a.Is4() {
		bits = b.v4
	}
	if p, err := a.Prefix(bits); err == nil {
		a = p.Addr()
	}
	raw := a.As16()
	i, ok := b.clients.index[string(raw[:])] // no allocation for a known network
	if !ok {
		if b.clients.len() >= MaxBudgetClients {
			b.clients.remove(b.clients.tail, true)
		}
		i = b.clients.insert(string(raw[:]))
		b.clients.nodes[i].val = budgetSpell{start: now}
	} else {
		b.clients.touch(i)
	}
	s := &b.clients.nodes[i].val
	if d := now.Sub(s.start); d >= b.window || d < 0 {
		*s = budgetSpell{start: now}
	}
	if s.n >= b.limit {
		b.refused++
		return false
	}
	s.n++
	return true
}

// untracked is the back end of a request whose key has no target and may
// not get one (its client is over budget): the owner of the key by
// weighted rendezvous hashing over the up back ends, as ward's files
// have, so that the same key keeps going to the same back end without a
// table entry, unless the owner is overloaded by LARD's rule; then least,
// the least loaded (load minLoad).
func untracked(req *Request, bs []Backend, least int, minLoad float64, p *Params) int {
	i := rendezvous(hashString(fnvOffset, req.Key), bs, req.Has)
	if i < 0 || overloaded(load(&bs[i]), minLoad, p) {
		return least
	}
	return i
}
