package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
)

// ReloadHandler serves Reload (POST /-/reload) on either daemon's admin
// listener: it calls reload for a loopback caller whose request a
// browser could not have sent cross-site (NonSimple: RequestHeader, or
// Content-Type application/json; and no foreign Origin)
// and answers 200 {"status":"reloaded"}, or 400 {"error":…} with the
// reload's error (the old configuration keeps serving); any other caller
// gets 403 and nothing is reloaded. Serve it behind Guard (the Host).
func ReloadHandler(reload func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !FromLoopback(r) {
			writeReply(w, http.StatusForbidden, ErrorReply{Error: "reload is allowed from loopback only"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !SameOrigin(o, r.Host) {
			writeReply(w, http.StatusForbidden, ErrorReply{Error: "reload: Origin " + quote(o) + " is not this admin listener's: cross-site request refused"})
			return
		}
		if !NonSimple(r) {
			writeReply(w, http.StatusForbidden, ErrorReply{Error: "reload: send the header " + RequestHeader +
				": 1 (or Content-Type: application/json); a request that a browser may send cross-site is refused"})
			return
		}
		if err := reload(r.Context()); err != nil {
			writeReply(w, http.StatusBadRequest, ErrorReply{Error: err.Error()})
			return
		}
		writeReply(w, http.StatusOK, StatusReply{Status: "reloaded"})
	})
}

// FromLoopback reports whether r came from a loopback address.
func FromLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

func writeReply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // errors read "must be > 0", not "\u003e"
	_ = enc.Encode(v)
}
