package content

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// fakeSource serves a fixed history.
type fakeSource struct {
	history []Changes
	cur     *Index
	calls   int
}

func (f *fakeSource) Current() *Index { return f.cur }

func (f *fakeSource) Since(v uint64) (Changes, *Index, bool) {
	f.calls++
	return since(f.history, f.cur, v)
}

func TestHandler(t *testing.T) {
	v5 := mustIndex(t, 5, e("a", 1, 1), e("b", 2, 2))
	v6 := mustIndex(t, 6, e("a", 1, 1), e("c", 3, 3))
	src := &fakeSource{history: []Changes{Diff(v5, v6)}, cur: v6}
	now := t0
	h := NewHandler(src, HandlerOptions{Limit: LimitOptions{Rate: 1, Burst: 100, Clock: func() time.Time { return now }}})
	tests := []struct {
		name, query, inm string
		status           int
		kind, body       string
	}{
		{"no since", "", "", 200, "full", string(encodeIndex(t, v6))},
		{"since 0", "?since=0", "", 200, "full", string(encodeIndex(t, v6))},
		{"since the previous", "?since=5", "", 200, "changes", string(encodeChanges(t, Diff(v5, v6)))},
		{"since the current", "?since=6", "", 200, "changes", "transmirror-index 1 changes 6 6 0\n"},
		{"since unknown", "?since=3", "", 200, "full", string(encodeIndex(t, v6))},
		{"not modified", "?since=6", `"6"`, 304, "changes", ""},
		{"not modified, full", "", `"6"`, 304, "full", ""},
		{"bad since", "?since=x", "", 400, "", "content: since: not a version: \"x\"\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/v1/content/index"+tc.query, nil)
			if tc.inm != "" {
				req.Header.Set("If-None-Match", tc.inm)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || rec.Header().Get(KindHeader) != tc.kind || rec.Body.String() != tc.body {
				t.Fatalf("%d %s=%q %q, want %d %q %q", rec.Code, KindHeader, rec.Header().Get(KindHeader), rec.Body, tc.status, tc.kind, tc.body)
			}
			if tc.status != 400 && (rec.Header().Get("ETag") != `"6"` || rec.Header().Get(VersionHeader) != "6") {
				t.Fatalf("ETag %q, version %q", rec.Header().Get("ETag"), rec.Header().Get(VersionHeader))
			}
		})
	}
	t.Run("encoded once per version", func(t *testing.T) {
		a, _, _ := h.body(0)
		b, _, _ := h.body(0)
		if a != b || &a.gzipped()[0] != &b.gzipped()[0] {
			t.Fatal("the full index was encoded twice")
		}
	})
}

func TestAcceptsGzip(t *testing.T) {
	tests := []struct {
		accept string
		want   bool
	}{
		{"", false},
		{"gzip", true},
		{"br, gzip;q=0.5", true},
		{"gzip; q=0", false},
		{"*", true},
		{"identity", false},
		{"deflate, gzipx", false},
	}
	for _, tc := range tests {
		t.Run(tc.accept, func(t *testing.T) {
			if got := acceptsGzip(tc.accept); got != tc.want {
				t.Fatalf("acceptsGzip(%q) = %v", tc.accept, got)
			}
		})
	}
}

// TestHandlerRateLimit: a change set costs a token, a full index
// FullCost, a 304 of an up-to-date copy none; buckets are per IPv4
// address and per IPv6 /64.
func TestHandlerRateLimit(t *testing.T) {
	src := &fakeSource{cur: mustIndex(t, 1, e("a", 1, 1))}
	now := t0
	h := NewHandler(src, HandlerOptions{Limit: LimitOptions{Rate: 1, Burst: FullCost + 1, Clock: func() time.Time { return now }}})
	steps := []struct {
		name, client, query, inm string
		after                    time.Duration
		status                   int
	}{
		{"a full index", "192.0.2.1:1000", "", "", 0, 200},
		{"a change set", "192.0.2.1:1001", "?since=1", "", 0, 200},
		{"burst spent", "192.0.2.1:1002", "?since=1", "", 0, 429},
		{"an up-to-date copy is confirmed for free", "192.0.2.1:1002", "?since=1", `"1"`, 0, 304},
		{"an old copy is not", "192.0.2.1:1002", "?since=1", `"0"`, 0, 429},
		{"another client", "192.0.2.2:1000", "", "", 0, 200},
		{"same /64", "[2001:db8::1]:1", "", "", 0, 200},
		{"same /64, a change set", "[2001:db8::2]:1", "?since=1", "", 0, 200},
		{"same /64 spent", "[2001:db8::3]:1", "?since=1", "", 0, 429},
		{"a token back", "192.0.2.1:1003", "?since=1", "", time.Second, 200},
		{"not enough for a full index", "192.0.2.1:1004", "", "", time.Second, 429},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			now = now.Add(st.after)
			req := httptest.NewRequest("GET", "/v1/content/index"+st.query, nil)
			req.RemoteAddr = st.client
			if st.inm != "" {
				req.Header.Set("If-None-Match", st.inm)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != st.status {
				t.Fatalf("status %d, want %d", rec.Code, st.status)
			}
			if st.status == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
		})
	}
}

func TestLimiterForgets(t *testing.T) {
	now := t0
	l := newLimiter(LimitOptions{Rate: 1, Burst: 1, MaxClients: 2, Clock: func() time.Time { return now }})
	for _, c := range []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1"} {
		if _, ok := l.allow(c, 1); !ok {
			t.Fatalf("%s refused", c)
		}
	}
	if len(l.buckets) > 2 {
		t.Fatalf("%d buckets, bound 2", len(l.buckets))
	}
}

func TestHandlerServesWhatDecodes(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a b/c%d", 3, t0)
	s := NewScanner(root, ScanOptions{})
	if _, err := s.Scan(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(s, HandlerOptions{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/content/index")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := NewReplica(Limits{})
	if err := r.Update(resp.Body); err != nil {
		t.Fatal(err)
	}
	if !resp.Uncompressed {
		t.Error("the client asked for gzip (as Go's does) and did not get it")
	}
	if !reflect.DeepEqual(entries(r.Index()), entries(s.Current())) || !strings.Contains(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("replica %v, scanner %v", entries(r.Index()), entries(s.Current()))
	}
}
