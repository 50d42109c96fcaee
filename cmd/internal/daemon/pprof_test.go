package daemon

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPprof(t *testing.T) {
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			_, _ = w.Write([]byte("next"))
			return
		}
		http.NotFound(w, r)
	})
	tests := []struct {
		name   string
		on     bool
		remote string
		path   string
		code   int
		body   string // a part of the body
	}{
		{"off", false, "127.0.0.1:1000", "/debug/pprof/", http.StatusNotFound, ""},
		{"on, loopback: the index", true, "127.0.0.1:1000", "/debug/pprof/", http.StatusOK, "goroutine"},
		{"on, IPv6 loopback: a profile", true, "[::1]:1000", "/debug/pprof/heap?debug=1", http.StatusOK, "heap profile"},
		{"on, from elsewhere", true, "192.0.2.7:1000", "/debug/pprof/", http.StatusForbidden, "loopback callers only"},
		{"on, from elsewhere: cmdline", true, "192.0.2.7:1000", "/debug/pprof/cmdline", http.StatusForbidden, ""},
		{"on: the rest is next's", true, "192.0.2.7:1000", "/metrics", http.StatusOK, "next"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			req.RemoteAddr = tt.remote
			rec := httptest.NewRecorder()
			Pprof(next, tt.on).ServeHTTP(rec, req)
			if rec.Code != tt.code || !strings.Contains(rec.Body.String(), tt.body) {
				t.Errorf("GET %s from %s: %d %.80q, want %d with %q", tt.path, tt.remote, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
		})
	}
}
