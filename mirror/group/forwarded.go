package group

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Values of redirect.scheme.
const (
	// SchemeAuto (also "") is the request's own scheme: https when it came
	// over TLS, or what a trusted proxy says (Forwarded: proto=,
	// X-Forwarded-Proto), else http.
	SchemeAuto = "auto"
	// SchemeHTTP always redirects to http.
	SchemeHTTP = "http"
	// SchemeHTTPS always redirects to https (a mirror behind a TLS
	// terminator, when every sibling is behind one too).
	SchemeHTTPS = "https"
)

// Schemes are the values of redirect.scheme.
var Schemes = []string{SchemeAuto, SchemeHTTP, SchemeHTTPS}

// Forwarded is what the proxies in front of this mirror that it trusts say
// of a request's client.
type Forwarded struct {
	// Client is the client's address: the rightmost address of the
	// forwarding chain that is not a trusted proxy, or the peer's own
	// address when the peer is not trusted. The zero Addr when a trusted
	// proxy names the client with something that is not an address
	// ("unknown", an obfuscated name), which is the unknown location.
	Client netip.Addr
	// Proto is "http" or "https" as the outermost trusted proxy says the
	// client spoke to it; "" when no trusted proxy says.
	Proto string
}

// ForwardedOf reads what trusted proxies say of r's client, purely from
// r's peer address (RemoteAddr) and headers. When the peer is not in
// trusted, the headers are ignored: the client is the peer and Proto is
// empty. Otherwise the chain is walked from the right, one hop per trusted
// proxy, in RFC 7239's Forwarded header when r has one (its for= and
// proto= parameters), else in X-Forwarded-For with X-Forwarded-Proto
// (whose values are matched to the hops from the right, its first value
// standing for the hops beyond when it has fewer; without
// X-Forwarded-For the client is the peer): the client is the first
// address that is not trusted, or the leftmost one, and the scheme is
// the proto of the last hop walked that gives one.
func ForwardedOf(r *http.Request, trusted []netip.Prefix) Forwarded {
	peer := remoteAddr(r.RemoteAddr)
	if len(trusted) == 0 || !isTrusted(peer, trusted) {
		return Forwarded{Client: peer}
	}
	type hop struct {
		addr  netip.Addr
		proto string
	}
	var hops []hop
	if fw := r.Header.Values("Forwarded"); len(fw) > 0 {
		for _, elem := range splitList(fw) {
			var h hop
			for pair := range strings.SplitSeq(elem, ";") {
				k, v, _ := strings.Cut(strings.TrimSpace(pair), "=")
				v = strings.Trim(strings.TrimSpace(v), `"`)
				switch strings.ToLower(strings.TrimSpace(k)) {
				case "for":
					h.addr = nodeAddr(v)
				case "proto":
					h.proto = proto(v)
				}
			}
			hops = append(hops, h)
		}
	} else {
		protos := splitList(r.Header.Values("X-Forwarded-Proto"))
		xff := splitList(r.Header.Values("X-Forwarded-For"))
		if len(xff) == 0 && len(protos) > 0 {
			// A proxy that says only the scheme: the client is the peer.
			return Forwarded{Client: peer, Proto: proto(protos[len(protos)-1])}
		}
		for i, v := range xff {
			h := hop{addr: nodeAddr(v)}
			if k := len(xff) - 1 - i; len(protos) > 0 {
				h.proto = proto(protos[max(len(protos)-1-k, 0)])
			}
			hops = append(hops, h)
		}
	}
	f := Forwarded{Client: peer}
	for i := len(hops) - 1; i >= 0 && isTrusted(f.Client, trusted); i-- {
		f.Client = hops[i].addr
		if hops[i].proto != "" {
			f.Proto = hops[i].proto
		}
	}
	return f
}

// RequestScheme is the scheme of a redirect under the redirect.scheme
// setting: http or https as set, else (auto, "") what a trusted proxy said
// (forwardedProto), else https when the request came over TLS, else http.
func RequestScheme(setting string, overTLS bool, forwardedProto string) string {
	switch {
	case setting == SchemeHTTP || setting == SchemeHTTPS:
		return setting
	case forwardedProto != "":
		return forwardedProto
	case overTLS:
		return SchemeHTTPS
	}
	return SchemeHTTP
}

// isTrusted reports whether a is in one of the prefixes.
func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	if !a.IsValid() {
		return false
	}
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// remoteAddr parses a RemoteAddr ("IP:port"); the zero Addr if it is none.
func remoteAddr(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// nodeAddr parses a node of Forwarded's for= or an X-Forwarded-For value:
// an IPv4 address or a bracketed IPv6 one, with or without a port, or a
// bare IPv6 address; anything else ("unknown", "_hidden") is the zero Addr.
func nodeAddr(v string) netip.Addr {
	v = strings.TrimSpace(v)
	if h, _, err := net.SplitHostPort(v); err == nil {
		v = h
	}
	a, err := netip.ParseAddr(strings.Trim(v, "[]"))
	if err != nil || a.Zone() != "" {
		return netip.Addr{}
	}
	return a.Unmap()
}

// proto returns "http" or "https" for a proto value, else "".
func proto(v string) string {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case SchemeHTTP:
		return SchemeHTTP
	case SchemeHTTPS:
		return SchemeHTTPS
	}
	return ""
}

// splitList splits the comma-separated values of header lines.
func splitList(lines []string) []string {
	var out []string
	for _, l := range lines {
		for v := range strings.SplitSeq(l, ",") {
			if v = strings.TrimSpace(v); v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}
