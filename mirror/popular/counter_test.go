package popular

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestCounts(t *testing.T) {
	tests := []struct {
		name   string
		method string
		ranges []string // Range headers, none when nil
		want   bool
	}{
		{"get", http.MethodGet, nil, true},
		{"head", http.MethodHead, nil, false},
		{"post", http.MethodPost, nil, false},
		{"range from 0", http.MethodGet, []string{"bytes=0-1023"}, true},
		{"open range from 0", http.MethodGet, []string{"bytes=0-"}, true},
		{"several ranges, first from 0", http.MethodGet, []string{"bytes=0-9, 100-199"}, true},
		{"spaces", http.MethodGet, []string{" bytes= 0 -9"}, true},
		{"range from 1024", http.MethodGet, []string{"bytes=1024-2047"}, false},
		{"several ranges, first not from 0", http.MethodGet, []string{"bytes=10-19,0-9"}, false},
		{"suffix range", http.MethodGet, []string{"bytes=-500"}, false},
		{"other unit", http.MethodGet, []string{"items=0-1"}, false},
		{"garbage", http.MethodGet, []string{"bytes=x-1"}, false},
		{"two headers", http.MethodGet, []string{"bytes=0-1", "bytes=0-1"}, false},
		{"head with range from 0", http.MethodHead, []string{"bytes=0-"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "http://www.example.org/f", nil)
			for _, v := range tt.ranges {
				r.Header.Add("Range", v)
			}
			if got := Counts(r); got != tt.want {
				t.Errorf("Counts(%s %q) = %v, want %v", tt.method, tt.ranges, got, tt.want)
			}
		})
	}
}

func TestKey(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/pub/file.iso", "/pub/file.iso"},
		{"/a b&c", "/a%20b%26c"},
		{`/<x>"\`, "/%3Cx%3E%22%5C"},
		{"/café", "/caf%C3%A9"},
		{"/a?b#c", "/a%3Fb%23c"},
		{"/~user/x+y=z", "/~user/x+y=z"},
		{"/debian/./dists//stable/../Release", "/debian/dists/Release"},
		{"/dists/", "/dists/"},
		{"/", "/"},
		{"/../../etc/passwd", "/etc/passwd"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if got := Key(tt.path); got != tt.want {
				t.Errorf("Key(%q) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

// answering answers /moved with a 302, /missing with a 404 and the rest
// with 200.
var answering = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/moved":
		http.Redirect(w, r, "http://fra1.example.org/moved", http.StatusFound)
	case "/missing":
		http.NotFound(w, r)
	default:
		_, _ = w.Write([]byte("x"))
	}
})

func TestCounterWrap(t *testing.T) {
	type req struct{ method, url, rng string }
	tests := []struct {
		name      string
		redirects bool
		reqs      []req
		want      map[string]float64
		tooLong   float64
	}{
		{name: "group and own host count, others not", reqs: []req{
			{"GET", "http://www.example.org/a", ""}, {"GET", "http://WWW.example.org.:8080/a", ""},
			{"GET", "http://nyc1.example.org/a", ""}, {"GET", "http://127.0.0.1/a", ""},
			{"GET", "http://other.example.org/a", ""},
		}, want: map[string]float64{"/a": 3}},
		{name: "ranges coalesced", reqs: []req{
			{"GET", "http://www.example.org/iso", "bytes=0-99"}, {"GET", "http://www.example.org/iso", "bytes=100-199"},
			{"GET", "http://www.example.org/iso", "bytes=200-"}, {"HEAD", "http://www.example.org/iso", ""},
		}, want: map[string]float64{"/iso": 1}},
		{name: "a member counts no redirect, and a 404", reqs: []req{
			{"GET", "http://www.example.org/moved", ""}, {"GET", "http://www.example.org/missing", ""},
		}, want: map[string]float64{"/missing": 1}},
		{name: "a dispatcher counts its redirects", redirects: true, reqs: []req{
			{"GET", "http://www.example.org/moved", ""},
		}, want: map[string]float64{"/moved": 1}},
		{name: "decoded paths, one key", reqs: []req{
			{"GET", "http://www.example.org/caf%C3%A9", ""}, {"GET", "http://www.example.org/caf%c3%a9", ""},
		}, want: map[string]float64{"/caf%C3%A9": 2}},
		{name: "too long", reqs: []req{
			{"GET", "http://www.example.org/" + strings.Repeat("a", MaxPathLen-1), ""},
			{"GET", "http://www.example.org/" + strings.Repeat("a", MaxPathLen), ""},
			{"GET", "http://www.example.org/" + strings.Repeat("%3C", MaxPathLen/3+1), ""},
		}, want: map[string]float64{"/" + strings.Repeat("a", MaxPathLen-1): 1}, tooLong: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			c, err := NewCounter(CounterOptions{
				Hosts: []string{"www.example.org.", "nyc1.example.org"}, Redirects: tt.redirects,
				Clock: func() time.Time { return t0 }, Registerer: reg,
			})
			if err != nil {
				t.Fatal(err)
			}
			h := c.Wrap(answering)
			for _, q := range tt.reqs {
				r := httptest.NewRequest(q.method, q.url, nil)
				if q.rng != "" {
					r.Header.Set("Range", q.rng)
				}
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
			got := map[string]float64{}
			for _, e := range c.Top(t0) {
				got[e.Key] = e.Count
			}
			if !maps.Equal(got, tt.want) {
				t.Errorf("Top = %v, want %v", got, tt.want)
			}
			if n := testutil.ToFloat64(c.results.WithLabelValues(ResultTooLong)); n != tt.tooLong {
				t.Errorf("too_long = %g, want %g", n, tt.tooLong)
			}
			if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
				t.Errorf("lint: %v %v", problems, err)
			}
		})
	}
}
