package group

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/webtest"
)

func TestViewWatcher(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
		result  string
	}{
		{"good", func(w http.ResponseWriter, r *http.Request) {
			_ = jsonEncode(w, testView(nil))
		}, nil, viewOK},
		{"error status", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no such group", http.StatusNotFound)
		}, ErrBadView, viewHTTPError},
		{"not JSON", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "<html>")
		}, ErrBadView, viewInvalid},
		{"another group", func(w http.ResponseWriter, r *http.Request) {
			v := testView(nil)
			v.Name = "ftp.example.org."
			_ = jsonEncode(w, v)
		}, ErrBadView, viewInvalid},
		{"too large", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"name":"`+strings.Repeat("x", MaxViewSize)+`"}`)
		}, ErrBadView, viewInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
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
			err = w.Refresh(context.Background())
			if !errors.Is(err, tt.want) && !(tt.want == nil && err == nil) {
				t.Fatalf("Refresh: %v, want %v", err, tt.want)
			}
			if n := webtest.CounterValue(t, reg, "transmirror_mirror_view_refreshes_total", "result", tt.result); n != 1 {
				t.Errorf("result %s counted %g times", tt.result, n)
			}
			s := w.Snapshot()
			if (s != nil) != (tt.want == nil) {
				t.Fatalf("snapshot %v after %v", s, err)
			}
			if s != nil {
				if s.Stale(t0.Add(3 * time.Second)) {
					t.Error("stale at 3 intervals")
				}
				if !s.Stale(t0.Add(3*time.Second + 1)) {
					t.Error("not stale after 3 intervals")
				}
			}
		})
	}
	t.Run("a failed refresh keeps the last good view", func(t *testing.T) {
		fail := false
		var mu sync.Mutex
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				http.Error(w, "down", http.StatusServiceUnavailable)
				return
			}
			_ = jsonEncode(w, testView(nil))
		}))
		defer srv.Close()
		w, err := NewViewWatcher(ViewWatcherOptions{URLs: []string{srv.URL}, Group: "www.example.org"})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
		first := w.Snapshot()
		mu.Lock()
		fail = true
		mu.Unlock()
		if err := w.Refresh(context.Background()); err == nil {
			t.Fatal("no error from a 503")
		}
		if w.Snapshot() != first {
			t.Error("the last good view was dropped")
		}
	})
}
