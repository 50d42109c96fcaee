package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
)

// gate wraps h: a request with the header X-Gate is announced on started
// and held until release is closed, then served by h.
type gate struct {
	h       http.Handler
	started chan struct{}
	release chan struct{}
}

func newGate(h http.Handler) *gate {
	return &gate{h: h, started: make(chan struct{}, 16), release: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Gate") != "" {
		g.started <- struct{}{}
		<-g.release
	}
	g.h.ServeHTTP(w, r)
}

func TestServerGracefulShutdown(t *testing.T) {
	tests := []struct {
		name    string
		grace   time.Duration
		wantErr error // from Serve; nil: the held request completes
	}{
		{"in-flight request completes", 30 * time.Second, nil},
		{"grace runs out", 50 * time.Millisecond, context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTree(t)
			g := newGate(tr.fileServer(t, FileServerOptions{}))
			srv, err := NewServer(ServerOptions{Handler: g, ShutdownTimeout: tt.grace, Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, ln) }()

			type result struct {
				status int
				body   string
				err    error
			}
			got := make(chan result, 1)
			go func() {
				req, _ := http.NewRequest("GET", "http://"+addr+"/data.bin", nil)
				req.Header.Set("X-Gate", "1")
				resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
				if err != nil {
					got <- result{err: err}
					return
				}
				defer resp.Body.Close()
				b, err := io.ReadAll(resp.Body)
				got <- result{resp.StatusCode, string(b), err}
			}()
			select {
			case <-g.started:
			case <-time.After(10 * time.Second):
				t.Fatal("request did not reach the handler")
			}

			cancel()
			probetest.Until(t, 10*time.Second, func() string {
				c, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					return ""
				}
				c.Close()
				return "new connections to be refused: one was accepted"
			})

			if tt.wantErr == nil {
				select {
				case err := <-served:
					t.Fatalf("Serve returned while a request was in flight: %v", err)
				default:
				}
				close(g.release)
				r := <-got
				if r.err != nil || r.status != 200 || r.body != dataBin {
					t.Fatalf("held request: %d %q %v", r.status, r.body, r.err)
				}
				if err := <-served; err != nil {
					t.Fatalf("Serve: %v", err)
				}
				return
			}
			err = <-served
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Serve: %v, want %v", err, tt.wantErr)
			}
			close(g.release)
			if r := <-got; r.err == nil && r.body == dataBin {
				t.Errorf("held request completed after the grace ran out")
			}
		})
	}
}

func TestServerServeErrors(t *testing.T) {
	t.Run("no handler", func(t *testing.T) {
		if _, err := NewServer(ServerOptions{}); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("closed listener", func(t *testing.T) {
		srv, err := NewServer(ServerOptions{Handler: http.NotFoundHandler()})
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if err := srv.Serve(context.Background(), ln); err == nil || !strings.HasPrefix(err.Error(), "mirror: serve ") {
			t.Fatalf("Serve on a closed listener: %v", err)
		}
	})
	t.Run("metrics registered twice", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		if _, err := NewServer(ServerOptions{Handler: http.NotFoundHandler(), Registerer: reg}); err != nil {
			t.Fatal(err)
		}
		if _, err := NewServer(ServerOptions{Handler: http.NotFoundHandler(), Registerer: reg}); err == nil {
			t.Fatal("no error")
		}
	})
}

func TestServerReadHeaderTimeout(t *testing.T) {
	tr := newTree(t)
	base := startServer(t, ServerOptions{
		Handler:           tr.fileServer(t, FileServerOptions{}),
		ReadHeaderTimeout: 200 * time.Millisecond,
	})
	addr := strings.TrimPrefix(base, "http://")
	tests := []struct {
		name string
		drip bool // keep sending one header byte at a time
	}{
		{"headers dripped", true},
		{"headers stalled", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// start is taken before the dial: the server may accept and
			// start its header timer before Dial returns here.
			start := time.Now()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, "GET /public.txt HTTP/1.1\r\nHost: test\r\n"); err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			if tt.drip {
				wg.Go(func() {
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := c.Write([]byte("X")); err != nil {
								return
							}
						}
					}
				})
			}
			// The server closes the connection (with a bare 400 when it
			// was reading a header line, else without a word); wait for
			// that with a deadline well above the timeout.
			if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			_, err = io.Copy(&got, c)
			close(stop)
			wg.Wait()
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection still open after %v", time.Since(start))
			}
			if got.Len() > 0 && !strings.HasPrefix(got.String(), "HTTP/1.1 400 ") {
				t.Errorf("got response %q, want none or a 400", got.String())
			}
			if el := time.Since(start); el < 200*time.Millisecond {
				t.Errorf("closed after %v, before the timeout", el)
			}
			status, _, _ := strings.Cut(got.String(), "\n")
			t.Logf("closed after %v (%v), response %q", time.Since(start).Round(time.Millisecond), err, status)
		})
	}
	t.Run("headers in time", func(t *testing.T) {
		resp, body := rawGet(t, addr, "/public.txt")
		if resp.StatusCode != 200 || body != "public content\n" {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
}

func TestServerMetrics(t *testing.T) {
	tr := newTree(t)
	reg := prometheus.NewPedanticRegistry()
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{}), Registerer: reg})
	reqs := []struct {
		method, path string
		status       int
	}{
		{"GET", "/public.txt", 200},
		{"GET", "/data.bin", 200},
		{"HEAD", "/data.bin", 200},
		{"GET", "/nope", 404},
		{"GET", "/dir", 301},
		{"POST", "/public.txt", 405},
		{"DELETE", "/public.txt", 405},
	}
	var bodyBytes int
	for _, r := range reqs {
		resp, body := webtest.Do(t, webtest.NewRequest(t, r.method, base+r.path, nil))
		if resp.StatusCode != r.status {
			t.Fatalf("%s %s: status %d, want %d", r.method, r.path, resp.StatusCode, r.status)
		}
		bodyBytes += len(body)
	}
	// The handler's deferred bookkeeping may run after the client has the
	// response: poll until every request is counted.
	probetest.Until(t, 10*time.Second, func() string {
		if n := webtest.SampleSum(t, reg, "transmirror_mirror_request_duration_seconds", nil); n != float64(len(reqs)) {
			return fmt.Sprintf("all requests counted: %g of %d", n, len(reqs))
		}
		return ""
	})

	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"GET 2xx", "transmirror_mirror_requests_total", map[string]string{"code_class": "2xx", "method": "GET"}, 2},
		{"HEAD 2xx", "transmirror_mirror_requests_total", map[string]string{"code_class": "2xx", "method": "HEAD"}, 1},
		{"GET 3xx", "transmirror_mirror_requests_total", map[string]string{"code_class": "3xx", "method": "GET"}, 1},
		{"GET 4xx", "transmirror_mirror_requests_total", map[string]string{"code_class": "4xx", "method": "GET"}, 1},
		{"other 4xx", "transmirror_mirror_requests_total", map[string]string{"code_class": "4xx", "method": "other"}, 2},
		{"no 5xx", "transmirror_mirror_requests_total", map[string]string{"code_class": "5xx"}, 0},
		{"bytes", "transmirror_mirror_response_bytes_total", nil, float64(bodyBytes)},
		{"in flight", "transmirror_mirror_in_flight_requests", nil, 0},
		{"observations", "transmirror_mirror_request_duration_seconds", nil, float64(len(reqs))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := webtest.SampleSum(t, reg, tt.metric, tt.labels); got != tt.want {
				t.Errorf("%s%v = %v, want %v", tt.metric, tt.labels, got, tt.want)
			}
		})
	}
	t.Run("promlint", func(t *testing.T) {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		if len(mfs) != 6 {
			t.Errorf("gathered %d metric families, want 6", len(mfs))
		}
		problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	})
}

