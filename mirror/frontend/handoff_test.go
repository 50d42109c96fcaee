//go:build unix

package frontend

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/scheduler/site"
)

// shortTempDir returns a fresh directory with a short path: a Unix
// socket's path is limited to about 100 bytes, and t.TempDir's carry the
// test's name.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tmh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestSiteHandoff(t *testing.T) {
	dir := shortTempDir(t)
	root := filepath.Join(dir, "root")
	big := make([]byte, 1<<20)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"big.bin": big, "small.txt": []byte("small\n"), "healthy": []byte("ok\n")}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := http.FileServer(http.Dir(root))

	// The back end: one handler on its TCP port (health checks, proxy
	// fallback) and on its handoff socket; it records who it talked to.
	var served atomic.Int64
	var lastRemote atomic.Value
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthy" {
			served.Add(1)
			lastRemote.Store(r.RemoteAddr)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "read-only", http.StatusMethodNotAllowed)
			return
		}
		fs.ServeHTTP(w, r)
	})
	sock := filepath.Join(dir, "b1.sock")
	hl, err := ListenHandoff(sock)
	if err != nil {
		t.Fatal(err)
	}
	webtest.ServeOn(t, hl, backend)
	tcpURL := webtest.Serve(t, backend)

	hc := quietHealth
	hc.Path = "/healthy"
	base, _, reg := startSite(t, Config{Mode: ModeHandoff, Policy: PolicyConfig{Name: "lard"}, Health: hc},
		Backend{Name: "b1", URL: tcpURL, HandoffSocket: sock})

	// The client remembers its connection's local address: the back end
	// must see it as the peer.
	var local atomic.Value
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				local.Store(c.LocalAddr().String())
			}
			return c, err
		},
	}}
	t.Cleanup(client.CloseIdleConnections)
	handoffs := func(result string) float64 {
		return webtest.SampleSum(t, reg, "transmirror_mirror_handoffs_total", map[string]string{"result": result})
	}
	get := func(t *testing.T, method, target string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, base+target, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, body
	}

	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"1 MiB goes from the back end straight to the client", func(t *testing.T) {
			resp, body := get(t, http.MethodGet, "/big.bin")
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, big) {
				t.Fatalf("status %d, %d bytes, want 200 and the 1 MiB file", resp.StatusCode, len(body))
			}
			if got := webtest.SampleSum(t, reg, "transmirror_mirror_proxied_bytes_total", nil); got != 0 {
				t.Errorf("proxied_bytes_total %g, want 0", got)
			}
			probetest.Until(t, 5*time.Second, func() string {
				if n := handoffs(handoffOK); n != 1 {
					return fmt.Sprintf("handoffs_total{ok} 1: %g", n)
				}
				return ""
			})
			if got, want := lastRemote.Load(), local.Load(); got != want {
				t.Errorf("back end's peer %v, want the client %v", got, want)
			}
		}},
		{"a keep-alive connection stays with the back end", func(t *testing.T) {
			before := served.Load()
			resp, body := get(t, http.MethodGet, "/small.txt")
			if resp.StatusCode != http.StatusOK || string(body) != "small\n" {
				t.Fatalf("status %d body %q", resp.StatusCode, body)
			}
			if got := handoffs(handoffOK); got != 1 {
				t.Errorf("handoffs_total{ok} %g, want still 1", got)
			}
			if served.Load() != before+1 {
				t.Errorf("the back end did not serve the second request")
			}
		}},
		{"pipelined requests go along with the connection", func(t *testing.T) {
			c := webtest.RawConn(t, strings.TrimPrefix(base, "http://"))
			req := "GET /small.txt HTTP/1.1\r\nHost: www.example.org\r\n\r\n" +
				"HEAD /big.bin HTTP/1.1\r\nHost: www.example.org\r\nConnection: close\r\n\r\n"
			if _, err := io.WriteString(c, req); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			for i, want := range []string{"small\n", ""} {
				resp, err := http.ReadResponse(br, &http.Request{Method: []string{http.MethodGet, http.MethodHead}[i]})
				if err != nil {
					t.Fatalf("response %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(body) != want {
					t.Errorf("response %d: status %d body %q, want 200 %q", i, resp.StatusCode, body, want)
				}
			}
			// Counted once the back end's acknowledgement is in, which
			// may be after the client has its answers.
			probetest.Until(t, 5*time.Second, func() string {
				if n := handoffs(handoffOK); n != 2 {
					return fmt.Sprintf("handoffs_total{ok} 2: %g", n)
				}
				return ""
			})
		}},
		{"a head longer than the back end's first read goes whole", func(t *testing.T) {
			c := webtest.RawConn(t, strings.TrimPrefix(base, "http://"))
			long := strings.Repeat("x", 10<<10)
			if _, err := io.WriteString(c, "GET /small.txt HTTP/1.1\r\nHost: www.example.org\r\nX-Long: "+long+"\r\nConnection: close\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "small\n" {
				t.Errorf("status %d body %q, want 200 %q", resp.StatusCode, body, "small\n")
			}
			probetest.Until(t, 5*time.Second, func() string {
				if n := handoffs(handoffOK); n != 3 {
					return fmt.Sprintf("handoffs_total{ok} 3: %g", n)
				}
				return ""
			})
		}},
		{"a POST is proxied instead", func(t *testing.T) {
			client.CloseIdleConnections() // a new connection, to the front end
			resp, _ := get(t, http.MethodPost, "/small.txt")
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("status %d, want the back end's 405", resp.StatusCode)
			}
			if got := handoffs(handoffFallback); got != 1 {
				t.Errorf("handoffs_total{fallback} %g, want 1", got)
			}
		}},
	}
	for _, s := range steps {
		t.Run(s.name, s.run)
	}
}

