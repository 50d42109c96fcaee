package admin

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/dnsd"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe/api"
)

// refusingMembership is a Membership whose groups are www.example.org
// (secret "www-secret"), other.example.org (secret "other-secret") and
// open.example.org (no secret); every write that gets through succeeds.
type refusingMembership struct{}

func (refusingMembership) List() api.GroupList                                    { return api.GroupList{} }
func (refusingMembership) View(string) (api.GroupView, error)                     { return api.GroupView{}, nil }
func (refusingMembership) Add(_ string, i api.MemberInfo) (api.MemberInfo, error) { return i, nil }
func (refusingMembership) Remove(string, string) error                            { return nil }
func (refusingMembership) Drain(string, string, bool) error                       { return nil }
func (refusingMembership) Secrets(group string) ([][]byte, error) {
	switch group {
	case "www.example.org":
		return [][]byte{[]byte("www-secret")}, nil
	case "other.example.org":
		return [][]byte{[]byte("other-secret")}, nil
	case "open.example.org":
		return nil, fmt.Errorf("%w: %s", members.ErrNoSecret, group)
	}
	return nil, fmt.Errorf("%w: %s", dnsd.ErrUnknownGroup, group)
}

// acceptingReports is a Reports that takes every report.
type acceptingReports struct{}

func (acceptingReports) Load(string, string, []byte) error         { return nil }
func (acceptingReports) Refused(string)                            {}
func (acceptingReports) Redirect(string, api.RedirectReport) error { return nil }

// syncBuf is a log buffer that handlers and the test share.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestSignedRefused: every refused write is counted by route and reason,
// and logged at Warn at most once per route and reason every
// RefusedLogEvery, the next line saying how many it did not log.
func TestSignedRefused(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	var clock sync.Mutex
	tick := func() time.Time { clock.Lock(); defer clock.Unlock(); return now }
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
	reg := prometheus.NewRegistry()
	refused, err := NewSignedRefused(reg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	h := NewHandler(Options{
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Gatherer: reg, Membership: refusingMembership{}, Reports: acceptingReports{},
		Verifier: api.NewVerifier(30*time.Second, 0), SignedRefused: refused, Now: tick,
		AdminToken: func() string { return "the-admin-token-0123456789" },
	})
	body := []byte(`{"name":"x"}`)
	send := func(t *testing.T, route api.Route, group string, sign func(*http.Request)) int {
		t.Helper()
		path := route.Path(group, "fra1")
		req := httptest.NewRequest(route.Method(), path, bytes.NewReader(body))
		req.RemoteAddr = "192.0.2.7:4000"
		if sign != nil {
			sign(req)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	signWith := func(secret string, at time.Duration, nonce string) func(*http.Request) {
		return func(r *http.Request) { api.SignRequestNonce(r, []byte(secret), body, tick().Add(at), nonce) }
	}
	var replay *http.Request
	tests := []struct {
		name   string
		route  api.Route
		group  string
		sign   func(*http.Request)
		code   int
		reason string
	}{
		{"unsigned add", api.AddMember, "www.example.org", nil, 401, RefusedUnsigned},
		{"forged remove", api.RemoveMember, "www.example.org", func(r *http.Request) {
			r.Header.Set("Authorization", "TM-HMAC-SHA256 ts=1800000000,nonce=AAAAAAAAAAAAAAAAAAAAAA,sig="+strings.Repeat("0", 64))
		}, 401, RefusedBadSignature},
		{"malformed push", api.PushLoad, "www.example.org", func(r *http.Request) { r.Header.Set("Authorization", "TM-HMAC-SHA256 nonsense") }, 401, RefusedMalformed},
		{"wrong group's secret", api.PushRedirects, "www.example.org", signWith("other-secret", 0, "AQEBAQEBAQEBAQEBAQEBAQ"), 401, RefusedBadSignature},
		{"stale drain", api.DrainMember, "www.example.org", signWith("www-secret", -time.Hour, "AgICAgICAgICAgICAgICAg"), 401, RefusedStale},
		{"future undrain", api.UndrainMember, "www.example.org", signWith("www-secret", time.Hour, "AwMDAwMDAwMDAwMDAwMDAw"), 401, RefusedFuture},
		{"accepted once", api.AddMember, "www.example.org", func(r *http.Request) {
			signWith("www-secret", 0, "BAQEBAQEBAQEBAQEBAQEBA")(r)
			replay = r.Clone(context.Background())
		}, 201, ""},
		{"replayed", api.AddMember, "www.example.org", func(r *http.Request) { r.Header = replay.Header }, 401, RefusedReplayed},
		{"wrong admin token", api.DrainMember, "www.example.org", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }, 401, RefusedBadToken},
		{"group without a secret", api.AddMember, "open.example.org", signWith("x", 0, "BQUFBQUFBQUFBQUFBQUFBQ"), 403, RefusedNoSecret},
		{"unknown group", api.PushLoad, "nope.example.org", signWith("x", 0, "BgYGBgYGBgYGBgYGBgYGBg"), 404, RefusedUnknownGroup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if code := send(t, tt.route, tt.group, tt.sign); code != tt.code {
				t.Fatalf("status %d, want %d", code, tt.code)
			}
			if tt.reason == "" {
				return
			}
			route := refusedRoutes[tt.route]
			if got := testutil.ToFloat64(refused.WithLabelValues(route, tt.reason)); got < 1 {
				t.Errorf("signed_refused_total{route=%q,reason=%q} = %v, want >= 1", route, tt.reason, got)
			}
			if want := fmt.Sprintf("route=%s reason=%s", route, tt.reason); !strings.Contains(logs.String(), want) {
				t.Errorf("no Warn line with %q in:\n%s", want, logs)
			}
		})
	}

	t.Run("rate-limited", func(t *testing.T) {
		before := strings.Count(logs.String(), "route=add_member reason=unsigned")
		for range 100 {
			send(t, api.AddMember, "www.example.org", nil)
		}
		if got := strings.Count(logs.String(), "route=add_member reason=unsigned"); got != before {
			t.Errorf("%d more lines within %s, want none", got-before, RefusedLogEvery)
		}
		if got := testutil.ToFloat64(refused.WithLabelValues("add_member", RefusedUnsigned)); got != 101 {
			t.Errorf("counted %v, want 101", got)
		}
		advance(RefusedLogEvery)
		send(t, api.AddMember, "www.example.org", nil)
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		last := lines[len(lines)-1]
		if !strings.Contains(last, "route=add_member reason=unsigned") || !strings.Contains(last, "suppressed=100") || !strings.Contains(last, "level=WARN") {
			t.Errorf("line after %s: %s, want suppressed=100 at WARN", RefusedLogEvery, last)
		}
		if n := strings.Count(logs.String(), "admin write refused"); n != len(tests)-1+1 {
			t.Errorf("%d log lines for %d refusals of %d kinds, want %d", n, 101+len(tests)-1, len(tests)-1, len(tests))
		}
	})
	t.Run("every label present", func(t *testing.T) {
		if n := testutil.CollectAndCount(refused); n != len(refusedRoutes)*len(RefusedReasons) {
			t.Errorf("%d series, want %d", n, len(refusedRoutes)*len(RefusedReasons))
		}
	})
}
