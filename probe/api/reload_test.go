package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReloadHandler: loopback callers reload and get the error in the
// body; others get 403 and reload nothing.
func TestReloadHandler(t *testing.T) {
	tests := []struct {
		name   string
		remote string
		err    error
		code   int
		body   string
		called bool
		header http.Header // nil: RequestHeader: 1
	}{
		{"loopback, reloaded", "127.0.0.1:4000", nil, http.StatusOK, `"status":"reloaded"`, true, nil},
		{"loopback v6, failed", "[::1]:4000", errors.New("m.yaml: listen: changed from a to b: needs a restart"), http.StatusBadRequest, `"error":"m.yaml: listen: changed from a to b: needs a restart"`, true, nil},
		{"v4-mapped loopback", "[::ffff:127.0.0.1]:4000", nil, http.StatusOK, "reloaded", true, nil},
		{"error as written", "127.0.0.1:4000", errors.New("capacity: must be > 0"), http.StatusBadRequest, "must be > 0", true, nil},
		{"remote caller", "192.0.2.7:4000", nil, http.StatusForbidden, "loopback only", false, nil},
		{"no address", "", nil, http.StatusForbidden, "loopback only", false, nil},
		{"JSON body instead of the header", "127.0.0.1:4000", nil, http.StatusOK, "reloaded", true,
			http.Header{"Content-Type": {"application/json; charset=utf-8"}}},
		{"cross-site form post", "127.0.0.1:4000", nil, http.StatusForbidden, "cross-site", false,
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Origin": {"http://evil.example"}}},
		{"form post, no Origin", "127.0.0.1:4000", nil, http.StatusForbidden, "X-Transmirror-Request: 1", false,
			http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}},
		{"text/plain, no header", "127.0.0.1:4000", nil, http.StatusForbidden, "X-Transmirror-Request", false,
			http.Header{"Content-Type": {"text/plain"}}},
		{"header but foreign Origin", "127.0.0.1:4000", nil, http.StatusForbidden, "cross-site", false,
			http.Header{RequestHeader: {"1"}, "Origin": {"http://evil.example"}}},
		{"header and own Origin", "127.0.0.1:4000", nil, http.StatusOK, "reloaded", true,
			http.Header{RequestHeader: {"1"}, "Origin": {"http://example.com"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			h := ReloadHandler(func(context.Context) error { called = true; return tt.err })
			req := httptest.NewRequest(http.MethodPost, "/-/reload", nil)
			req.RemoteAddr = tt.remote
			req.Header = tt.header
			if tt.header == nil {
				req.Header = http.Header{RequestHeader: {"1"}}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("%d %s, want %d with %q", w.Code, w.Body.String(), tt.code, tt.body)
			}
			if called != tt.called {
				t.Errorf("reload called: %v, want %v", called, tt.called)
			}
		})
	}
}