func TestSiteHandoffSocketDown(t *testing.T) {
	be := webtest.NewBackend(t, "b1", nil)
	sock := filepath.Join(shortTempDir(t), "none.sock")
	base, _, reg := startSite(t, Config{Mode: ModeHandoff, Health: quietHealth},
		Backend{Name: "b1", URL: be.URL, HandoffSocket: sock})
	resp, body := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+"/f", nil))
	if resp.StatusCode != http.StatusOK || body != "b1 /f" {
		t.Errorf("status %d body %q, want the back end's answer by proxy", resp.StatusCode, body)
	}
	for _, tt := range []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"fallback counted", "transmirror_mirror_handoffs_total", map[string]string{"result": handoffFallback}, 1},
		{"handoff error counted", "transmirror_mirror_backend_errors_total", map[string]string{"backend": "b1", "kind": errHandoff}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := webtest.SampleSum(t, reg, tt.metric, tt.labels); got != tt.want {
				t.Errorf("%s%v = %g, want %g", tt.metric, tt.labels, got, tt.want)
			}
		})
	}
}

func TestListenHandoff(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, path string)
		wantErr bool
	}{
		{"fresh path", func(*testing.T, string) {}, false},
		{"stale socket is replaced", func(t *testing.T, path string) {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
		}, false},
		{"socket in use is refused", func(t *testing.T, path string) {
			ln, err := ListenHandoff(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(shortTempDir(t), "h.sock")
			tt.prepare(t, path)
			ln, err := ListenHandoff(path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if err := ln.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
			if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("socket file left behind: %v", err)
			}
		})
	}
}

