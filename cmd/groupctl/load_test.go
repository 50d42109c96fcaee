package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestParseLoadBounds(t *testing.T) {
	const u = "http://www.example.test:8080/pub/file-0001.bin"
	tests := []struct {
		name string
		args []string
		want string // error substring; "" for valid
	}{
		{"defaults", []string{u}, ""},
		{"at the limits", []string{"-rate", "2000", "-duration", "5m", "-concurrency", "256", u}, ""},
		{"flags after the URL", []string{u, "-rate", "10", "-subnet", "2001:db8:1::/48"}, ""},
		{"paths pattern", []string{"-paths", "/pub/file-%04d.bin", "-files", "200", u}, ""},
		{"loopback URL literal", []string{"http://127.0.1.1:8080/x"}, ""},
		{"IPv6 loopback DNS", []string{"-dns", "[::1]:5300", u}, ""},
		{"rate too high", []string{"-rate", "2001", u}, "-rate 2001: want more than 0 and at most 2000"},
		{"rate zero", []string{"-rate", "0", u}, "-rate 0"},
		{"duration too long", []string{"-duration", "5m1s", u}, "-duration 5m1s: want more than 0 and at most 5m0s"},
		{"duration zero", []string{"-duration", "0s", u}, "-duration 0s"},
		{"concurrency too high", []string{"-concurrency", "257", u}, "-concurrency 257: want 1..256"},
		{"DNS server not loopback", []string{"-dns", "8.8.8.8:53", u}, "-dns 8.8.8.8: not a loopback address"},
		{"DNS server name", []string{"-dns", "localhost:53", u}, `-dns "localhost:53": want IP:PORT`},
		{"URL literal not loopback", []string{"http://192.0.2.1/x"}, "URL host 192.0.2.1: not a loopback address"},
		{"https", []string{"https://www.example.test/"}, "want an http:// URL"},
		{"bad subnet", []string{"-subnet", "europe", u}, `-subnet "europe"`},
		{"pattern without verb", []string{"-paths", "/pub/file.bin", u}, "one integer verb"},
		{"pattern with a string verb", []string{"-paths", "/pub/%s", u}, "one integer verb"},
		{"no URL", nil, "usage: groupctl load"},
		{"two URLs", []string{u, u}, "usage: groupctl load"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseLoad(tt.args, io.Discard)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("parseLoad: %v", err)
			case tt.want != "" && err == nil:
				t.Fatalf("parseLoad accepted %q, want an error with %q", tt.args, tt.want)
			case tt.want != "" && !strings.Contains(err.Error(), tt.want):
				t.Fatalf("parseLoad: %v\nwant it to contain %q", err, tt.want)
			}
			if err != nil {
				if _, ok := err.(usageError); !ok {
					t.Errorf("error %T is not a usage error (exit 2)", err)
				}
			}
		})
	}
}

func TestLoopbackOnlyDialer(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:80": true, "127.0.3.1:8080": true, "[::1]:80": true,
		"192.0.2.1:80": false, "[2001:db8::1]:80": false, "10.0.0.1:8080": false,
	} {
		err := loopbackOnly("tcp", addr, nil)
		if (err == nil) != ok {
			t.Errorf("loopbackOnly(%s) = %v, want allowed %t", addr, err, ok)
		}
	}
}

// testDNS is a tiny authoritative server on 127.0.0.1:0: names map to
// one A record each; it remembers the client subnets it was sent.
type testDNS struct {
	addr    string
	mu      sync.Mutex
	records map[string]string
	subnets []string
	queries atomic.Int64
}

func startTestDNS(t *testing.T, records map[string]string) *testDNS {
	t.Helper()
	d := &testDNS{records: records}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.addr = pc.LocalAddr().String()
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) },
		Handler: dns.HandlerFunc(d.serve)}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("test DNS server did not start")
	}
	return d
}

