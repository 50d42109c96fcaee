package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestNewLogger(t *testing.T) {
	cases := []struct {
		name, format, level, err string
	}{
		{"text info", "text", "info", ""},
		{"json debug", "json", "debug", ""},
		{"bad level", "text", "loud", "-log-level"},
		{"bad format", "xml", "info", "-log-format"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewLogger(io.Discard, tc.format, tc.level)
			if (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("NewLogger(%q, %q) = %v, want error containing %q", tc.format, tc.level, err, tc.err)
			}
		})
	}
}

// TestReloaderMetrics: a failed reload exports 0 and counts a failure; a
// good one exports 1 again.
func TestReloaderMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	fail := true
	r, err := NewReloader("test", "test.yaml", func() ([]any, error) {
		if fail {
			return nil, errors.New("test.yaml:3:1: bad")
		}
		return []any{"things", 1}, nil
	}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(context.Background()); err == nil || !strings.Contains(err.Error(), "test.yaml:3:1") {
		t.Fatalf("Reload = %v, want the load's error", err)
	}
	if v := testutil.ToFloat64(r.ok); v != 0 {
		t.Errorf("last_reload_successful = %v after a failure, want 0", v)
	}
	fail = false
	if err := r.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := testutil.ToFloat64(r.ok); v != 1 {
		t.Errorf("last_reload_successful = %v after a success, want 1", v)
	}
	if f, s := testutil.ToFloat64(r.reloads.WithLabelValues("failure")), testutil.ToFloat64(r.reloads.WithLabelValues("success")); f != 1 || s != 1 {
		t.Errorf("reloads: %v failures, %v successes; want 1 and 1", f, s)
	}
}

// TestRunSIGHUPAndDrain: SIGHUP calls reload; cancelling the context stops
// every component, and the HTTP server finishes the request in flight.
func TestRunSIGHUPAndDrain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inHandler := make(chan struct{})
	release := make(chan struct{})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-release
		io.WriteString(w, "done")
	})}
	reloads := make(chan struct{}, 1)
	ready := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, func(context.Context) error { reloads <- struct{}{}; return nil }, func() { close(ready) },
			ServeHTTP("test", ln, hs, 5*time.Second))
	}()
	<-ready
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reloads:
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not reload")
	}
	body := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			body <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body <- string(b)
	}()
	<-inHandler
	cancel()
	close(release)
	if got := <-body; got != "done" {
		t.Errorf("request in flight at shutdown got %q, want it drained", got)
	}
	if err := <-errc; err != nil {
		t.Errorf("Run = %v", err)
	}
}
