// Package members is dnsd's member registry, the control plane: the members
// of the config file plus those added at run time (GROUP-ADD, removed by
// GROUP-EXIT) and operator drains. It never sees a load report (package
// intake takes those to the watcher); it tells the watcher which members
// to watch, every one of them, push-only ones with no URL. Run-time members
// and drains are persisted in the state file. Every change is prepare
// (validate with the config's rules, build the new answers) → persist (the
// state file, atomically) → commit (swaps that cannot fail): a failed
// prepare or persist changes nothing, in memory or on disk.
//
// It also answers GROUP-QUERY: the group view with each member's figures as
// measured.
package members