func (d *testDNS) serve(w dns.ResponseWriter, r *dns.Msg) {
	d.queries.Add(1)
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	q := r.Question[0]
	if o := r.IsEdns0(); o != nil {
		for _, opt := range o.Option {
			if e, ok := opt.(*dns.EDNS0_SUBNET); ok {
				d.mu.Lock()
				d.subnets = append(d.subnets, fmt.Sprintf("%s/%d", e.Address, e.SourceNetmask))
				d.mu.Unlock()
			}
		}
	}
	d.mu.Lock()
	ip, ok := d.records[strings.ToLower(q.Name)]
	d.mu.Unlock()
	switch {
	case !ok:
		m.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		rr, _ := dns.NewRR(q.Name + " 30 IN A " + ip)
		m.Answer = append(m.Answer, rr)
	}
	_ = w.WriteMsg(m)
}

// runGroupctl runs groupctl with args and returns its exit status and output.
func runGroupctl(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestLoadFollowsOneRedirect: the group name resolves to mirror a, which
// serves half the requests and redirects the other half to mirror b by
// its own host name; both names are asked once (cached for the TTL), the
// client subnet is sent, and the table counts each mirror.
func TestLoadFollowsOneRedirect(t *testing.T) {
	var aHost, bHost atomic.Value
	var bURL string
	var n atomic.Int64
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		bHost.Store(r.Host)
		fmt.Fprint(w, "from b "+r.URL.Path)
	}))
	defer b.Close()
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aHost.Store(r.Host)
		if n.Add(1)%2 == 0 {
			http.Redirect(w, r, bURL+r.URL.Path, http.StatusFound)
			return
		}
		fmt.Fprint(w, "from a "+r.URL.Path)
	}))
	defer a.Close()
	_, aPort, _ := net.SplitHostPort(a.Listener.Addr().String())
	_, bPort, _ := net.SplitHostPort(b.Listener.Addr().String())
	bURL = "http://b.mirrors.example.test:" + bPort
	d := startTestDNS(t, map[string]string{
		"www.example.test.":       "127.0.0.1",
		"b.mirrors.example.test.": "127.0.0.1",
	})

	code, out, errOut := runGroupctl("load", "-dns", d.addr, "-subnet", "198.51.100.0/24", "-rate", "200",
		"-duration", "500ms", "-concurrency", "4", "-paths", "/pub/file-%04d.bin", "-files", "10",
		"http://www.example.test:"+aPort+"/")
	t.Logf("groupctl load:\n%s%s", out, errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got, want := aHost.Load(), "www.example.test:"+aPort; got != want {
		t.Errorf("mirror a got Host %v, want %s", got, want)
	}
	if got, want := bHost.Load(), "b.mirrors.example.test:"+bPort; got != want {
		t.Errorf("mirror b got Host %v, want %s", got, want)
	}
	if q := d.queries.Load(); q != 2 {
		t.Errorf("%d DNS queries, want 2 (one per name, cached for the 30 s TTL)", q)
	}
	d.mu.Lock()
	for _, s := range d.subnets {
		if s != "198.51.100.0/24" {
			t.Errorf("client subnet sent %s, want 198.51.100.0/24", s)
		}
	}
	if len(d.subnets) == 0 {
		t.Error("no client subnet sent")
	}
	d.mu.Unlock()

	row := func(port string) (served, redirected, errs int) {
		re := regexp.MustCompile(`(?m)^\s*127\.0\.0\.1:` + port + `\s+(\d+)\s+(\d+)\s+(\d+)\s`)
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no table row for 127.0.0.1:%s in:\n%s", port, out)
		}
		served, _ = strconv.Atoi(m[1])
		redirected, _ = strconv.Atoi(m[2])
		errs, _ = strconv.Atoi(m[3])
		return
	}
	aServed, aRedir, aErr := row(aPort)
	bServed, bRedir, bErr := row(bPort)
	total := int(n.Load())
	if aErr+bErr != 0 || bRedir != 0 {
		t.Errorf("errors a %d b %d, b redirected %d: want none", aErr, bErr, bRedir)
	}
	if aServed+aRedir != total || bServed != aRedir {
		t.Errorf("a served %d + redirected %d of %d requests, b served %d: every redirect must be followed once", aServed, aRedir, total, bServed)
	}
	// The rate is a ceiling: a busy machine may send fewer in the half
	// second, never more.
	if total == 0 || total > 101 {
		t.Errorf("%d requests at 200/s for 0.5 s, want 1..101", total)
	}
	t.Logf("%d requests at 200/s in 0.5 s", total)
	if !strings.Contains(out, "reached as") && !strings.Contains(out, "REACHED AS") {
		t.Errorf("no table header in:\n%s", out)
	}
}

