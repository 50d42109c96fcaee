// Package api is the admin API of transmirror's daemons: the routes of
// dnsd's and the mirror's admin servers, the JSON types they exchange
// (group views, members, explanations), the HMAC request signing of
// writes, and the Client that groupctl and the mirrors use.
//
// Requests are signed with one header,
// Authorization: TM-HMAC-SHA256 ts=<unix seconds>,sig=<hex HMAC-SHA256>,
// over the timestamp, method, request URI and the SHA-256 of the body
// (see Sign). A signature is good for Window (default 30 s) either side of
// its timestamp. A Verifier also refuses a signature it has already
// accepted while that signature is still inside its window; it holds at
// most MaxEntries (default 65536) signatures and, when all of them are
// still live, refuses new ones rather than forget a live one (fail
// closed), so replay protection never silently lapses.
package api
