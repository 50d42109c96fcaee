package daemon

import (
	"net/http"
	"net/http/pprof"

	"github.com/transmirror/transmirror/probe/api"
)

// PprofPrefix is where Pprof serves Go's profiles.
const PprofPrefix = "/debug/pprof/"

// Pprof returns next with Go's profiling endpoints (net/http/pprof) under
// PprofPrefix when on (the -pprof flag), for loopback callers only: a
// profile shows the code and the data it runs on, and a CPU profile or a
// trace costs the daemon while it runs. Off, or asked from anywhere else,
// the prefix is next's (a 404 there) or a 403. A profile's seconds must
// stay under the admin listener's AdminWriteTimeout.
func Pprof(next http.Handler, on bool) http.Handler {
	if !on {
		return next
	}
	mux := http.NewServeMux()
	mux.Handle("/", next)
	loopback := func(h http.HandlerFunc) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !api.FromLoopback(r) {
				http.Error(w, "profiles are served to loopback callers only", http.StatusForbidden)
				return
			}
			h(w, r)
		})
	}
	mux.Handle(PprofPrefix, loopback(pprof.Index))
	mux.Handle(PprofPrefix+"cmdline", loopback(pprof.Cmdline))
	mux.Handle(PprofPrefix+"profile", loopback(pprof.Profile))
	mux.Handle(PprofPrefix+"symbol", loopback(pprof.Symbol))
	mux.Handle(PprofPrefix+"trace", loopback(pprof.Trace))
	return mux
}
