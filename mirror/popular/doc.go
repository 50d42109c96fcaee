// Package popular finds the paths a mirror is asked for most: a bounded
// Space-Saving sketch (Metwally, Agrawal and El Abbadi, "Efficient
// computation of frequent and top-k elements in data streams", 2005) whose
// counts decay, and the rule of which requests count (Counter).
//
// # The sketch
//
// A Sketch keeps at most K counters (DefaultCounters, 64), each a key, a
// count and an error. A key that has a counter adds one to it; a new key
// takes a free counter with count 1, or else replaces the key of the
// smallest counter, whose count c becomes c+1 with error c. So the memory
// is bounded whatever the stream, a count never falls short of the key's
// true count, overshoots it by at most its error, and every key asked for
// more than 1/K of the time has a counter. Top reports the keys by their
// guaranteed count (count − error), so that a key which only inherited a
// counter ranks below one really asked for.
//
// # Decay
//
// The operator wants what is popular now, not since the start. Every
// count and error is halved each HalfLife (5 minutes), in steps counted
// from the sketch's start: a request weighs 1 in its own period, ½ in the
// next, ¼ after, so a count is about the requests of the last 7 minutes
// (the sum of the weights, 2·HalfLife ≈ 10 min, half of it in the current
// period on average). Halving every counter at once keeps the order of
// the counters and the bounds above (both sides scale by the same
// factor), costs K multiplications once a period, and needs no timestamp
// per counter; a pair of sliding epochs would need two sketches and would
// forget a path abruptly. The steps are lazy: each Add and Top first
// applies the halvings due at its time. A clock that goes back halves
// nothing.
//
// K and HalfLife are fixed, not configured: 64 counters is four times the
// 16 paths a report carries (so the reported ones are seldom the ones
// replaced), and 5 minutes is long against the 2 s push interval and short
// against the day's pattern.
//
// # What counts
//
// See Counter: a GET on the group name or on the member's own host name
// (a Range request only when its first range starts at byte 0), counted
// where it is answered, not where it is redirected, by its decoded path
// cleaned and in canonical escaped form (Key), of at most MaxPathLen bytes.
package popular
