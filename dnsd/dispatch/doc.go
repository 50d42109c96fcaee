// Package dispatch answers dnsd's group names with the scheduler's
// policies: it locates the client (ECS first, else the resolver's address)
// with scheduler/geo, asks the group's policy for the members, sets the TTL
// from the client scope's estimated request rate against one member's fair
// share, books the answer's hidden load on the chosen members (and takes it
// off those of the scope's previous answer), and returns the ECS scope the
// answer depended on, as the policy states it. The members' reports
// calibrate the scopes' rates; the estimates are saved beside the state
// file (SaveScopes, LoadScopes, RunScopeSaver). It is the dnsd.GroupAnswerer that cmd/dnsd
// plugs into the server.
//
// A member's pending load is kept by source, one estimator each: this
// node's answers, the dispatchers' redirects (Redirects) and the other
// nodes' shares in an NS set (SetRemotePending); a pick sums them
// (scheduler.Query.Also), and only the first is shared (LocalPending).
//
// A group with max_lag leaves out its lagging members, those whose
// generation (in their reports) is more than max_lag behind the newest (the
// master's, SetMaster, or the freshest member's): scheduler.FreshnessRule,
// failing open to the freshest when every member lags.
//
// Member health arrives as events (Observe, from the prober's updates) and
// goes into the answers at once; configuration and membership arrive as
// Prepare (everything that can fail) and its commit (a swap that cannot).
package dispatch
