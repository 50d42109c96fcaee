package serve

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestValidHostPort(t *testing.T) {
	tests := []struct {
		name, host, port string
		ok               bool
	}{
		{"no port", "www.example.org", "", true},
		{"port", "www.example.org:8080", "8080", true},
		{"port 1", "h:1", "1", true},
		{"port 65535", "h:65535", "65535", true},
		{"leading zeros canonical", "h:0080", "80", true},
		{"IPv6 without port", "[2001:db8::1]", "", true},
		{"IPv6 with port", "[2001:db8::1]:8443", "8443", true},
		{"port with a domain after it", "h:80.evil.example", "", false},
		{"port with parameters", "h:1;x=y", "", false},
		{"negative port", "h:-1", "", false},
		{"port 0", "h:0", "", false},
		{"port 65536", "h:65536", "", false},
		{"long port", "h:000080", "", false},
		{"empty port", "h:", "", false},
		{"plus sign", "h:+80", "", false},
		{"IPv6 without brackets", "2001:db8::1", "", false},
		{"two ports", "h:80:81", "", false},
		{"space", "h: 80", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			port, ok := ValidHostPort(tt.host)
			if port != tt.port || ok != tt.ok {
				t.Errorf("ValidHostPort(%q) = %q, %v; want %q, %v", tt.host, port, ok, tt.port, tt.ok)
			}
		})
	}
}

// rawRequest sends the request line and Host header exactly as given
// and returns the response with its body read.
func rawRequest(t *testing.T, addr, method, target, host string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, method+" "+target+" HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %q: %v", method, target, err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// TestRequestCheck sends raw requests to a Server in front of a stand-in
// for a dispatcher, which redirects every request that reaches it to the
// path it sees: what the request check refuses never reaches the handler
// (the redirect decision), and what it lets through is redirected with
// the normalized path.
func TestRequestCheck(t *testing.T) {
	rd := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://m1.example.org"+r.URL.RequestURI())
		WriteStatus(w, r, http.StatusFound)
	})
	addr := strings.TrimPrefix(startServer(t, ServerOptions{Handler: rd}), "http://")
	tests := []struct {
		name, method, target, host string
		status                     int
		location                   string // path and query of the Location, for 302
		allow                      string
	}{
		{"origin-form", "GET", "/a/b.iso?x=1", "www.example.org", 302, "/a/b.iso?x=1", ""},
		{"absolute-form", "GET", "http://www.example.org/debian/./Release", "www.example.org", 302, "/debian/Release", ""},
		{"absolute-form wins over Host", "GET", "http://www.example.org/x", "other.example", 302, "/x", ""},
		{"absolute-form without a path", "GET", "http://www.example.org", "www.example.org", 302, "/", ""},
		{"flat apt repository", "GET", "/debian/./Packages", "www.example.org", 302, "/debian/Packages", ""},
		{"merged slashes and a dotdot", "GET", "//a/b/../c.iso", "www.example.org", 302, "/a/c.iso", ""},
		{"asterisk-form GET", "GET", "*", "www.example.org", 400, "", ""},
		{"asterisk-form HEAD", "HEAD", "*", "www.example.org", 400, "", ""},
		{"asterisk-form OPTIONS", "OPTIONS", "*", "www.example.org", 200, "", "GET, HEAD"},
		{"authority-form GET", "GET", "www.example.org:80", "www.example.org", 400, "", ""},
		{"authority-form CONNECT", "CONNECT", "www.example.org:443", "www.example.org", 405, "", "GET, HEAD"},
		{"relative target", "GET", "a/b", "www.example.org", 400, "", ""},
		{"other scheme", "GET", "ftp://www.example.org/a", "www.example.org", 400, "", ""},
		{"dotdot leaving the root", "GET", "/a/../../etc/passwd", "www.example.org", 400, "", ""},
		{"encoded dotdot", "GET", "/%2e%2e/x", "www.example.org", 400, "", ""},
		{"Host port with a domain", "GET", "/a", "www.example.org:80.evil.example", 400, "", ""},
		{"Host port with parameters", "GET", "/a", "www.example.org:1;x=y", 400, "", ""},
		{"Host port negative", "GET", "/a", "www.example.org:-1", 400, "", ""},
		{"Host port too large", "GET", "/a", "www.example.org:99999", 400, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, _ := rawRequest(t, addr, tt.method, tt.target, tt.host)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d (Location %q)", resp.StatusCode, tt.status, resp.Header.Get("Location"))
			}
			if got := resp.Header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
			loc := resp.Header.Get("Location")
			if tt.status != 302 {
				if loc != "" {
					t.Errorf("Location %q on a %d", loc, resp.StatusCode)
				}
				return
			}
			_, rest, ok := strings.Cut(strings.TrimPrefix(loc, "http://"), "/")
			if !ok || "/"+rest != tt.location || !strings.HasPrefix(loc, "http://") || strings.ContainsAny(strings.SplitN(loc[len("http://"):], "/", 2)[0], "*;") {
				t.Errorf("Location %q, want path %q", loc, tt.location)
			}
		})
	}
}
