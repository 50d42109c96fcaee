// Package webtest holds the HTTP test helpers that the tests of package
// mirror, of its parts (mirror/serve, mirror/frontend, mirror/group) and
// of the daemon's wiring (cmd/mirror) share: a server on 127.0.0.1:0, a
// client that follows no redirects, sums of gathered samples and a
// stand-in back end. They poll with probetest.Until. It is for tests
// only.
package webtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/probe/api"
)

// ContextServer is a server that serves a listener until its context ends
// (mirror/serve's Server, and anything shaped like it).
type ContextServer interface {
	Serve(ctx context.Context, ln net.Listener) error
}

// ServeUntilEnd serves srv on 127.0.0.1:0 until the test ends, fails the
// test if Serve returns an error, and returns the base URL.
func ServeUntilEnd(t testing.TB, srv ContextServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// ServeOn serves h on ln with an http.Server until the test ends.
func ServeOn(t testing.TB, ln net.Listener, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shut down %s: %v", ln.Addr(), err)
		}
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve %s: %v", ln.Addr(), err)
		}
	})
}

// Serve serves h on 127.0.0.1:0 until the test ends and returns the base
// URL.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ServeOn(t, ln, h)
	return "http://" + ln.Addr().String()
}

// Do sends req with a client that follows no redirects and returns the
// response with its body read.
func Do(t testing.TB, req *http.Request) (*http.Response, string) {
	t.Helper()
	c := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// NewRequest returns a request without a body with the given header
// fields.
func NewRequest(t testing.TB, method, url string, header map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}

// RawConn returns a TCP connection to addr with a 10 s deadline, closed
// when the test ends.
func RawConn(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c
}

// DeadURL returns the URL of a port on 127.0.0.1 that refuses
// connections.
func DeadURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

// SampleSum adds up the samples of the metric family name whose labels
// include labels: counter and gauge values, histogram sample counts.
func SampleSum(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, l := range m.GetLabel() {
					found = found || l.GetName() == k && l.GetValue() == v
				}
				if !found {
					continue metrics
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

// Backend is a back end for front-end tests: it answers api.HealthyPath
// (the front end's default health path) with 200 or 503 (Healthy), every
// other path with "NAME PATH", and counts what it served.
type Backend struct {
	// Name is what it answers with; URL its base URL.
	Name string
	URL  string
	// Healthy says whether health checks succeed (initially true).
	Healthy atomic.Bool
	// Checks counts the health checks answered.
	Checks atomic.Int64

	mu      sync.Mutex
	paths   map[string]int
	headers []http.Header
	// body, when set, writes the response instead.
	body func(w http.ResponseWriter, r *http.Request)
}

// NewBackend starts a Backend called name on 127.0.0.1:0 until the test
// ends; body, when not nil, writes its responses instead.
func NewBackend(t testing.TB, name string, body func(http.ResponseWriter, *http.Request)) *Backend {
	t.Helper()
	b := &Backend{Name: name, paths: make(map[string]int), body: body}
	b.Healthy.Store(true)
	b.URL = Serve(t, b)
	return b
}

// ServeHTTP answers health checks and counts every other request.
func (b *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == api.HealthyPath {
		b.Checks.Add(1)
		if !b.Healthy.Load() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
		return
	}
	b.mu.Lock()
	b.paths[r.URL.RequestURI()]++
	b.headers = append(b.headers, r.Header.Clone())
	b.mu.Unlock()
	if b.body != nil {
		b.body(w, r)
		return
	}
	fmt.Fprintf(w, "%s %s", b.Name, r.URL.RequestURI())
}

// Served returns how many requests for uri (all when "") b served.
func (b *Backend) Served(uri string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for p, c := range b.paths {
		if uri == "" || p == uri {
			n += c
		}
	}
	return n
}

// LastHeader returns the header of the last request served, nil before
// the first.
func (b *Backend) LastHeader() http.Header {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.headers) == 0 {
		return nil
	}
	return b.headers[len(b.headers)-1]
}

// CounterValue returns the value of the counter name{label=value} in reg.
func CounterValue(t testing.TB, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no %s{%s=%q}", name, label, value)
	return 0
}

// SyncBuffer is a bytes.Buffer safe for a logger and a test to share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