// TestRequestHead checks the head that a handoff sends again.
func TestRequestHead(t *testing.T) {
	raw := "GET /a%20b/c?x=1&y=%2F HTTP/1.1\r\nHost: www.example.org\r\nUser-Agent: curl/8\r\nAccept: */*\r\nX-Multi: 1\r\nX-Multi: 2\r\n\r\n"
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	writeRequestHead(&buf, r)
	again, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(buf.Bytes())))
	if err != nil {
		t.Fatalf("re-read %q: %v", buf.String(), err)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"request URI exactly as sent", again.RequestURI, "/a%20b/c?x=1&y=%2F"},
		{"method", again.Method, "GET"},
		{"proto", again.Proto, "HTTP/1.1"},
		{"host", again.Host, "www.example.org"},
		{"user agent not invented", again.UserAgent(), "curl/8"},
		{"repeated field", strings.Join(again.Header.Values("X-Multi"), ","), "1,2"},
		{"nothing after the head", bytes.HasSuffix(buf.Bytes(), []byte("\r\n\r\n")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// TestHandoffReports: in handoff mode the policy sees what it sees in
// proxy mode. A handed-off request counts in flight on its back end until
// the back end has answered it, a further request on the same
// connection (which the front end never sees) counts too, and Done gets
// each response's size (tb-ccrd's cache model fills with them).
func TestHandoffReports(t *testing.T) {
	dir := shortTempDir(t)
	release := make(chan struct{})
	started := make(chan string, 4)
	backend := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthy" {
			return
		}
		started <- r.URL.Path
		if strings.HasPrefix(r.URL.Path, "/slow") {
			<-release
		}
		size := 1000
		if r.URL.Path == "/b.bin" {
			size = 5000
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = w.Write(make([]byte, size))
	})
	sock := filepath.Join(dir, "b1.sock")
	hl, err := ListenHandoff(sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: ReportHandoffs(backend), ConnContext: HandoffConnContext, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(hl) }()
	t.Cleanup(func() { _ = srv.Close() })
	tcpURL := webtest.Serve(t, backend)

	hc := quietHealth
	hc.Path = "/healthy"
	base, h, _ := startSite(t, Config{Mode: ModeHandoff, Policy: PolicyConfig{Name: "tb-ccrd"}, Health: hc},
		Backend{Name: "b1", URL: tcpURL, HandoffSocket: sock, Memory: 1 << 20})
	b := h.backends[0]
	model := func() int64 {
		st := h.policy.(site.Stater).State()
		if len(st.Caches) == 0 {
			return 0
		}
		return st.Caches[0].Bytes
	}
	client := &http.Client{}
	t.Cleanup(client.CloseIdleConnections)
	get := func(path string) error {
		resp, err := client.Get(base + path)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	done := make(chan error, 1)

	// The picked request stays in flight while the back end serves it.
	go func() { done <- get("/slow/a.bin") }()
	if p := <-started; p != "/slow/a.bin" {
		t.Fatalf("back end started %s", p)
	}
	if n := b.active.Load(); n != 1 {
		t.Fatalf("in flight while the back end serves: %d, want 1", n)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	probetest.Until(t, 5*time.Second, func() string {
		if act, bytes := b.active.Load(), model(); act != 0 || bytes != 1000 {
			return fmt.Sprintf("the end reported: %d active, model %d bytes, want 0 and 1000", act, bytes)
		}
		return ""
	})

	// A second request on the kept-alive connection: the back end serves
	// it without the front end, and still reports it.
	if err := get("/b.bin"); err != nil {
		t.Fatal(err)
	}
	if p := <-started; p != "/b.bin" {
		t.Fatalf("back end started %s", p)
	}
	probetest.Until(t, 5*time.Second, func() string {
		if act, bytes := b.active.Load(), model(); act != 0 || bytes != 6000 {
			return fmt.Sprintf("the second request reported: %d active, model %d bytes, want 0 and 6000", act, bytes)
		}
		return ""
	})

	if n := h.m.handoffs.WithLabelValues(handoffOK); testutil.ToFloat64(n) != 1 {
		t.Errorf("%v handoffs, want 1 (the second request went over the same connection)", testutil.ToFloat64(n))
	}

	// The client leaves: nothing stays in flight, and the front end
	// follows no handoff any more.
	client.CloseIdleConnections()
	probetest.Until(t, 5*time.Second, func() string {
		h.hmu.Lock()
		defer h.hmu.Unlock()
		if n := len(h.followed); n != 0 {
			return fmt.Sprintf("the handoff no longer followed: %d followed", n)
		}
		return ""
	})

	if n := b.active.Load(); n != 0 {
		t.Errorf("in flight after the client left: %d", n)
	}
}
