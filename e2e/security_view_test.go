package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// viewSource stands in for dnsd's admin API as the mirrors' view source:
// GET /v1/groups/{group} answers the body set last; every other request
// (the load pushes) gets an empty JSON object.
type viewSource struct {
	mu   sync.Mutex
	body []byte
	gets int
	addr string
}

func startViewSource(t *testing.T) *viewSource {
	t.Helper()
	vs := &viewSource{}
	mux := http.NewServeMux()
	mux.HandleFunc(api.GetGroup.Pattern(), func(w http.ResponseWriter, _ *http.Request) {
		vs.mu.Lock()
		body := vs.body
		vs.gets++
		vs.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{}")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	vs.addr = ln.Addr().String()
	return vs
}

// set makes v the view served from now on.
func (vs *viewSource) set(t *testing.T, v api.GroupView) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	vs.mu.Lock()
	vs.body, vs.gets = b, 0
	vs.mu.Unlock()
}

// served returns how many views were fetched since the last set.
func (vs *viewSource) served() int {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	return vs.gets
}

// secViewMember is a member of the security scenario's view.
func secViewMember(name string) api.MemberView {
	return api.MemberView{
		MemberInfo: api.MemberInfo{Name: name, Host: name + ".mirrors.example.test", Capacity: 1000},
		State:      "up", Load: 1,
	}
}

// secGoodView is the group of a (the mirror under test) and b, which has
// room.
func secGoodView() api.GroupView {
	return api.GroupView{
		Name: "www.example.test.", Policy: "geo-load", Watermarks: api.Watermarks{Low: 0.7, High: 0.9},
		Members: []api.MemberView{secViewMember("a"), secViewMember("b")},
	}
}

// secHugeView is a good view padded with members until its JSON is
// larger than the mirrors' limit (group.MaxViewSize).
func secHugeView(t *testing.T) api.GroupView {
	v := secGoodView()
	for {
		for range 1000 {
			v.Members = append(v.Members, secViewMember(fmt.Sprintf("m%06d", len(v.Members))))
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > group.MaxViewSize {
			t.Logf("huge view: %d members, %d bytes", len(v.Members), len(b))
			return v
		}
	}
}

// TestSecurityUnreadableView (issue 21): a group view larger than the
// mirrors' limit makes the real mirror's view unreadable. Before, it
// went stale in silence. Now a mirror that was redirecting stops once
// the view is stale and serves the file itself (200), its /metrics count
// the reason (too_large) and say view_ok 0, and its status page warns;
// a dispatcher keeps redirecting on the stale view for ExpiredViews
// intervals, then answers 503 with Retry-After rather than send clients
// where an ever older view says.
func TestSecurityUnreadableView(t *testing.T) {
	vs := startViewSource(t)
	vs.set(t, secGoodView())
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	content := strings.Repeat("mirrored content\n", 256)
	writeFile(t, root, "file.bin", content)
	const viewInterval = 200 * time.Millisecond
	// a: capacity 1, so that a few requests take it over the view's watermarks
	// and it redirects every request (max_share 1) to b while its view
	// is good.
	am := runMirror(t, writeFile(t, dir, "a.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: a
host: a.mirrors.example.test
dnsd: {url: "http://%s", secret: "e2e-security-view", push_interval: 1s, view_interval: %s}
root: %s
capacity: 1
run_queue: none
redirect: {enabled: true, law: watermark, max_share: 1, min_size: 0, never: []}
`, vs.addr, viewInterval, root)), "a")
	dm := runMirror(t, writeFile(t, dir, "d.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: d
host: d.example.test
dispatcher: true
dnsd: {url: "http://%s", secret: "e2e-security-view", push_interval: 1s, view_interval: %s}
`, vs.addr, viewInterval)), "d")

	hc := &http.Client{
		Transport:     &http.Transport{Proxy: nil},
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(hc.CloseIdleConnections)
	type answer struct {
		code     int
		location string
		body     string
	}
	get := func(addr string) (answer, error) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/file.bin", nil)
		if err != nil {
			return answer{}, err
		}
		req.Host = "www.example.test"
		resp, err := hc.Do(req)
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header.Get("Location"), string(b)}, err
	}
	toB := func(a answer) bool {
		return a.code == http.StatusFound && strings.Contains(a.location, "b.mirrors.example.test")
	}

	// Both redirect to b on the good view.
	probetest.Until(t, 15*time.Second, func() string {
		a, err := get(am.HTTP)
		if err != nil {
			return err.Error()
		}
		if !toB(a) {
			return fmt.Sprintf("mirror a: %d %q, want 302 to b", a.code, a.location)
		}
		return ""
	})
	probetest.Until(t, 10*time.Second, func() string {
		d, err := get(dm.HTTP)
		if err != nil {
			return err.Error()
		}
		if !toB(d) {
			return fmt.Sprintf("dispatcher: %d %q, want 302 to b", d.code, d.location)
		}
		return ""
	})

	vs.set(t, secHugeView(t))
	hugeAt := time.Now()
	probetest.Until(t, 10*time.Second, func() string {
		if n := vs.served(); n < 2 {
			return fmt.Sprintf("the huge view fetched %d times, want 2 (each mirror once)", n)
		}
		return ""
	})

	t.Run("mirror serves once its view is stale", func(t *testing.T) {
		var last answer
		probetest.Until(t, 10*time.Second, func() string {
			// Keep a busy, so that only the view keeps it from redirecting.
			a, err := get(am.HTTP)
			if err != nil {
				return err.Error()
			}
			last = a
			if a.code != http.StatusOK || a.body != content {
				return fmt.Sprintf("mirror a: %d %q, want 200 with the file", a.code, a.location)
			}
			return ""
		})
		// The last good view came up to an interval before the huge one.
		if since, stale := time.Since(hugeAt), (group.StaleViews-1)*viewInterval; since < stale {
			t.Errorf("served after %v, before its view could be stale (%v)", since, stale)
		}
		for range 20 {
			a, err := get(am.HTTP)
			if err != nil {
				t.Fatal(err)
			}
			if a.code != http.StatusOK || a.body != content {
				t.Fatalf("mirror a on a stale view: %d %q, want 200 with the file (first: %d)", a.code, a.location, last.code)
			}
		}
		text := scrape(t, am.Admin)
		for _, c := range []struct {
			name   string
			labels []string
			min    float64
		}{
			{"transmirror_mirror_view_errors_total", []string{`reason="too_large"`}, 1},
			{"transmirror_mirror_redirects_skipped_total", []string{`reason="stale_view"`}, 1},
			{"transmirror_mirror_view_age_seconds", nil, (group.StaleViews * viewInterval).Seconds()},
		} {
			if v := metricSum(text, c.name, c.labels...); v < c.min {
				t.Errorf("%s%v = %g, want at least %g", c.name, c.labels, v, c.min)
			}
		}
		if !strings.Contains(text, "\ntransmirror_mirror_view_ok 0\n") {
			t.Errorf("metrics lack transmirror_mirror_view_ok 0")
		}
		page := adminGet(t, am.Admin, "/")
		for _, want := range []string{`class="warning"`, "The group view can not be read", "too_large", `pill stale`} {
			if !strings.Contains(page, want) {
				t.Errorf("status page lacks %q", want)
			}
		}
		if logs := am.Logs(); strings.Count(logs, "group view can not be read") != 1 {
			t.Errorf("mirror a warned %d times that its view can not be read, want once", strings.Count(logs, "group view can not be read"))
		}
	})

	t.Run("dispatcher answers 503 once its view has expired", func(t *testing.T) {
		expire := group.ExpiredViews * viewInterval
		var got answer
		probetest.Until(t, expire+10*time.Second, func() string {
			d, err := get(dm.HTTP)
			if err != nil {
				return err.Error()
			}
			got = d
			if d.code != http.StatusServiceUnavailable {
				if !toB(d) {
					return fmt.Sprintf("dispatcher on a stale view: %d %q, want 302 to b or 503", d.code, d.location)
				}
				return fmt.Sprintf("dispatcher still redirects %v after the huge view", time.Since(hugeAt).Round(time.Millisecond))
			}
			return ""
		})
		if since := time.Since(hugeAt); since < expire-viewInterval {
			t.Errorf("503 after %v, before the view could expire (%v)", since, expire-viewInterval)
		}
		if got.location != "" {
			t.Errorf("503 with Location %q", got.location)
		}
		text := scrape(t, dm.Admin)
		if v := metricSum(text, "transmirror_mirror_redirects_skipped_total", `reason="expired_view"`); v < 1 {
			t.Errorf("expired_view skips %g, want at least 1", v)
		}
		if v := metricSum(text, "transmirror_mirror_view_errors_total", `reason="too_large"`); v < 1 {
			t.Errorf("dispatcher: too_large errors %g, want at least 1", v)
		}
		page := adminGet(t, dm.Admin, "/")
		for _, want := range []string{"The group view can not be read", `pill expired`} {
			if !strings.Contains(page, want) {
				t.Errorf("dispatcher's status page lacks %q", want)
			}
		}
	})

	t.Run("both recover with a good view", func(t *testing.T) {
		vs.set(t, secGoodView())
		probetest.Until(t, 15*time.Second, func() string {
			d, err := get(dm.HTTP)
			if err != nil {
				return err.Error()
			}
			if !toB(d) {
				return fmt.Sprintf("dispatcher: %d %q, want 302 to b again", d.code, d.location)
			}
			if !strings.Contains(scrape(t, am.Admin), "\ntransmirror_mirror_view_ok 1\n") {
				return "mirror a: view_ok not 1 yet"
			}
			return ""
		})
		if !strings.Contains(am.Logs(), "group view readable again") {
			t.Error("mirror a did not log the recovery")
		}
	})
}

