// Package cluster shares dnsd's run-time state among the name servers of an
// NS set through etcd: run-time members and drains (one key per group,
// written with a transaction that compares its mod revision, so that two
// concurrent edits can not lose one), the pending load of each node's
// answers, and the list of nodes (under this node's lease, so that they
// expire with it). Load reports are not here: live data comes to every
// node from its source (a mirror pushes to every node), so etcd holds what
// must survive and what the nodes derive, not what mirrors report. Every
// node watches the deployment's prefix and hands what others changed to
// the member registry. Losing etcd never stops answering: the node serves
// from its last known state, says it is degraded, refuses membership
// changes (members.ErrStoreUnavailable), keeps taking pushes, and reads
// everything again when etcd is back. With quorum on, every node also
// publishes its own view of each member's health under its lease, and
// serves a member as down only when more than a share of the live nodes
// see it down (Verdict); without etcd each node serves its own view.
//
// The Store is one session and a type per key family, in the way of
// etcd's concurrency.Session and the Mutex and Election built on it. The
// session (session.go) holds the client's lease and keeps it alive, reads
// the whole prefix when it starts, follows the watch, hands each change
// to the family whose prefix it is under, and says whether etcd can be
// reached. Each family owns its prefix, its encoding and what its keys
// mean to this node: groups/ (groups.go: the run-time state, the local
// copy, the Applier), nodes/ (nodes.go: the live nodes; this node's entry
// is what a session checks), pending/ (pending.go: each node's pending
// load and what its scopes explain, published every pending_interval)
// and health/ (health.go: each node's views of the members, and the
// verdicts served with quorum on; the rule itself is in quorum.go) and
// acme/ (acme.go: the live ACME DNS-01 challenges, each under a lease of
// its own that runs out with it).
package cluster
