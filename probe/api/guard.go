package api

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// Browser defences of both daemons' admin listeners.
//
// The threat is a web page in a browser on the operator's machine (or on
// any machine that can reach the admin listener): it may send a form
// POST to http://127.0.0.1:8053/-/reload (a "simple" request, sent
// without a CORS preflight), or point a name it controls at the admin
// listener's address (DNS rebinding) and then read the API as its own
// origin. Being on loopback proves nothing against either. So:
//
//   - every request must name the admin listener in its Host (Guard):
//     an IP literal (a rebinding page's Host is always its own name,
//     never an address), localhost or a name under .localhost, the
//     host of the configured listen address, or one of the names
//     configured in admin_hosts; otherwise 421. Over TLS the
//     handshake already ties the request to the certificate's names (a
//     rebinding page fails its verification), so any Host is accepted;
//   - a request that may change something (any method but GET, HEAD and
//     OPTIONS) with an Origin that is not the listener's own (scheme
//     aside, the same host and port as the request's Host) gets 403;
//   - a reload must also be a request that a browser sends only after a
//     preflight (ReloadHandler): RequestHeader, or Content-Type
//     application/json.
//
// Signed writes (HMAC) and bearer-token writes cannot be forged by a
// page; they pass the same Host and Origin checks.

// RequestHeader is the header that makes a request to an admin listener
// non-simple (a browser sends it cross-site only after a CORS preflight,
// which the admin listener never grants): "X-Transmirror-Request: 1".
// The Client sends it with every request; a reload needs it (or
// Content-Type application/json): curl -X POST -H 'X-Transmirror-Request: 1'.
const RequestHeader = "X-Transmirror-Request"

// Guard returns h behind the Host and Origin checks above; listen is the
// admin listen address as configured ("127.0.0.1:8053", ":8053",
// "ns1.example.org:8053"), hosts the names of admin_hosts (lowercase, no
// final dot), tls whether the listener serves TLS.
func Guard(h http.Handler, listen string, hosts []string, tls bool) http.Handler {
	own, _, err := net.SplitHostPort(listen)
	if err != nil {
		own = listen
	}
	names := append([]string{strings.ToLower(strings.TrimSuffix(own, "."))}, hosts...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !tls && !AdminHost(r.Host, names) {
			writeReply(w, http.StatusMisdirectedRequest, ErrorReply{Error: "admin: Host " + quote(r.Host) +
				" is not this admin listener's (an IP address, localhost, the admin address's host or a name of admin_hosts): refused against DNS rebinding"})
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if o := r.Header.Get("Origin"); o != "" && !SameOrigin(o, r.Host) {
				writeReply(w, http.StatusForbidden, ErrorReply{Error: "admin: Origin " + quote(o) + " is not this admin listener's: cross-site request refused"})
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// AdminHost reports whether host, a request's Host (with or without a
// port), names an admin listener known by names (its listen host and
// admin_hosts; lowercase, no final dot): an IP literal, localhost, a
// name under .localhost, or one of names.
func AdminHost(host string, names []string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), "."))
	if h == "" {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" {
		return true
	}
	return h == "localhost" || strings.HasSuffix(h, ".localhost") || slices.Contains(names, h)
}

// SameOrigin reports whether origin, a request's Origin header, is the
// origin of the listener the request reached with Host host: the same
// host and port ("null" and anything unparsable are not).
func SameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(withPort(u.Host, u.Scheme), withPort(host, u.Scheme))
}

// withPort returns hostport with the scheme's default port when it has
// none.
func withPort(hostport, scheme string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), port)
}

// NonSimple reports whether r is a request that a browser sends cross-site
// only after a CORS preflight: it carries RequestHeader, or its
// Content-Type is application/json.
func NonSimple(r *http.Request) bool {
	if r.Header.Get(RequestHeader) != "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// quote returns s cut to 100 bytes and made printable, for an error
// reply (JSON, which quotes it again).
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100]
	}
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}
