package frontend

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/h1"
	"github.com/transmirror/transmirror/mirror/webtest"
)

// conformanceBackend serves what TestFastPathConformance asks of both
// paths: a file with ranges and validators, empty and large bodies, a
// chunked body, hop-by-hop fields, the request it got, and a body cut
// short.
func conformanceBackend(t *testing.T) *httptest.Server {
	t.Helper()
	file := bytes.Repeat([]byte("0123456789abcdef"), 256) // 4 KiB
	big := bytes.Repeat([]byte("x"), 1<<20)
	mod := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mux := http.NewServeMux()
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "file.bin", mod, bytes.NewReader(file))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "big.bin", mod, bytes.NewReader(big))
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "0")
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		for i := range 3 {
			fmt.Fprintf(w, "part %d\n", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Private")
		w.Header().Set("X-Private", "secret")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Kept", "1")
		w.Header().Add("X-Twice", "a")
		w.Header().Add("X-Twice", "b")
		io.WriteString(w, "hop")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		var lines []string
		for k, vv := range r.Header {
			lines = append(lines, k+": "+strings.Join(vv, ","))
		}
		slices.Sort(lines)
		fmt.Fprintf(w, "%s %s %s host=%s\n%s\n", r.Method, r.RequestURI, r.Proto, r.Host, strings.Join(lines, "\n"))
	})
	mux.HandleFunc("/cut", func(w http.ResponseWriter, r *http.Request) {
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		// With a Content-Type: nothing is sniffed, which ReverseProxy
		// does or not as its first flush (a timer of its own, even with
		// FlushInterval -1) races the first body write.
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nonly this")
		brw.Flush()
	})
	mux.HandleFunc("/missing", http.NotFound)
	be := httptest.NewServer(mux)
	t.Cleanup(be.Close)
	return be
}

// The front ends of the conformance tests: the reference (ReverseProxy
// on net/http's server) and the fast path on net/http's server and on
// h1's (which writes the back end's fields without a map).
const (
	reference = "ReverseProxy"
	fastStd   = "fast path"
	fastH1    = "fast path on h1"
)

// bothPaths serves a front end over be on each path, by name.
func bothPaths(t *testing.T, be *httptest.Server) map[string]string {
	t.Helper()
	bases := map[string]string{}
	for _, name := range []string{reference, fastStd, fastH1} {
		h, closer, err := New(Config{Policy: PolicyConfig{Name: "wrr"}, Health: quietHealth},
			weighted(Backend{Name: "b1", URL: be.URL}), Options{Registerer: prometheus.NewRegistry(), Rand: rand.New(rand.NewPCG(1, 2)), NoFastPath: name == reference})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closer.Close() })
		if name == fastH1 {
			bases[name] = serveH1(t, h)
		} else {
			bases[name] = webtest.Serve(t, h)
		}
	}
	return bases
}

// serveH1 serves h with an h1.Server until the test ends.
func serveH1(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &h1.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	return "http://" + ln.Addr().String()
}

// exchangeOf is what a client saw of one exchange, to compare between
// the paths.
func exchangeOf(t *testing.T, client *http.Client, req *http.Request) string {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", resp.Proto, resp.Status)
	var keys []string
	for k := range resp.Header {
		if k != "Date" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(resp.Header[k], ","))
	}
	fmt.Fprintf(&b, "length %d close %v\n%d bytes, body error %v\n", resp.ContentLength, resp.Close, len(body), err != nil)
	if len(body) < 2048 {
		b.Write(body)
	}
	return b.String()
}

// TestFastPathConformance: the same requests through the fast path and
// through httputil.ReverseProxy give the same responses and the same
// errors, and the back end sees the same requests.
func TestFastPathConformance(t *testing.T) {
	bases := bothPaths(t, conformanceBackend(t))
	tests := []struct {
		name, method, path string
		header             map[string]string
	}{
		{"GET", "GET", "/file", nil},
		{"HEAD", "HEAD", "/file", nil},
		{"range", "GET", "/file", map[string]string{"Range": "bytes=10-19"}},
		{"two ranges", "GET", "/file", map[string]string{"Range": "bytes=0-1,5-6"}},
		{"range past the end", "GET", "/file", map[string]string{"Range": "bytes=9000-"}},
		{"If-None-Match", "GET", "/file", map[string]string{"If-None-Match": `"v1"`}},
		{"If-Modified-Since", "GET", "/file", map[string]string{"If-Modified-Since": "Fri, 02 Jan 2026 03:04:05 GMT"}},
		{"If-Range stale", "GET", "/file", map[string]string{"Range": "bytes=0-3", "If-Range": `"v0"`}},
		{"large", "GET", "/big", nil},
		{"empty", "GET", "/empty", nil},
		{"chunked from the back end", "GET", "/chunked", nil},
		{"hop-by-hop fields dropped", "GET", "/hop", nil},
		{"the request the back end sees", "GET", "/echo?q=1&r=%2F", map[string]string{
			"Connection": "X-Client-Private", "X-Client-Private": "1", "Keep-Alive": "300", "Te": "trailers, deflate",
			"X-Forwarded-For": "203.0.113.9", "Forwarded": "for=203.0.113.9", "X-Forwarded-Host": "forged", "User-Agent": "conformance/1",
			"Accept": "*/*", "Cookie": "a=1"}},
		{"HEAD of the echo", "HEAD", "/echo", nil},
		{"client closes", "GET", "/file", map[string]string{"Connection": "close"}},
		{"body cut short", "GET", "/cut", nil},
		{"not found", "GET", "/missing", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for name, base := range bases {
				// A client per request and path: the Forwarded port is
				// then the only difference.
				client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
				req, err := http.NewRequest(tt.method, base+tt.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tt.header {
					req.Header.Set(k, v)
				}
				got[name] = varying.ReplaceAllString(exchangeOf(t, client, req), "X")
				client.CloseIdleConnections()
			}
			for _, name := range []string{fastStd, fastH1} {
				if got[name] != got[reference] {
					t.Errorf("%s:\n%s\n%s:\n%s", name, got[name], reference, got[reference])
				}
			}
		})
	}
}

