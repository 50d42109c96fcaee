package mirror

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe/api"
)

// TestStatusPageUnreadableView renders the page of a mirror whose view
// can not be read: a warning with the reason and since when, and the
// same in the JSON.
func TestStatusPageUnreadableView(t *testing.T) {
	snap, err := group.NewGroupSnapshot(statusTestView(), "fra1", viewT0, 15*time.Second, group.RedirectBooking{})
	if err != nil {
		t.Fatal(err)
	}
	now := viewT0.Add(time.Minute)
	since := viewT0.Add(5 * time.Second)
	st := Status{
		Time: now, Group: "www.example.org.", Member: "fra1", Role: RoleRoot,
		View: viewStatus(snap, group.ViewHealth{Reason: group.ViewErrTooLarge, Since: since, Failures: 11}, now),
	}
	if st.View.State != ViewStale || st.View.Unreadable == nil || st.View.Unreadable.ForSeconds != 55 {
		t.Fatalf("view status %+v", st.View)
	}
	h, err := NewStatusHandler(staticStatus(st), func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Body.String()
	}
	page := get(StatusPagePath)
	for _, want := range []string{`class="warning"`, "can not be read", "too_large", "2025-03-01 12:00:05 UTC", "11 refreshes"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	js := get("/v1/status")
	for _, want := range []string{`"unreadable":{"reason":"too_large"`, `"state":"stale"`} {
		if !strings.Contains(js, want) {
			t.Errorf("JSON lacks %s: %s", want, js)
		}
	}
	t.Run("readable: no warning", func(t *testing.T) {
		st.View = viewStatus(snap, group.ViewHealth{OK: true}, viewT0)
		h, _ := NewStatusHandler(staticStatus(st), func() time.Time { return viewT0 })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, StatusPagePath, nil))
		if strings.Contains(rec.Body.String(), `class="warning"`) {
			t.Error("a warning for a readable view")
		}
	})
}

// viewT0 is when statusTestView's view was fetched.
var viewT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// statusTestView is a group of two up members, fra1 (this mirror) and ams1.
func statusTestView() api.GroupView {
	m := func(name string) api.MemberView {
		return api.MemberView{
			MemberInfo: api.MemberInfo{Name: name, Host: name + ".mirrors.example.org", Capacity: 100},
			State:      "up", Load: 50, Reported: viewT0.Add(-time.Second),
		}
	}
	return api.GroupView{
		Name: "www.example.org.", Policy: "geo-load", Watermarks: api.Watermarks{Low: 0.7, High: 0.9},
		Members: []api.MemberView{m("fra1"), m("ams1")},
	}
}
