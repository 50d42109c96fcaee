// Package api is the admin API of transmirror's daemons: the routes of
// dnsd's and the mirror's admin servers, the JSON types they exchange
// (group views, members, explanations), the HMAC request signing of
// writes, the browser defences of both admin listeners (Guard: the Host
// against DNS rebinding, a foreign Origin; ReloadHandler: a non-simple
// request), and the Client that groupctl and the mirrors use.
//
// Requests are signed with one header,
// Authorization: TM-HMAC-SHA256 ts=<unix seconds>,nonce=<base64url>,sig=<hex HMAC-SHA256>,
// over the timestamp, the nonce (16 random bytes a request), method,
// request URI and the SHA-256 of the body (see SignNonce). A signature is
// good for Window (default 30 s) either side of its timestamp. A Verifier
// also refuses a nonce it has already accepted while its signature is
// still inside its window, so a request sent again byte for byte is
// refused, and the same command sent twice in one second is not (each has
// its nonce). Signatures of the first version of the scheme, without a
// nonce, are still accepted, once per MAC: two identical ones within a
// second are one replayed, as before. A Verifier holds at most MaxEntries
// (default 65536) signatures and, when all of them are still live,
// refuses new ones rather than forget a live one (fail closed), so replay
// protection never silently lapses. VerifyKeys accepts any of several
// secrets, for rotating a group's secret without downtime.
package api
