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
	}{
		{"loopback, reloaded", "127.0.0.1:4000", nil, http.StatusOK, `"status":"reloaded"`, true},
		{"loopback v6, failed", "[::1]:4000", errors.New("m.yaml: listen: changed from a to b: needs a restart"), http.StatusBadRequest, `"error":"m.yaml: listen: changed from a to b: needs a restart"`, true},
		{"v4-mapped loopback", "[::ffff:127.0.0.1]:4000", nil, http.StatusOK, "reloaded", true},
		{"error as written", "127.0.0.1:4000", errors.New("capacity: must be > 0"), http.StatusBadRequest, "must be > 0", true},
		{"remote caller", "192.0.2.7:4000", nil, http.StatusForbidden, "loopback only", false},
		{"no address", "", nil, http.StatusForbidden, "loopback only", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			h := ReloadHandler(func(context.Context) error { called = true; return tt.err })
			req := httptest.NewRequest(http.MethodPost, "/-/reload", nil)
			req.RemoteAddr = tt.remote
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
