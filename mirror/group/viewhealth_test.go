package group

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/transmirror/transmirror/mirror/webtest"
)

// TestViewWatcherUnreadable checks that each way of failing to read the
// group view is counted by its reason, reported by Health and view_ok,
// and logged once per spell (the first failure and the recovery), not at
// every refresh.
func TestViewWatcherUnreadable(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String()
	closed.Close()

	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: nothing listens
		reason  string
	}{
		{"larger than MaxViewSize", func(w http.ResponseWriter, _ *http.Request) {
			v := testView(nil)
			v.Members[0].Host = strings.Repeat("a", MaxViewSize) // valid JSON, one byte too many
			_ = jsonEncode(w, v)
		}, ViewErrTooLarge},
		{"not JSON", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "<html>") }, ViewErrMalformed},
		{"truncated JSON", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"name":"www.`) }, ViewErrMalformed},
		{"JSON of another shape", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"members":7}`) }, ViewErrMalformed},
		{"another group's", func(w http.ResponseWriter, _ *http.Request) {
			v := testView(nil)
			v.Name = "ftp.example.org."
			_ = jsonEncode(w, v)
		}, ViewErrInvalid},
		{"unknown policy", func(w http.ResponseWriter, _ *http.Request) {
			v := testView(nil)
			v.Policy = "best-effort"
			_ = jsonEncode(w, v)
		}, ViewErrInvalid},
		{"refused", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusForbidden) }, ViewErrRefused},
		{"unreachable", nil, ViewErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			broken := true
			url := deadURL
			if tt.handler != nil {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					mu.Lock()
					b := broken
					mu.Unlock()
					if b {
						tt.handler(w, r)
						return
					}
					_ = jsonEncode(w, testView(nil))
				}))
				defer srv.Close()
				url = srv.URL
			}
			var logs webtest.SyncBuffer
			now := t0
			w, err := NewViewWatcher(ViewWatcherOptions{
				URLs: []string{url}, Group: "www.example.org", Self: "fra1", Interval: time.Second,
				Clock: func() time.Time { return now }, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				Registerer: prometheus.NewRegistry(),
			})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				now = t0.Add(time.Duration(i) * time.Second)
				if err := w.Refresh(context.Background()); err == nil {
					t.Fatal("no error")
				}
			}
			h := w.Health()
			if h.OK || h.Reason != tt.reason || h.Failures != 3 || !h.Since.Equal(t0) {
				t.Errorf("health %+v, want reason %s, 3 failures since %v", h, tt.reason, t0)
			}
			if n := testutil.ToFloat64(w.errs.WithLabelValues(tt.reason)); n != 3 {
				t.Errorf("view_errors_total{reason=%q} = %g, want 3", tt.reason, n)
			}
			if n := strings.Count(logs.String(), "group view can not be read"); n != 1 {
				t.Errorf("warned %d times in 3 failed refreshes, want once:\n%s", n, logs.String())
			}
			if !strings.Contains(logs.String(), "reason="+tt.reason) {
				t.Errorf("the warning lacks reason=%s:\n%s", tt.reason, logs.String())
			}
			if tt.handler == nil {
				return // nothing to recover to
			}
			mu.Lock()
			broken = false
			mu.Unlock()
			for range 2 {
				if err := w.Refresh(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if h := w.Health(); !h.OK || h.Failures != 0 || !h.Since.IsZero() {
				t.Errorf("health after recovery %+v", h)
			}
			if n := strings.Count(logs.String(), "group view readable again"); n != 1 {
				t.Errorf("recovery logged %d times, want once:\n%s", n, logs.String())
			}
		})
	}
}

// TestViewGauges checks view_ok and view_age_seconds through the
// registry, as a scrape sees them.
func TestViewGauges(t *testing.T) {
	var mu sync.Mutex
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			_, _ = io.WriteString(w, "{")
			return
		}
		_ = jsonEncode(w, testView(nil))
	}))
	defer srv.Close()
	reg := prometheus.NewRegistry()
	now := t0
	w, err := NewViewWatcher(ViewWatcherOptions{
		URLs: []string{srv.URL}, Group: "www.example.org", Self: "fra1", Interval: time.Second,
		Clock: func() time.Time { return now }, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	gauge := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	steps := []struct {
		name      string
		fail      bool
		at        time.Duration
		ok, ageAt float64
	}{
		{"good view", false, 0, 1, 0},
		{"a failure 2 s later", true, 2 * time.Second, 0, 2},
		{"still failing at 30 s", true, 30 * time.Second, 0, 30},
		{"good again", false, 31 * time.Second, 1, 0},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			mu.Lock()
			fail = st.fail
			mu.Unlock()
			now = t0.Add(st.at)
			_ = w.Refresh(context.Background())
			if g := gauge("transmirror_mirror_view_ok"); g != st.ok {
				t.Errorf("view_ok %g, want %g", g, st.ok)
			}
			if g := gauge("transmirror_mirror_view_age_seconds"); g != st.ageAt {
				t.Errorf("view_age_seconds %g, want %g", g, st.ageAt)
			}
		})
	}
}

// TestDecideOnAnAgingView decides one overloaded request on views ever
// older: a mirror (under either law) serves from the moment the view is
// stale; a dispatcher redirects on a stale view up to ExpiredViews
// intervals and answers 503 past that.
func TestDecideOnAnAgingView(t *testing.T) {
	const interval = 5 * time.Second
	rules := RedirectRules{
		Group: "www.example.org", Host: "fra1.mirrors.example.org", Enabled: true, Law: LawWatermark,
		LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1,
	}
	fair := rules
	fair.Law = LawFairShare
	dispatcher := rules
	dispatcher.Dispatcher, dispatcher.Host = true, "dispatch.example.org"
	view := testView(map[string]float64{"fra1": 2, "ams1": 0.2, "nyc1": 0.1})
	member, err := NewGroupSnapshot(view, "fra1", t0, StaleViews*interval, RedirectBooking{})
	if err != nil {
		t.Fatal(err)
	}
	all, err := NewGroupSnapshot(view, "", t0, StaleViews*interval, RedirectBooking{})
	if err != nil {
		t.Fatal(err)
	}
	stale, expired := StaleViews*interval, ExpiredViews*interval
	redirect := func(reason string) Decision { return Decision{Action: Redirect, Reason: reason} }
	tests := []struct {
		name  string
		rules RedirectRules
		snap  *GroupSnapshot
		age   time.Duration
		want  Decision
	}{
		{"watermark law, fresh", rules, member, stale, redirect(ReasonOverload)},
		{"watermark law, stale", rules, member, stale + 1, Decision{Action: Serve, Reason: ReasonStaleView}},
		{"fair-share law, fresh", fair, member, stale, redirect(ReasonOverload)},
		{"fair-share law, stale", fair, member, stale + 1, Decision{Action: Serve, Reason: ReasonStaleView}},
		{"fair-share law, long expired", fair, member, 10 * expired, Decision{Action: Serve, Reason: ReasonStaleView}},
		{"dispatcher, stale", dispatcher, all, stale + 1, redirect(ReasonDispatch)},
		{"dispatcher, at the bound", dispatcher, all, expired, redirect(ReasonDispatch)},
		{"dispatcher, expired: 503", dispatcher, all, expired + 1,
			Decision{Action: Refuse, Status: http.StatusServiceUnavailable, Reason: ReasonExpiredView}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := RedirectRequest{Method: http.MethodGet, Host: "www.example.org", Path: "/f.iso"}
			share := func() Share { return Share{P: 1, Limit: 1} }
			got := Decide(tt.rules, req, share, tt.snap, t0.Add(tt.age), rand.New(rand.NewPCG(1, 2)))
			got.Target, got.Member = "", "" // who does not matter here, whether does
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestDispatcherExpiredView serves a dispatcher's request on an expired
// view: 503 with Retry-After, counted as skipped by expired_view.
func TestDispatcherExpiredView(t *testing.T) {
	snap, err := NewGroupSnapshot(testView(nil), "", t0, 15*time.Second, RedirectBooking{})
	if err != nil {
		t.Fatal(err)
	}
	now := t0.Add(snap.ExpireAfter + time.Second)
	rules := RedirectRules{Group: "www.example.org", Host: "dispatch.example.org", Dispatcher: true}
	rd, err := NewRedirector(RedirectorOptions{
		Rules: rules, View: fixedView{snap}, Clock: func() time.Time { return now }, Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "http://www.example.org/f.iso", nil)
	rd.ServeHTTP(rec, r)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || rec.Header().Get("Location") != "" {
		t.Errorf("%d, Retry-After %q, Location %q: want 503 with Retry-After and no Location",
			rec.Code, rec.Header().Get("Retry-After"), rec.Header().Get("Location"))
	}
	if n := testutil.ToFloat64(rd.skipped.WithLabelValues(ReasonExpiredView)); n != 1 {
		t.Errorf("skipped{expired_view} = %g, want 1", n)
	}
}

// fixedView is a ViewSource that always gives the same snapshot.
type fixedView struct{ s *GroupSnapshot }

func (v fixedView) Snapshot() *GroupSnapshot { return v.s }
