package probe

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestFetchTrace(t *testing.T) {
	body := map[string]string{
		"/ftpsync": "Tue Dec  1 12:00:01 UTC 2026\nUsed ftpsync version: 20180513\n",
		"/long":    strings.Repeat("1", MaxTraceLine+1),
		"/bad":     "not a time\n",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := body[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(b))
	}))
	defer srv.Close()
	for _, tc := range []struct{ name, path, err string }{
		{"ftpsync", "/ftpsync", ""},
		{"not found", "/nope", "status 404"},
		{"long first line", "/long", "longer than"},
		{"not a time", "/bad", "not the output of date -u"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FetchTrace(context.Background(), srv.Client(), srv.URL+tc.path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("FetchTrace = %v, %v; want error with %q", got, err, tc.err)
				}
				return
			}
			if want := time.Date(2026, 12, 1, 12, 0, 1, 0, time.UTC); err != nil || !got.Equal(want) {
				t.Fatalf("FetchTrace = %v, %v; want %v", got, err, want)
			}
		})
	}
}

// TestMasterWatcherRound: a master's generation is reported each round,
// the last good one kept (and the failure counted) while it fails, and
// zero once the group names no master any more.
func TestMasterWatcherRound(t *testing.T) {
	var mu sync.Mutex
	trace := "1796126401\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if trace == "" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(trace))
	}))
	defer srv.Close()
	targets := map[string]string{"www.example.org.": srv.URL + "/project/trace/master"}
	got := map[string]time.Time{}
	w, err := NewMasterWatcher(MasterWatcherOptions{
		Targets:      func() map[string]string { return targets },
		OnGeneration: func(g string, gen time.Time) { got[g] = gen },
		Client:       srv.Client(),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := time.Unix(1796126401, 0)
	for _, step := range []struct {
		name  string
		trace string
		drop  bool
		want  time.Time
		errs  float64
	}{
		{"answers", "1796126401\n", false, want, 0},
		{"fails: the last one kept", "", false, want, 1},
		{"newer", "1796130001\n", false, want.Add(time.Hour), 1},
		{"no master any more", "1796130001\n", true, time.Time{}, 0},
	} {
		t.Run(step.name, func(t *testing.T) {
			mu.Lock()
			trace = step.trace
			mu.Unlock()
			if step.drop {
				targets = map[string]string{}
			}
			w.Round(context.Background())
			if g := got["www.example.org."]; !g.Equal(step.want) {
				t.Errorf("generation %v, want %v", g, step.want)
			}
			if n := testutil.ToFloat64(w.errs.WithLabelValues("www.example.org.")); n != step.errs {
				t.Errorf("errors %v, want %v", n, step.errs)
			}
		})
	}
}
