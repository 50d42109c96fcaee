package frontend

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/scheduler/site"
)

// redirectSite builds a redirect-mode front end (no traffic to the back
// ends but their health checks) with policy over two back ends, and
// waits until both are up.
func redirectSite(t *testing.T, cfg Config) *handler {
	t.Helper()
	b1, b2 := webtest.NewBackend(t, "b1", nil), webtest.NewBackend(t, "b2", nil)
	cfg.Mode, cfg.Health = ModeRedirect, quietHealth
	_, h, _ := startSite(t, cfg,
		Backend{Name: "b1", URL: b1.URL, PublicURL: "http://b1.example.org"},
		Backend{Name: "b2", URL: b2.URL, PublicURL: "http://b2.example.org"})
	probetest.Until(t, 5*time.Second, func() string {
		if r0, r1 := h.backends[0].routable.Load(), h.backends[1].routable.Load(); !r0 || !r1 {
			return fmt.Sprintf("both back ends up: routable %t and %t", r0, r1)
		}
		return ""
	})

	return h
}

// get sends GET target from client through h and returns the Location.
func get(t *testing.T, h *handler, client, target string) string {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.RemoteAddr = client
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if rec.Code != http.StatusFound {
		t.Fatalf("GET %s: %d, want 302", target, rec.Code)
	}
	return rec.Header().Get("Location")
}

func lardTargets(h *handler) (targets int, untracked uint64) {
	st := h.policy.(site.Stater).State().LARD
	return st.Targets, st.Untracked
}

// TestTargetKey (issue 21): by default the policy's target is the path
// alone, so unique query strings do not churn the LARD table; with
// site.target_key: path_query each query is a target of its own. The
// query still reaches the back end.
func TestTargetKey(t *testing.T) {
	tests := []struct {
		name        string
		key         string
		n           int
		wantTargets int
	}{
		{"default: path only", "", 10_000, 1},
		{"path", TargetKeyPath, 10_000, 1},
		{"path_query", TargetKeyPathQuery, 50, 50},
	}
	for _, policy := range []string{site.LARD, site.LARDR} {
		for _, tt := range tests {
			t.Run(policy+"/"+tt.name, func(t *testing.T) {
				h := redirectSite(t, Config{Policy: PolicyConfig{Name: policy}, TargetKey: tt.key})
				first := ""
				for i := range tt.n {
					loc := get(t, h, "198.51.100.7:4000", fmt.Sprintf("/pub/file.iso?nonce=%d", i))
					if !strings.HasSuffix(loc, fmt.Sprintf("/pub/file.iso?nonce=%d", i)) {
						t.Fatalf("Location %q lost the query", loc)
					}
					host, _, _ := strings.Cut(strings.TrimPrefix(loc, "http://"), "/")
					if first == "" {
						first = host
					} else if tt.wantTargets == 1 && host != first {
						t.Fatalf("request %d went to %s, the file's target is %s", i, host, first)
					}
				}
				if n, _ := lardTargets(h); n != tt.wantTargets {
					t.Errorf("%d targets after %d requests, want %d", n, tt.n, tt.wantTargets)
				}
			})
		}
	}
}

// TestTargetBudgetThroughFrontEnd (issue 21): one client asking for
// unique paths adds at most site.policy.client_targets targets per
// client_window, while another client still adds its own; the capped
// client's requests are still answered.
func TestTargetBudgetThroughFrontEnd(t *testing.T) {
	h := redirectSite(t, Config{Policy: PolicyConfig{Name: site.LARD}})
	now := time.Now()
	h.now = func() time.Time { return now } // one window for the whole test
	for i := range 1000 {
		get(t, h, "198.51.100.7:4000", fmt.Sprintf("/unique/%d", i))
	}
	n, untracked := lardTargets(h)
	if want := site.DefaultParams().ClientTargets; n != want || untracked != uint64(1000-want) {
		t.Errorf("%d targets, %d untracked after 1000 unique paths from one client; want %d and %d", n, untracked, want, 1000-want)
	}
	for i := range 10 {
		get(t, h, "203.0.113.9:4000", fmt.Sprintf("/other/%d", i))
	}
	if m, _ := lardTargets(h); m != n+10 {
		t.Errorf("another client's 10 paths made %d targets, want 10", m-n)
	}
}
