package group

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/api"
)

// groupNamedView is a view of www.example.test whose members a and b
// carry the group name as their host (issue 21: a redirect to them comes
// back to the group, up to the client's redirect limit), and c, when
// withSibling, a host of its own.
func groupNamedView(withSibling bool) api.GroupView {
	m := func(name, host string) api.MemberView {
		return api.MemberView{MemberInfo: api.MemberInfo{Name: name, Host: host, Capacity: 100}, State: "up", Load: 10}
	}
	v := api.GroupView{
		Name: "www.example.test.", Policy: "geo-load", Watermarks: api.Watermarks{Low: 0.7, High: 0.9},
		Members: []api.MemberView{m("a", "www.example.test"), m("b", "WWW.Example.Test.")},
	}
	if withSibling {
		v.Members = append(v.Members, m("c", "c.mirrors.example.test"))
	}
	return v
}

// TestGroupSnapshotDropsGroupName checks that a member whose host is the
// group name, in any case, with or without a trailing dot or a port, is
// no redirect candidate, and that the snapshot says which it dropped.
func TestGroupSnapshotDropsGroupName(t *testing.T) {
	tests := []struct {
		name string
		host string
	}{
		{"same spelling", "www.example.test"},
		{"case and trailing dot", "WWW.Example.Test."},
		{"with a port", "www.example.test:8080"},
		{"upper case with a port", "WWW.EXAMPLE.TEST:80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := groupNamedView(true)
			v.Members[0].Host = tt.host
			v.Members = v.Members[:1]
			s := snapshot(t, v, "")
			if n := s.Candidates(); n != 0 {
				t.Errorf("%d candidates, want 0", n)
			}
			if got := s.Dropped()[DropGroupName]; !slices.Equal(got, []string{"a"}) {
				t.Errorf("dropped %v, want [a]", got)
			}
		})
	}
	t.Run("a host that only ends in the group name stays", func(t *testing.T) {
		v := groupNamedView(false)
		v.Members[0].Host = "xwww.example.test"
		if n := snapshot(t, v, "").Candidates(); n != 1 {
			t.Errorf("%d candidates, want 1 (b dropped)", n)
		}
	})
}

// TestDecideNeverRedirectsToGroupName decides requests on a view whose
// members are named like the group: a dispatcher with only those left
// refuses (503), a mirror serves; with a proper sibling beside them every
// redirect goes to it.
func TestDecideNeverRedirectsToGroupName(t *testing.T) {
	rules := RedirectRules{
		Group: "www.example.test", Host: "m.mirrors.example.test", Enabled: true, Law: LawWatermark,
		LowWatermark: 0.7, HighWatermark: 0.9, MaxShare: 1,
	}
	dispatcher := rules
	dispatcher.Dispatcher, dispatcher.Host = true, "d.example.test"
	only := snapshot(t, groupNamedView(false), "")
	withC := snapshot(t, groupNamedView(true), "")
	overloaded := func() Share { return Share{P: 1} }
	req := RedirectRequest{Method: http.MethodGet, Host: "www.example.test", Path: "/f.iso"}
	tests := []struct {
		name  string
		rules RedirectRules
		snap  *GroupSnapshot
		want  Decision
	}{
		{"dispatcher, only group-named members: 503", dispatcher, only,
			Decision{Action: Refuse, Status: http.StatusServiceUnavailable, Reason: ReasonNoSibling}},
		{"mirror, only group-named members: served", rules, only,
			Decision{Action: Serve, Reason: ReasonNoSibling}},
		{"dispatcher with a sibling: to the sibling", dispatcher, withC,
			Decision{Action: Redirect, Target: "c.mirrors.example.test", Member: "c", Reason: ReasonDispatch}},
		{"mirror with a sibling: to the sibling", rules, withC,
			Decision{Action: Redirect, Target: "c.mirrors.example.test", Member: "c", Reason: ReasonOverload}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(1, 2))
			for i := range 50 {
				if got := Decide(tt.rules, req, overloaded, tt.snap, t0, rnd); got != tt.want {
					t.Fatalf("request %d: %+v, want %+v", i, got, tt.want)
				}
			}
		})
	}
}

// TestViewWatcherDroppedCandidates checks that the members dropped for
// their group-named host are counted in the gauge and logged once per
// change of the view, not at every refresh.
func TestViewWatcherDroppedCandidates(t *testing.T) {
	view := groupNamedView(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _ = jsonEncode(w, view) }))
	defer srv.Close()
	var logs webtest.SyncBuffer
	w, err := NewViewWatcher(ViewWatcherOptions{
		URLs: []string{srv.URL}, Group: "www.example.test", Interval: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := w.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := testutil.ToFloat64(w.dropped.WithLabelValues(DropGroupName)); n != 2 {
		t.Errorf("dropped gauge %g, want 2", n)
	}
	if n := strings.Count(logs.String(), "left out as redirect targets"); n != 1 {
		t.Errorf("logged %d times in 3 refreshes of one view, want once:\n%s", n, logs.String())
	}
	if s := w.Snapshot(); s.Candidates() != 1 {
		t.Errorf("%d candidates, want 1 (c)", s.Candidates())
	}
}