func TestMetricLabels(t *testing.T) {
	tests := []struct {
		name   string
		method string
		code   int
		want   string
	}{
		{"GET", "GET", 200, "GET 2xx"},
		{"HEAD", "HEAD", 304, "HEAD 3xx"},
		{"POST is other", "POST", 405, "other 4xx"},
		{"lower-case get is other", "get", 400, "other 4xx"},
		{"invented method", "BREW", 418, "other 4xx"},
		{"5xx", "GET", 503, "GET 5xx"},
		{"1xx", "GET", 101, "GET 1xx"},
		{"out of range", "GET", 999, "GET 5xx"},
		{"below range", "GET", 99, "GET 5xx"},
		{"zero", "GET", 0, "GET 5xx"},
		{"negative", "GET", -200, "GET 5xx"},
		{"last 4xx", "GET", 499, "GET 4xx"},
		{"first 5xx", "GET", 500, "GET 5xx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := methodLabel(tt.method) + " " + codeClass(tt.code); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestServerIdleTimeout: a keep-alive connection that sends nothing after
// its response is closed by the server once it has been idle IdleTimeout.
func TestServerIdleTimeout(t *testing.T) {
	tr := newTree(t)
	const idle = 200 * time.Millisecond
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{}), IdleTimeout: idle})
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /public.txt HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("%s, close %v: want a kept-alive 200", resp.Status, resp.Close)
	}
	idleFrom := time.Now()
	n, err := br.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("idle connection still open after %v", time.Since(idleFrom))
	case n > 0:
		t.Fatal("server sent bytes on an idle connection")
	}
	if el := time.Since(idleFrom); el < idle/2 {
		t.Errorf("closed after %v idle, want about %v", el, idle)
	}
}

// TestServerLimits: headers over MaxHeaderBytes get 431, a body over
// MaxBodyBytes can not be read by the handler.
func TestServerLimits(t *testing.T) {
	read := make(chan error, 1)
	base := startServer(t, ServerOptions{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, err := io.Copy(io.Discard, r.Body)
			read <- err
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				http.Error(w, "too large", http.StatusRequestEntityTooLarge)
			}
		}),
		MaxHeaderBytes: 4 << 10,
		MaxBodyBytes:   1 << 10,
	})
	tests := []struct {
		name    string
		header  int // bytes of one extra header
		body    int
		code    int
		readErr bool
	}{
		{"small", 100, 100, http.StatusOK, false},
		{"headers too large", 64 << 10, 0, http.StatusRequestHeaderFieldsTooLarge, false},
		{"body at the limit", 0, 1 << 10, http.StatusOK, false},
		{"body too large", 0, 1<<10 + 1, http.StatusRequestEntityTooLarge, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(strings.Repeat("b", tt.body)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Pad", strings.Repeat("h", tt.header))
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.code {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.code)
			}
			if tt.code == http.StatusRequestHeaderFieldsTooLarge {
				return // the handler never ran
			}
			if err := <-read; (err != nil) != tt.readErr {
				t.Errorf("handler's read: %v, want an error: %v", err, tt.readErr)
			}
		})
	}
}
