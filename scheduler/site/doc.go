// Package site holds the in-site request distribution policies of a
// mirror's front end: which back end serves each request, so that the back
// ends' memory caches hold different parts of the content while none of
// them is overloaded.
//
// A [Policy] comes from [New] with a name from [Names] (wrr, least-conn,
// client-hash, lard, lard-r, ward, tb-ccrd, chbl), [Params] and a random
// source; it never reads the clock or global randomness, so the same
// inputs replay the same decisions. Every policy is safe for concurrent
// use; the front end calls it per request, from many goroutines, each
// passing its own snapshot of the back ends:
//
//	i, err := pol.Pick(site.Request{Key: r.URL.EscapedPath(), Client: addr, Size: size}, backends, now)
//	if err != nil { ... } // site.ErrNoBackend: every back end is down
//	inflight[i].Add(1)    // the caller keeps the in-flight counts that
//	... proxy ...          // the next snapshots carry in Backend.Active
//	inflight[i].Add(-1)
//	pol.Done(site.Request{Key: key, Size: n}, backends[i].Name, time.Now())
//
// Back ends are passed whole on every call; policies remember them by
// name and forget names that leave the set. Each policy's memory is
// bounded (see each policy name's comment); nothing grows with the
// number of distinct URLs or clients beyond Params.MaxTargets,
// Params.SketchEntries or MaxBudgetClients entries, and one client
// network adds at most Params.ClientTargets targets per
// Params.ClientWindow to lard's and lard-r's tables.
//
// Every policy from [New] also implements [Stater]: State reports a few
// bounded figures of its state (LARD's target table, WARD's core, the
// tb-ccrd cache models, chbl's bound) for a status page, cheaply.
//
// [LRUBytes] is the byte-bounded LRU cache that tb-ccrd uses as a model of
// a back end's memory and that the back ends use as that memory.
package site
