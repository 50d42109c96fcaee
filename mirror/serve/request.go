package serve

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// RequestCheck is what CheckRequest says of one request.
type RequestCheck struct {
	// Status is the status to answer at once without going further (400,
	// or for "OPTIONS *" 200 and for CONNECT 405, both with Allow); 0
	// lets the request go on.
	Status int
	// Path is the request's escaped path normalized by NormalizePath,
	// for Status 0: what the handlers after the check see.
	Path string
}

// CheckRequest is the request hygiene of the public listeners, decided
// before any handler (the redirect decision included) sees the request:
//
//   - the request target must be origin-form ("/path") or absolute-form
//     ("http://host/path", which an origin server must accept, RFC 9112
//     3.2.2; Go's server has already taken the Host from it), else 400;
//     asterisk-form ("*") is only for OPTIONS, which gets 200 with
//     "Allow: GET, HEAD" (the server as a whole, RFC 9110 9.3.7), and
//     CONNECT (authority-form) gets 405: a mirror is no proxy;
//   - the Host header's port, when it has one, must be 1..65535 written in
//     digits (ValidHostPort), else 400: it is copied into redirects;
//   - the path must pass NormalizePath, else 400, and the request goes on
//     with the normalized path.
func CheckRequest(r *http.Request) RequestCheck {
	switch {
	case r.Method == http.MethodConnect:
		return RequestCheck{Status: http.StatusMethodNotAllowed}
	case r.RequestURI == "*" && r.Method == http.MethodOptions:
		return RequestCheck{Status: http.StatusOK}
	case !strings.HasPrefix(r.RequestURI, "/") && !absoluteForm(r.URL):
		return RequestCheck{Status: http.StatusBadRequest}
	}
	if _, ok := ValidHostPort(r.Host); !ok {
		return RequestCheck{Status: http.StatusBadRequest}
	}
	escaped := r.URL.EscapedPath()
	if escaped == "" && r.URL.IsAbs() {
		escaped = "/" // "http://host" is "http://host/"
	}
	norm, err := NormalizePath(escaped)
	if err != nil {
		return RequestCheck{Status: http.StatusBadRequest}
	}
	return RequestCheck{Path: norm}
}

// absoluteForm reports whether u, a parsed request target, is in
// absolute-form: an http or https URL with a host and a path that is
// empty or starts with "/".
func absoluteForm(u *url.URL) bool {
	scheme := strings.ToLower(u.Scheme)
	return (scheme == "http" || scheme == "https") && u.Host != "" && u.Opaque == "" && u.User == nil &&
		(u.Path == "" || strings.HasPrefix(u.Path, "/"))
}

// ValidHostPort checks the port of a Host header: it returns the port in
// canonical form ("" when the header has none) and true when there is no
// port or it is 1..65535 in decimal digits; "host:", "host:80.evil.example",
// "host:1;x=y", "host:-1", "host:65536" and a port in an IPv6 address
// without brackets are not.
func ValidHostPort(host string) (port string, ok bool) {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.HasSuffix(host, "]") && strings.HasPrefix(host, "[") {
		return "", true
	}
	_, p, err := net.SplitHostPort(host)
	if err != nil || p == "" || len(p) > 5 {
		return "", false
	}
	for j := 0; j < len(p); j++ {
		if p[j] < '0' || p[j] > '9' {
			return "", false
		}
	}
	n, _ := strconv.Atoi(p)
	if n < 1 || n > 65535 {
		return "", false
	}
	if p[0] != '0' {
		return p, true
	}
	return strconv.Itoa(n), true
}

// withRequestCheck answers what CheckRequest refuses and hands the rest
// to next with the normalized path.
func withRequestCheck(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := CheckRequest(r)
		switch c.Status {
		case 0:
		case http.StatusOK, http.StatusMethodNotAllowed:
			w.Header().Set("Allow", "GET, HEAD")
			if c.Status == http.StatusOK {
				w.Header().Set("Content-Length", "0")
				w.WriteHeader(http.StatusOK)
				return
			}
			fallthrough
		default:
			w.Header().Set("Cache-Control", "no-store")
			WriteStatus(w, r, c.Status)
			return
		}
		if c.Path != r.URL.EscapedPath() {
			r2 := new(http.Request)
			*r2 = *r
			u := *r.URL
			u.Path, _ = url.PathUnescape(c.Path) // NormalizePath checked the escapes
			u.RawPath = c.Path
			r2.URL = &u
			r = r2
		}
		next.ServeHTTP(w, r)
	})
}

// WriteStatus writes the status code with its text as a small plain-text
// body (none for HEAD), the answer of a request refused or redirected
// before any content.
func WriteStatus(w http.ResponseWriter, r *http.Request, code int) {
	body := strconv.Itoa(code) + " " + http.StatusText(code) + "\n"
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write([]byte(body))
	}
}