// TestFastPathMalformedBackend: a back end that answers what is not
// HTTP/1.1 gets the client a 502 on both paths, counted as its error.
func TestFastPathMalformedBackend(t *testing.T) {
	for _, answer := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"SSH-2.0-OpenSSH\r\n",
		"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n",
	} {
		t.Run(strings.Fields(answer)[0]+" "+fmt.Sprint(len(answer)), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() {
						defer c.Close()
						br := bufio.NewReader(c)
						for l, err := br.ReadString('\n'); err == nil && l != "\r\n"; l, err = br.ReadString('\n') {
						}
						io.WriteString(c, answer)
					}()
				}
			}()
			base, _, reg := startSite(t, Config{Health: quietHealth}, Backend{Name: "bad", URL: "http://" + ln.Addr().String()})
			resp, err := http.Get(base + "/f")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("status %d, want 502", resp.StatusCode)
			}
			if n := webtest.SampleSum(t, reg, "transmirror_mirror_backend_errors_total", map[string]string{"backend": "bad"}); n < 1 {
				t.Errorf("backend_errors_total{bad} = %g, want >= 1", n)
			}
		})
	}
}

// varying is what differs between two exchanges whatever the path: the
// ports (of the two front ends, of the two clients) and the boundary of a
// multipart body.
var varying = regexp.MustCompile(`127\.0\.0\.1:[0-9]+|[0-9a-f]{60}`)

// rawExchange writes raw to base's server on one connection and reads
// every response to it (pipelined requests get one each), as the client
// sees them.
func rawExchange(t *testing.T, base, raw string, responses int) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var b strings.Builder
	for range responses {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			fmt.Fprintf(&b, "read: %v\n", err)
			break
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&b, "%s %s close %v, %d bytes, type %s\n", resp.Proto, resp.Status, resp.Close, len(body), resp.Header.Get("Content-Type"))
	}
	return b.String()
}

// TestFastPathConformanceOnTheWire: requests that no Go client sends
// (malformed heads, no Host, pipelined requests, HTTP/1.0, a GET with a
// body) get the same answers on both paths.
func TestFastPathConformanceOnTheWire(t *testing.T) {
	bases := bothPaths(t, conformanceBackend(t))
	tests := []struct {
		name, raw string
		responses int
	}{
		{"pipelined", "GET /file HTTP/1.1\r\nHost: a\r\n\r\nGET /file?2 HTTP/1.1\r\nHost: a\r\n\r\nGET /empty HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 3},
		{"HTTP/1.0", "GET /file HTTP/1.0\r\n\r\n", 1},
		{"HTTP/1.0 keep-alive", "GET /file HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /file HTTP/1.0\r\n\r\n", 2},
		{"no Host", "GET /file HTTP/1.1\r\n\r\n", 1},
		{"two Hosts", "GET /file HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 1},
		{"a field without a colon", "GET /file HTTP/1.1\r\nHost: a\r\nBroken\r\n\r\n", 1},
		{"a space before the colon", "GET /file HTTP/1.1\r\nHost: a\r\nX-A : 1\r\n\r\n", 1},
		{"a bad request line", "GET /file\r\nHost: a\r\n\r\n", 1},
		{"absolute form", "GET http://a/file HTTP/1.1\r\nHost: a\r\n\r\n", 1},
		{"a chunked GET body", "GET /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			slow := rawExchange(t, bases[reference], tt.raw, tt.responses)
			fast := rawExchange(t, bases[fastStd], tt.raw, tt.responses)
			for name, got := range map[string]string{fastStd: fast, fastH1: rawExchange(t, bases[fastH1], tt.raw, tt.responses)} {
				if got != slow {
					t.Errorf("%s:\n%s\n%s:\n%s", name, got, reference, slow)
				}
			}
			if strings.Count(fast, "HTTP/1.") != tt.responses {
				t.Errorf("%d responses, want %d:\n%s", strings.Count(fast, "HTTP/1."), tt.responses, fast)
			}
		})
	}
}
