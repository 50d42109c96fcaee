package h1

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestRelayFields: a back end's fields relayed without the map go out
// after the handler's, in their order and case, the hop-by-hop ones and
// those Connection names left out, and frame the response as they would
// from the map.
func TestRelayFields(t *testing.T) {
	tests := []struct {
		name, method, head, body, want string
	}{
		{"fields in order and case", "GET",
			"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nX-B: 1\r\nETag: \"e\"\r\nx-a: 2\r\n\r\n", "ok",
			"HTTP/1.1 200 OK\r\nX-Handler: h\r\ncontent-length: 2\r\nX-B: 1\r\nETag: \"e\"\r\nx-a: 2\r\nDate: D\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nok"},
		{"hop-by-hop and Connection-named dropped", "GET",
			"HTTP/1.1 200 OK\r\nConnection: x-hop, close\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nUpgrade: h2\r\nTE: trailers\r\nTrailer: X\r\nProxy-Authenticate: Basic\r\nContent-Length: 2\r\nContent-Type: a/b\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n", "ok",
			"HTTP/1.1 200 OK\r\nX-Handler: h\r\nContent-Length: 2\r\nContent-Type: a/b\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\nok"},
		{"no Content-Length: the server's own", "GET",
			"HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nTransfer-Encoding: chunked\r\n\r\n", "ok",
			"HTTP/1.1 200 OK\r\nX-Handler: h\r\nContent-Type: a/b\r\nDate: D\r\nContent-Length: 2\r\n\r\nok"},
		{"HEAD keeps the length", "HEAD",
			"HTTP/1.1 200 OK\r\nContent-Length: 4096\r\nContent-Type: a/b\r\n\r\n", "",
			"HTTP/1.1 200 OK\r\nX-Handler: h\r\nContent-Length: 4096\r\nContent-Type: a/b\r\nDate: D\r\n\r\n"},
		{"304 without Content-Type", "GET",
			"HTTP/1.1 304 Not Modified\r\nContent-Type: a/b\r\nETag: \"e\"\r\n\r\n", "",
			"HTTP/1.1 304 Not Modified\r\nX-Handler: h\r\nETag: \"e\"\r\nDate: D\r\n\r\n"},
		{"204 without Content-Length", "GET",
			"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nX-A: 1\r\n\r\n", "",
			"HTTP/1.1 204 No Content\r\nX-Handler: h\r\nX-A: 1\r\nDate: D\r\n\r\n"},
		{"Content-Encoding: nothing sniffed", "GET",
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Encoding: gzip\r\n\r\n", "ok",
			"HTTP/1.1 200 OK\r\nX-Handler: h\r\nContent-Length: 2\r\nContent-Encoding: gzip\r\nDate: D\r\n\r\nok"},
		{"a Content-Length the body does not reach: closed after", "GET",
			"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: a/b\r\n\r\n", "ok",
			"HTTP/1.1 200 OK\r\nX-Handler: h\r\nContent-Length: 5\r\nContent-Type: a/b\r\nDate: D\r\n\r\nok"},
	}
	date := regexp.MustCompile(`Date: [A-Z][a-z][a-z], [^\r]* GMT`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp Response
			if err := readHead(bufio.NewReader(strings.NewReader(tt.head)), &resp); err != nil {
				t.Fatal(err)
			}
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Handler", "h")
				if !RelayFields(wrapped{w}, &resp) {
					t.Error("RelayFields: false for an h1 response behind a wrapper")
				}
				w.WriteHeader(resp.Status)
				io.WriteString(w, tt.body)
			})
			got := rawResponse(t, serveH1(t, &Server{Handler: h}), tt.method+" / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			got = strings.Replace(got, "Connection: close\r\n", "", 1)
			if got = date.ReplaceAllStringFunc(got, func(d string) string {
				if strings.Contains(tt.head, d) {
					return d // the back end's
				}
				return "Date: D"
			}); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
	if RelayFields(httptestRecorder{}, &Response{}) {
		t.Error("RelayFields: true for another ResponseWriter")
	}
}

// rawResponse sends request to addr and returns all it gets back.
func rawResponse(t *testing.T, addr, request string) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, request)
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
