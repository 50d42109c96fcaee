// Package members is dnsd's member registry: the members of the config
// file plus those added at run time (GROUP-ADD, removed by GROUP-EXIT),
// operator drains and pushed load reports (LOAD-INFORM). Run-time members
// and drains are persisted in the state file. Every change is prepare
// (validate with the config's rules, build the new answers) → persist (the
// state file, atomically) → commit (swaps that cannot fail): a failed
// prepare or persist changes nothing, in memory or on disk.
//
// It also answers GROUP-QUERY: the group view with each member's figures as
// measured.
package members
