package h1

import (
	"net/http"
	"strconv"
	"strings"
)

// RelayFields has the response that w answers carry resp's end-to-end
// fields (EndToEnd) as they came, in their order and case, after the
// handler's own: what copying them into w.Header() does for a proxy,
// without a map entry, a canonical name and a sort per field. The
// server's framing (Content-Length, Date, Content-Type, Connection) sees
// them as it sees the handler's. It must come before WriteHeader, and
// resp's fields stay valid until the head is written (at WriteHeader);
// w.Header() does not show them. w is an h1 response or wraps one
// (Unwrap); for any other RelayFields does nothing and returns false:
// copy the fields to the map.
func RelayFields(w http.ResponseWriter, resp *Response) bool {
	for {
		switch x := w.(type) {
		case *response:
			if x.wroteHeader {
				return false
			}
			x.relay = resp.EndToEnd(x.relay[:0])
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
}

// EndToEnd appends to dst the fields of r that a proxy forwards: all but
// the hop-by-hop ones (RFC 9110 7.6.1) and those its Connection fields
// name.
func (r *Response) EndToEnd(dst []Field) []Field {
	var buf [4]string
	drop := r.AppendConnection(buf[:0]) // empty without a Connection field
	for _, f := range r.Fields {
		if !HopByHop(f.Name) && !named(drop, f.Name) {
			dst = append(dst, f)
		}
	}
	return dst
}

// HopByHop reports whether name (in any case) is a field of one
// connection alone (RFC 9110 7.6.1), which a proxy does not forward.
func HopByHop(name string) bool {
	switch len(name) {
	case 2:
		return strings.EqualFold(name, "Te")
	case 7:
		return strings.EqualFold(name, "Trailer") || strings.EqualFold(name, "Upgrade")
	case 10:
		return strings.EqualFold(name, "Connection") || strings.EqualFold(name, "Keep-Alive")
	case 16:
		return strings.EqualFold(name, "Proxy-Connection")
	case 17:
		return strings.EqualFold(name, "Transfer-Encoding")
	case 18:
		return strings.EqualFold(name, "Proxy-Authenticate")
	case 19:
		return strings.EqualFold(name, "Proxy-Authorization")
	}
	return false
}

// named reports whether names (lower case) holds name, in any case.
func named(names []string, name string) bool {
	for _, x := range names {
		if strings.EqualFold(x, name) {
			return true
		}
	}
	return false
}

// noteRelayed reads, at WriteHeader, what the framing needs of the
// relayed fields: a Content-Length (unless the handler set one), Date,
// Content-Type, Content-Encoding.
func (w *response) noteRelayed() {
	clenSet := w.clen >= 0
	for _, f := range w.relay {
		switch n := f.Name; {
		case is(n, "Content-Length"):
			if clenSet {
				continue
			}
			if v, err := strconv.ParseInt(f.Value, 10, 64); err == nil && v >= 0 {
				w.clen, clenSet = v, true
			}
		case is(n, "Date"):
			w.hasDate = true
		case is(n, "Content-Type"):
			w.hasType = true
		case is(n, "Content-Encoding"):
			w.hasCE = w.hasCE || f.Value != ""
		}
	}
}

// appendRelayed appends the relayed fields, but those this response
// leaves out (as dropField does for the handler's).
func (w *response) appendRelayed(h []byte) []byte {
	for _, f := range w.relay {
		switch {
		case is(f.Name, "Content-Length") && (w.clen < 0 || !bodyAllowed(w.status)):
			continue
		case is(f.Name, "Content-Type") && w.status == http.StatusNotModified:
			continue
		}
		h = appendField(h, f.Name, f.Value)
	}
	return h
}

// is reports whether name is canonical, in any case.
func is(name, canonical string) bool {
	return len(name) == len(canonical) && strings.EqualFold(name, canonical)
}
