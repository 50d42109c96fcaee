package contentmap

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// mirror is a real content index of a temp root behind a real Handler,
// with a recorder of the requests it got and the bytes it sent.
type mirror struct {
	root string
	scan *content.Scanner
	srv  *httptest.Server

	mu     sync.Mutex
	since  []string
	bytes  int
	status int // when not 0, every answer is this status
	body   string
}

func newMirror(t *testing.T) *mirror {
	t.Helper()
	m := &mirror{root: t.TempDir()}
	m.scan = content.NewScanner(m.root, content.ScanOptions{})
	h := content.NewHandler(m.scan, content.HandlerOptions{Limit: content.LimitOptions{Rate: 1000, Burst: 1000}})
	mux := http.NewServeMux()
	mux.HandleFunc(api.ContentIndex.Pattern(), func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.since = append(m.since, r.URL.Query().Get("since"))
		status, body := m.status, m.body
		m.mu.Unlock()
		if status != 0 {
			w.WriteHeader(status)
			w.Write([]byte(body))
			return
		}
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r)
		m.mu.Lock()
		m.bytes += cw.n
		m.mu.Unlock()
	})
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	return m
}

type countingWriter struct {
	http.ResponseWriter
	n int
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += n
	return n, err
}

// put writes a file of size bytes with mtime at under the root and rescans.
func (m *mirror) put(t *testing.T, rel string, size int, at time.Time) {
	t.Helper()
	p := filepath.Join(m.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, at, at); err != nil {
		t.Fatal(err)
	}
	if _, err := m.scan.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// take returns the since parameters and bytes of the requests since the
// last take.
func (m *mirror) take() ([]string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, b := m.since, m.bytes
	m.since, m.bytes = nil, 0
	return s, b
}

func (m *mirror) answer(status int, body string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.status, m.body = status, body
}

func (m *mirror) probeURL() string { return m.srv.URL + api.LoadReport.Path() }

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newMap(t *testing.T, clk *clock, reg prometheus.Registerer, members func() []Member) *Map {
	t.Helper()
	m, err := New(Options{Subsystem: "dnsd", Client: http.DefaultClient, Members: members, Registry: reg, Now: clk.Now,
		Rand: rand.New(rand.NewPCG(1, 2)), Interval: 30 * time.Second, Jitter: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestIndexURL(t *testing.T) {
	tests := []struct{ name, probe, want string }{
		{"the load route", "http://fra1.example.org:8081/v1/load", "http://fra1.example.org:8081/v1/content/index"},
		{"under a prefix", "https://[2001:db8::1]:8443/admin/v1/load?x=1", "https://[2001:db8::1]:8443/admin/v1/content/index"},
		{"another path", "http://fra1.example.org/status", "http://fra1.example.org/v1/content/index"},
		{"push-only", "", ""},
		{"no host", "/v1/load", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IndexURL(tt.probe); got != tt.want {
				t.Errorf("IndexURL(%q) = %q, want %q", tt.probe, got, tt.want)
			}
		})
	}
}

func TestMapIncremental(t *testing.T) {
	a, b := newMirror(t), newMirror(t)
	a.put(t, "pool/a.deb", 10, t0)
	b.put(t, "pool/a.deb", 10, t0)
	r := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		a.put(t, filepath.Join("pool", fmt.Sprintf("%016x.deb", r.Uint64())), 1, t0)
	}
	clk := &clock{now: t0}
	members := []Member{{Group: "www.example.org.", Name: "a", Probe: a.probeURL()},
		{Group: "www.example.org.", Name: "b", Probe: b.probeURL()},
		{Group: "www.example.org.", Name: "push", Probe: ""}}
	m := newMap(t, clk, nil, func() []Member { return members })

	m.Poll(context.Background())
	since, full := a.take()
	if len(since) != 1 || since[0] != "0" {
		t.Fatalf("first poll asked since %v, want [0]", since)
	}
	got := m.Lookup("www.example.org.", "pool/a.deb")
	if len(got.Copies) != 2 || !got.Indexed["a"] || !got.Indexed["b"] || got.Indexed["push"] {
		t.Fatalf("Lookup = %+v, want a and b holding, push unknown", got)
	}

	m.Poll(context.Background()) // nobody is due yet
	if since, _ := a.take(); len(since) != 0 {
		t.Fatalf("a poll before the interval asked %v", since)
	}

	a.put(t, "pool/b.deb", 20, t0.Add(time.Hour))
	v := a.scan.Current().Version()
	clk.add(32 * time.Second)
	m.Poll(context.Background())
	since, delta := a.take()
	if len(since) != 1 || since[0] == "0" {
		t.Fatalf("second poll asked since %v, want the copy's version", since)
	}
	if delta*10 > full {
		t.Errorf("the change set took %d bytes, the full index %d: not incremental", delta, full)
	}
	if got := m.Lookup("www.example.org.", "pool/b.deb"); len(got.Copies) != 1 || got.Copies["a"].Size != 20 {
		t.Fatalf("after the change Lookup = %+v, want a with 20 bytes", got)
	}
	if m.members[key{"www.example.org.", "a"}].replica.Version() != v {
		t.Errorf("the copy is not at the mirror's version %d", v)
	}

	clk.add(32 * time.Second) // nothing changed: 304, no body
	m.Poll(context.Background())
	if since, n := a.take(); len(since) != 1 || n != 0 {
		t.Errorf("an unchanged mirror sent %d bytes to %v, want a 304", n, since)
	}
}

func TestMapRefusedAndNotFound(t *testing.T) {
	a := newMirror(t)
	a.put(t, "pool/a.deb", 10, t0)
	clk := &clock{now: t0}
	reg := prometheus.NewRegistry()
	members := []Member{{Group: "www.example.org.", Name: "a", Probe: a.probeURL()}}
	m := newMap(t, clk, reg, func() []Member { return members })
	m.Poll(context.Background())
	a.take()

	tests := []struct {
		name   string
		status int
		body   string
		reason string
		held   bool
	}{
		{"a hostile index", 200, "transmirror-index 1 full 9 1\n0 1 1 ../etc/passwd\n", ReasonRefused, true},
		{"a truncated index", 200, "transmirror-index 1 full 9 2\n0 1 1 a\n", ReasonRefused, true},
		{"a server error", 500, "oops", ReasonStatus, true},
		{"rate limited", 429, "", ReasonRateLimited, true},
		{"no index kept", 404, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.answer(tt.status, tt.body)
			clk.add(time.Minute)
			before := 0.0
			if tt.reason != "" {
				before = testutil.ToFloat64(m.metrics.errors.WithLabelValues("www.example.org.", tt.reason))
			}
			m.Poll(context.Background())
			if tt.reason != "" {
				if d := testutil.ToFloat64(m.metrics.errors.WithLabelValues("www.example.org.", tt.reason)) - before; d != 1 {
					t.Errorf("errors{reason=%s} grew by %g, want 1", tt.reason, d)
				}
			}
			got := m.Lookup("www.example.org.", "pool/a.deb")
			if _, held := got.Copies["a"]; held != tt.held || got.Indexed["a"] != tt.held {
				t.Errorf("after %s Lookup = %+v, want held %t", tt.name, got, tt.held)
			}
		})
	}

	// After a 404 the member is left alone for the backoff.
	a.answer(0, "")
	a.take()
	for range 5 {
		clk.add(time.Minute)
		m.Poll(context.Background())
	}
	if since, _ := a.take(); len(since) != 0 {
		t.Errorf("a member that answered 404 was asked %v within the backoff", since)
	}
	clk.add(DefaultNotFoundBackoff)
	m.Poll(context.Background())
	if got := m.Lookup("www.example.org.", "pool/a.deb"); len(got.Copies) != 1 {
		t.Errorf("after the backoff Lookup = %+v, want the index again", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if problems, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}

func TestMapMembership(t *testing.T) {
	a, b := newMirror(t), newMirror(t)
	a.put(t, "x", 1, t0)
	b.put(t, "x", 1, t0)
	clk := &clock{now: t0}
	reg := prometheus.NewRegistry()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	t.Cleanup(broken.Close)
	members := []Member{{Group: "g.", Name: "a", Probe: a.probeURL()}, {Group: "old.", Name: "a", Probe: broken.URL + api.LoadReport.Path()}}
	m := newMap(t, clk, reg, func() []Member { return members })
	m.Poll(context.Background())
	if n := testutil.CollectAndCount(m.metrics.errors); n != 1 {
		t.Fatalf("%d error series, want old.'s", n)
	}
	members = []Member{{Group: "g.", Name: "b", Probe: b.probeURL()}}
	m.Poll(context.Background())
	got := m.Lookup("g.", "x")
	if len(got.Copies) != 1 || !got.Indexed["b"] || got.Indexed["a"] {
		t.Errorf("after a changed membership Lookup = %+v, want b only", got)
	}
	if n := testutil.CollectAndCount(m.metrics.errors); n != 0 {
		t.Errorf("%d error series after the group left, want none", n)
	}
}

// TestMapRun: Run fetches a member as soon as it appears, while another
// member's fetch hangs, and returns once ctx is done.
func TestMapRun(t *testing.T) {
	a := newMirror(t)
	a.put(t, "x", 1, t0)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	t.Cleanup(hang.Close)
	members := []Member{{Group: "g.", Name: "slow", Probe: hang.URL + api.LoadReport.Path()}, {Group: "g.", Name: "a", Probe: a.probeURL()}}
	m, err := New(Options{Subsystem: "mirror", Client: http.DefaultClient, Members: func() []Member { return members }, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	probetest.Until(t, 10*time.Second, func() string {
		if got := m.Lookup("g.", "x"); len(got.Copies) != 1 {
			return fmt.Sprintf("Lookup = %+v, want a holding x", got)
		}
		return ""
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// TestMapRefresh: Refresh fetches the group's members before it returns,
// so a file that appeared since the last poll is found, and asks a member
// at most once per MinRefresh however often it is called.
func TestMapRefresh(t *testing.T) {
	a, other := newMirror(t), newMirror(t)
	clk := &clock{now: t0}
	members := []Member{{Group: "www.example.org.", Name: "a", Probe: a.probeURL()},
		{Group: "other.example.org.", Name: "o", Probe: other.probeURL()}}
	m := newMap(t, clk, nil, func() []Member { return members })
	m.Poll(context.Background())
	a.take()
	other.take()

	a.put(t, "pool/new.deb", 7, t0)
	tests := []struct {
		name  string
		after time.Duration
		asked int
	}{
		{"the first refresh asks", 2 * time.Second, 1},
		{"again at once does not", 0, 0},
		{"again within MinRefresh does not", 500 * time.Millisecond, 0},
		{"after MinRefresh it asks again", time.Second, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk.add(tt.after)
			m.Refresh(context.Background(), "www.example.org.")
			if since, _ := a.take(); len(since) != tt.asked {
				t.Errorf("a was asked %d times, want %d", len(since), tt.asked)
			}
			if got := m.Lookup("www.example.org.", "pool/new.deb"); got.Copies["a"].Size != 7 {
				t.Errorf("Lookup = %+v, want a holding 7 bytes", got)
			}
		})
	}
	if since, _ := other.take(); len(since) != 0 {
		t.Errorf("a refresh of one group asked a member of another %d times", len(since))
	}
}

// TestMapLogsOnce: a member whose index is refused is logged once with
// why, however often it fails, and once when it is fetched again; a 429
// is not logged.
func TestMapLogsOnce(t *testing.T) {
	a := newMirror(t)
	a.put(t, "x", 1, t0)
	clk := &clock{now: t0}
	var buf bytes.Buffer
	m, err := New(Options{Subsystem: "dnsd", Client: http.DefaultClient, Now: clk.Now, Interval: time.Second, Jitter: 1,
		Logger:  slog.New(slog.NewTextHandler(&buf, nil)),
		Members: func() []Member { return []Member{{Group: "g.", Name: "a", Probe: a.probeURL()}} }})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		status int
		body   string
	}{{200, "transmirror-index 1 full 9 1\n0 1 1 ../etc/passwd\n"}, {500, "oops"}, {429, ""}, {0, ""}, {0, ""}}
	for _, st := range steps {
		a.answer(st.status, st.body)
		clk.add(2 * time.Second)
		m.Poll(context.Background())
	}
	log := buf.String()
	if n := strings.Count(log, "level=WARN"); n != 1 || !strings.Contains(log, "reason=refused") || !strings.Contains(log, "..") {
		t.Errorf("%d warnings, want one naming the refused index:\n%s", n, log)
	}
	if n := strings.Count(log, "level=INFO"); n != 1 || !strings.Contains(log, "fetched again") {
		t.Errorf("%d infos, want one of the recovery:\n%s", n, log)
	}
}

// TestMapsShareMetrics: two maps of one daemon (a front end's of its back
// ends and of its siblings) register in one registry and count apart by
// group.
func TestMapsShareMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	none := func() []Member { return nil }
	var maps []*Map
	for range 2 {
		m, err := New(Options{Subsystem: "mirror", Client: http.DefaultClient, Members: none, Registry: reg})
		if err != nil {
			t.Fatalf("a second map of one daemon: %v", err)
		}
		maps = append(maps, m)
	}
	maps[0].metrics.failed("site", ReasonConnect)
	maps[1].metrics.failed("www.example.org.", ReasonRefused)
	if n := testutil.CollectAndCount(reg, "transmirror_mirror_content_fetch_errors_total"); n != 2 {
		t.Errorf("%d series, want one of each map", n)
	}
}
