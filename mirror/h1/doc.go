// Package h1 is the site front end's HTTP/1.1 client to its back ends:
// keep-alive connections in a pool per back end, each request head sent
// in one write, the response head parsed once from one buffered read
// (a small response comes with its body in it) into fields that point
// into one string, and the body relayed by its framing (a Content-Length,
// chunked, or until the connection ends). It does what
// net/http.Transport does for a GET or HEAD without a body, without its
// two goroutines per connection and their channel hand-offs per request,
// its header maps and its per-request allocations (see
// mirror/frontend's fast path, the only user).
//
// The parser follows RFC 9112 strictly where a proxy must (a folded
// field, whitespace before a colon, differing Content-Lengths, a
// Transfer-Encoding other than chunked are errors; Transfer-Encoding with
// Content-Length is read as chunked and the connection not used again)
// and leniently where it may (a bare LF ends a line, empty lines before
// the status line are skipped, interim 1xx responses are skipped).
package h1