// TestLoadRedirectedTwice: a redirect to a mirror that redirects again is
// not followed; it is an error of the second mirror.
func TestLoadRedirectedTwice(t *testing.T) {
	var bURL string
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://www.example.test/again", http.StatusFound)
	}))
	defer b.Close()
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, bURL+r.URL.Path, http.StatusFound)
	}))
	defer a.Close()
	_, aPort, _ := net.SplitHostPort(a.Listener.Addr().String())
	_, bPort, _ := net.SplitHostPort(b.Listener.Addr().String())
	bURL = "http://b.example.test:" + bPort
	d := startTestDNS(t, map[string]string{"www.example.test.": "127.0.0.1", "b.example.test.": "127.0.0.1"})
	code, out, errOut := runGroupctl("load", "-dns", d.addr, "-rate", "20", "-duration", "200ms", "http://www.example.test:"+aPort+"/f")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^\s*127\.0\.0\.1:`+bPort+`\s+0\s+[1-9]\d*\s+[1-9]\d*\s`).MatchString(out) ||
		!strings.Contains(out, "redirected again") {
		t.Errorf("the second redirect must count as an error of b:\n%s", out)
	}
}

// TestLoadRefusesNonLoopback: a group name that resolves outside loopback
// stops the run with a clear error, before any connection.
func TestLoadRefusesNonLoopback(t *testing.T) {
	d := startTestDNS(t, map[string]string{"www.example.test.": "192.0.2.10"})
	code, out, errOut := runGroupctl("load", "-dns", d.addr, "-rate", "50", "-duration", "2s", "http://www.example.test:8080/")
	if code != 1 || !strings.Contains(errOut, "www.example.test resolved to 192.0.2.10: not a loopback address") {
		t.Fatalf("exit %d, want 1 with a refusal:\n%s%s", code, out, errOut)
	}
}

// TestLoadBadArgumentsExit2: bounds are usage errors.
func TestLoadBadArgumentsExit2(t *testing.T) {
	code, _, errOut := runGroupctl("load", "-rate", "100000", "http://www.example.test/")
	if code != 2 || !strings.Contains(errOut, "at most 2000") {
		t.Fatalf("exit %d, want 2: %s", code, errOut)
	}
}

func TestResolverCachesForTTL(t *testing.T) {
	d := startTestDNS(t, map[string]string{"www.example.test.": "127.0.0.7"})
	r := newResolver(d.addr, netip.Prefix{})
	now := time.Unix(1000, 0)
	r.now = func() time.Time { return now }
	for i := range 3 {
		addrs, err := r.lookup(t.Context(), "www.example.test")
		if err != nil || len(addrs) != 1 || addrs[0].String() != "127.0.0.7" {
			t.Fatalf("lookup %d: %v %v", i, addrs, err)
		}
	}
	if q := d.queries.Load(); q != 1 {
		t.Errorf("%d queries within the TTL, want 1", q)
	}
	now = now.Add(31 * time.Second)
	if _, err := r.lookup(t.Context(), "www.example.test"); err != nil {
		t.Fatal(err)
	}
	if q := d.queries.Load(); q != 2 {
		t.Errorf("%d queries after the TTL, want 2", q)
	}
	if _, err := r.lookup(t.Context(), "nope.example.test"); err == nil || !strings.Contains(err.Error(), "NXDOMAIN") {
		t.Errorf("lookup of a missing name: %v, want NXDOMAIN", err)
	}
}
