package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGuard: an admin listener answers only requests that name it in
// their Host (against DNS rebinding) and refuses writes with a foreign
// Origin; over TLS any Host passes.
func TestGuard(t *testing.T) {
	tests := []struct {
		name, listen string
		tls          bool
		method, host string
		origin       string
		code         int
		body         string
	}{
		{"loopback literal", "127.0.0.1:8053", false, "GET", "127.0.0.1:8053", "", 200, "ok"},
		{"IPv6 literal", "[::1]:8053", false, "GET", "[::1]:8053", "", 200, "ok"},
		{"another address of a wildcard listener", "0.0.0.0:8053", false, "GET", "192.0.2.53:8053", "", 200, "ok"},
		{"localhost", "127.0.0.1:8053", false, "GET", "localhost:8053", "", 200, "ok"},
		{"a name under .localhost", "127.0.0.1:8053", false, "GET", "dnsd.localhost", "", 200, "ok"},
		{"the listen host", "ns3.example.org:8053", false, "GET", "NS3.example.org.:8053", "", 200, "ok"},
		{"rebinding name", "127.0.0.1:8053", false, "GET", "evil.example", "", 421, "Host evil.example is not this admin listener's"},
		{"rebinding name with the port", "0.0.0.0:8053", false, "GET", "evil.example:8053", "", 421, "DNS rebinding"},
		{"a name beside the configured ones", "ns3.example.org:8053", false, "GET", "ns2.example.org:8053", "", 421, "rebinding"},
		{"no Host", "127.0.0.1:8053", false, "GET", "", "", 421, "rebinding"},
		{"zoned address", "127.0.0.1:8053", false, "GET", "[fe80::1%25eth0]:8053", "", 421, "rebinding"},
		{"a name of admin_hosts", "0.0.0.0:8053", false, "GET", "ns1.example.org:8053", "", 200, "ok"},
		{"any Host over TLS", "0.0.0.0:8053", true, "GET", "ns1.example.org:8053", "", 200, "ok"},
		{"write with own Origin", "127.0.0.1:8053", false, "POST", "127.0.0.1:8053", "http://127.0.0.1:8053", 200, "ok"},
		{"write with foreign Origin", "127.0.0.1:8053", false, "POST", "127.0.0.1:8053", "http://evil.example", 403, "Origin http://evil.example is not"},
		{"write with Origin of another port", "127.0.0.1:8053", false, "POST", "127.0.0.1:8053", "http://127.0.0.1:9999", 403, "cross-site"},
		{"write with null Origin", "127.0.0.1:8053", false, "DELETE", "127.0.0.1:8053", "null", 403, "cross-site"},
		{"foreign Origin over TLS", "0.0.0.0:8053", true, "POST", "ns1.example.org:8053", "https://evil.example", 403, "cross-site"},
		{"own Origin over TLS, default port", "0.0.0.0:443", true, "POST", "ns1.example.org", "https://ns1.example.org", 200, "ok"},
		{"a read with a foreign Origin", "127.0.0.1:8053", false, "GET", "127.0.0.1:8053", "http://evil.example", 200, "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }), tt.listen, []string{"ns1.example.org"}, tt.tls)
			req := httptest.NewRequest(tt.method, "/v1/groups", nil)
			req.Host = tt.host
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			if w.Code != tt.code || !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("%d %s, want %d with %q", w.Code, w.Body.String(), tt.code, tt.body)
			}
		})
	}
}

// TestClientSendsRequestHeader: every request of the Client is
// non-simple, so that an admin listener can tell it from a browser's.
func TestClientSendsRequestHeader(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		_, _ = w.Write([]byte(`{"groups":[]}`))
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Groups(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got.Get(RequestHeader) != "1" {
		t.Errorf("%s = %q, want 1", RequestHeader, got.Get(RequestHeader))
	}
}