// TestSecurityGroupNamedMember (issue 21): a view whose only member has
// the group name as its host (in another case, with a trailing dot). The
// real dispatcher used to redirect to the group name until the client
// gave up; now it answers 503 and says on /metrics which member it left
// out, and with a proper member beside it it sends every client there.
func TestSecurityGroupNamedMember(t *testing.T) {
	vs := startViewSource(t)
	looped := secGoodView()
	looped.Members = []api.MemberView{secViewMember("a")}
	looped.Members[0].Host = "WWW.Example.Test."
	vs.set(t, looped)
	dir := t.TempDir()
	dm := runMirror(t, writeFile(t, dir, "d.yaml", fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: d
host: d.example.test
dispatcher: true
dnsd: {url: "http://%s", secret: "e2e-security-view", push_interval: 1s, view_interval: 200ms}
`, vs.addr)), "d")
	// A client that follows redirects, the dispatcher standing in for
	// every host name (as DNS would have it for the group name).
	hops := 0
	hc := &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, dm.HTTP)
		}},
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			hops = len(via)
			if len(via) >= 10 {
				return fmt.Errorf("%d redirects", len(via))
			}
			return nil
		},
	}
	t.Cleanup(hc.CloseIdleConnections)
	_, port, _ := net.SplitHostPort(dm.HTTP)
	groupURL := "http://www.example.test:" + port + "/file.bin"
	probetest.Until(t, 10*time.Second, func() string {
		if v := metricSum(scrape(t, dm.Admin), "transmirror_mirror_view_dropped_candidates", `reason="group_name"`); v != 1 {
			return fmt.Sprintf("view_dropped_candidates{group_name} = %g, want 1", v)
		}
		return ""
	})
	for i := range 5 {
		resp, err := hc.Get(groupURL)
		if err != nil {
			t.Fatalf("request %d: %v (after %d redirects)", i, err, hops)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || hops != 0 {
			t.Fatalf("request %d: %s after %d redirects, want 503 and none", i, resp.Status, hops)
		}
	}
	if logs := dm.Logs(); strings.Count(logs, "left out as redirect targets") != 1 {
		t.Errorf("the dropped member logged %d times, want once (per change of the view):\n%s",
			strings.Count(logs, "left out as redirect targets"), logs)
	}

	withB := secGoodView()
	withB.Members[0].Host = "www.example.test"
	vs.set(t, withB)
	noFollow := *hc
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	probetest.Until(t, 10*time.Second, func() string {
		resp, err := noFollow.Get(groupURL)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusFound || !strings.Contains(loc, "b.mirrors.example.test") {
			return fmt.Sprintf("%s to %q, want 302 to b", resp.Status, loc)
		}
		return ""
	})
	for i := range 50 {
		resp, err := noFollow.Get(groupURL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); !strings.Contains(loc, "b.mirrors.example.test") {
			t.Fatalf("request %d: %s to %q, want b (never the group name)", i, resp.Status, loc)
		}
	}
}
