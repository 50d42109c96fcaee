package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// The member's side of the scheme and the family of a redirect: hot is
// driven over its fair share by real requests and answers 302; its
// siblings are v4plain (IPv4 addresses, plain http) and duals (IPv4 and
// IPv6, http and https).
const (
	// memberCapacity is hot's capacity in load units. Its target is the
	// low watermark, 0.7 (the idle siblings keep the group's fair
	// utilization far below it), so with run_queue none it is over its
	// target from 0.7 requests/s on: the loader alone sends 20.
	memberCapacity = 10
	// memberLoadRate and memberLoadMax bound the loader: requests/s, and
	// requests in all (over a minute's worth, far more than the test
	// needs).
	memberLoadRate = 20
	memberLoadMax  = 1500
	// memberMinRedirects is the least number of 302s a case must see
	// while both siblings are up, in at most memberMaxAsks requests and
	// memberAsking: at the default max_share of 0.8, 5 come in about 6
	// requests. The bounds leave room for a busy host, whose mirrors may
	// let their 200 ms group view go stale (and serve) for a while.
	memberMinRedirects = 5
	memberMaxAsks      = 200
	memberAsking       = 15 * time.Second
	// memberServedAsks is how many requests a case sends once no sibling
	// qualifies: every one must be served.
	memberServedAsks = 8
	memberPath       = "/pub/x.iso"
)

// memberCase is one kind of request to hot: over IPv4 or IPv6, plain or
// TLS, by the Go client or curl.
type memberCase struct {
	name    string
	ip      string // hot's listener the client connects to: 127.0.0.1 or ::1
	scheme  string
	curl    bool
	allowed []string // the siblings a 302 may name; none: hot must serve
}

// TestMemberRedirectKeepsSchemeAndFamily is the "done when" for a
// member's 302 correction: dnsd, and three real mirrors in its group: hot
// (on 127.0.0.1 and [::1], http and https), v4plain (IPv4 addresses, plain
// http) and duals (IPv4 and IPv6 addresses, http and https). A loader
// drives hot over its fair share with plain IPv4 requests on the group
// name, then the Go client (trusting the test CA) and curl ask hot: every
// 302 of an https request has an https:// Location naming duals, every
// 302 of an IPv6 client's request names duals, a plain IPv4 request is
// served or sent to either sibling. With duals drained no sibling
// qualifies for https or IPv6, and hot serves those requests itself.
func TestMemberRedirectKeepsSchemeAndFamily(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl is needed (make deps installs it): %v", err)
	}
	began := time.Now()
	h := startMemberOffers(t)
	load := h.overload(t)

	// hot over its target, with duals' https in its view: an https
	// request from an IPv6 client is redirected.
	probetest.Until(t, 20*time.Second, func() string {
		code, loc, err := h.ask(memberCase{ip: "::1", scheme: "https"})
		if err != nil || code != http.StatusFound {
			return fmt.Sprintf("https over IPv6: %d %q (%v), want a 302 once hot is over its target and its view has duals' report; loader: %s", code, loc, err, load)
		}
		if n, err := h.candidates(); err != nil || n != 2 {
			return fmt.Sprintf("hot's view has %d candidates (%v), want both siblings", n, err)
		}
		return ""
	})
	overAt := time.Since(began)
	h.bothUp(t)
	served := h.dualsDrained(t)
	h.checkCounts(t, load)
	t.Logf("hot redirected %v after the start; with duals drained it served %g requests it would have redirected; wall time %v",
		overAt.Round(time.Millisecond), served, time.Since(began).Round(100*time.Millisecond))
}

// bothUp is the first phase: both siblings in hot's view. A 302 of an
// https request or of an IPv6 client's names duals, with the request's
// scheme; a plain IPv4 request goes to either.
func (h *memberOffers) bothUp(t *testing.T) {
	for _, c := range []memberCase{
		{name: "http over IPv4: either", ip: "127.0.0.1", scheme: "http", allowed: []string{"v4plain", "duals"}},
		{name: "http over IPv6: duals alone", ip: "::1", scheme: "http", allowed: []string{"duals"}},
		{name: "https over IPv4: duals alone", ip: "127.0.0.1", scheme: "https", allowed: []string{"duals"}},
		{name: "https over IPv6: duals alone", ip: "::1", scheme: "https", allowed: []string{"duals"}},
		{name: "curl, https over IPv4: duals alone", ip: "127.0.0.1", scheme: "https", curl: true, allowed: []string{"duals"}},
		{name: "curl, http over IPv6: duals alone", ip: "::1", scheme: "http", curl: true, allowed: []string{"duals"}},
	} {
		t.Run(c.name, func(t *testing.T) { h.run(t, c, memberMinRedirects) })
	}
}

// dualsDrained is the second phase: duals drained, no sibling serves
// https or IPv6, and hot serves those requests rather than break them; a
// plain IPv4 request is served or sent to v4plain. It returns how many
// requests hot served that it would have redirected.
func (h *memberOffers) dualsDrained(t *testing.T) float64 {
	if out, err := groupctl(t, h.dnsd.Admin, faultSecret, "drain", faultGroup, "duals"); err != nil {
		t.Fatalf("groupctl drain duals: %v\n%s", err, out)
	}
	probetest.Until(t, 20*time.Second, func() string {
		if n, err := h.candidates(); err != nil || n != 1 {
			return fmt.Sprintf("hot's view has %d candidates (%v), want 1 once duals is drained", n, err)
		}
		return ""
	})
	before := h.noSibling(t)
	for _, c := range []memberCase{
		{name: "duals drained: https over IPv4 served", ip: "127.0.0.1", scheme: "https"},
		{name: "duals drained: https over IPv6 served", ip: "::1", scheme: "https"},
		{name: "duals drained: http over IPv6 served", ip: "::1", scheme: "http"},
		{name: "duals drained, curl: https over IPv6 served", ip: "::1", scheme: "https", curl: true},
		{name: "duals drained: http over IPv4 to v4plain", ip: "127.0.0.1", scheme: "http", allowed: []string{"v4plain"}},
	} {
		t.Run(c.name, func(t *testing.T) { h.run(t, c, 0) })
	}
	// hot was over its target meanwhile: of what it served, it would have
	// redirected some (unless its view was stale then, on a busy host).
	probetest.Until(t, 15*time.Second, func() string {
		if h.noSibling(t) > before {
			return ""
		}
		c := memberCase{ip: "127.0.0.1", scheme: "https"}
		if code, loc, err := h.ask(c); err != nil || code != http.StatusOK {
			t.Fatalf("https over IPv4 with duals drained: %d %q (%v), want a 200", code, loc, err)
		}
		return fmt.Sprintf("hot has skipped no redirect for want of a sibling since duals was drained (%g): its 200s do not show that it was over its target", before)
	})
	return h.noSibling(t) - before
}

// memberOffers is TestMemberRedirectKeepsSchemeAndFamily's dnsd and
// mirrors, and its clients.
type memberOffers struct {
	dnsd          *dnsdProc
	ca            *probetest.CA
	hot           *mirrorProc
	port, tlsPort string // hot's, on both of its addresses
	content       string // memberPath's bytes, on every mirror
	clients       map[string]*http.Client

	mu         sync.Mutex     // guards the counts below
	redirected map[string]int // 302s the clients got, by sibling ("": neither)
	failed     int            // requests without an answer, or with a bad one
}

// startMemberOffers starts dnsd and the three mirrors, and makes the
// clients; the test waits for hot's view itself.
func startMemberOffers(t *testing.T) *memberOffers {
	t.Helper()
	dir := t.TempDir()
	h := &memberOffers{ca: probetest.NewCA(t, dir, "ca"), content: strings.Repeat("transmirror e2e member offers\n", 64), redirected: map[string]int{}}
	admins := map[string]string{}
	for _, n := range []string{"hot", "v4plain", "duals"} {
		admins[n] = probetest.FreeAddr(t, "tcp")
	}
	h.dnsd = startDNSD(t, true, "-config", offersDNSD(t, dir,
		offersMember{name: "hot", addresses: []string{"127.0.9.3", "2001:db8::a"}, admin: admins["hot"]},
		offersMember{name: "v4plain", addresses: []string{"127.0.9.1"}, admin: admins["v4plain"]},
		offersMember{name: "duals", addresses: []string{"127.0.9.2", "2001:db8::9"}, admin: admins["duals"]}))
	for name, listen := range map[string]string{
		"v4plain": `listen: ["127.0.0.1:0"]` + "\n",
		"duals":   `listen: ["127.0.0.1:0"]` + "\n" + h.tlsFor(t, dir, "duals", `["127.0.0.1:0"]`),
	} {
		if _, err := h.startMirror(t, dir, name, admins[name], listen); err != nil {
			t.Fatal(err)
		}
	}
	h.startHot(t, dir, admins["hot"])
	h.clients = map[string]*http.Client{"127.0.0.1": h.client("127.0.0.1"), "::1": h.client("::1")}
	t.Cleanup(func() {
		for _, c := range h.clients {
			c.CloseIdleConnections()
		}
	})
	return h
}

// tlsFor is the tls: line of mirror name's config, listening on listen,
// with a certificate of the CA for the group name and its own host name.
func (h *memberOffers) tlsFor(t *testing.T, dir, name, listen string) string {
	cert, key := h.ca.LeafFor(t, dir, name, faultGroup, name+".mirrors.example.test")
	return fmt.Sprintf("tls: {listen: %s, certificates: [{cert_file: %q, key_file: %q}]}\n", listen, cert, key)
}

// startHot starts hot on one port for plain http and one for TLS, each on
// 127.0.0.1 and [::1]. The ports were free on 127.0.0.1 alone a moment
// ago: when hot can not bind them, it tries other ones.
func (h *memberOffers) startHot(t *testing.T, dir, admin string) {
	t.Helper()
	var err error
	for attempt := 1; attempt <= 5; attempt++ {
		_, h.port, _ = net.SplitHostPort(probetest.FreeAddr(t, "tcp"))
		_, h.tlsPort, _ = net.SplitHostPort(probetest.FreeAddr(t, "tcp"))
		listen := fmt.Sprintf("listen: [\"127.0.0.1:%s\", \"[::1]:%s\"]\n", h.port, h.port) +
			h.tlsFor(t, dir, "hot", fmt.Sprintf(`["127.0.0.1:%s", "[::1]:%s"]`, h.tlsPort, h.tlsPort))
		if h.hot, err = h.startMirror(t, dir, "hot", admin, listen); err == nil {
			return
		}
		t.Logf("attempt %d: %v; trying other ports", attempt, err)
	}
	t.Fatalf("hot did not start: %v", err)
}

// startMirror writes mirror name's config, with memberPath in its root,
// and starts it. Only hot has a small capacity; none takes the host's
// load average, so only the test's requests load them.
func (h *memberOffers) startMirror(t *testing.T, dir, name, admin, listen string) (*mirrorProc, error) {
	t.Helper()
	root := filepath.Join(dir, name+"-root")
	if err := os.MkdirAll(filepath.Join(root, "pub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, root, memberPath[1:], h.content)
	capacity := 1000
	if name == "hot" {
		capacity = memberCapacity
	}
	return launchMirror(t, writeFile(t, dir, name+".yaml", fmt.Sprintf(`%sadmin: %s
group: %s
member: %s
host: %s.mirrors.example.test
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 200ms}
root: %s
capacity: %d
run_queue: none
`, listen, admin, faultGroup, name, name, h.dnsd.Admin, faultSecret, root, capacity)), name)
}

// client is a Go client that trusts the test CA, asks for the group name
// but connects to hot's listener on ip, whatever the URL's host, and
// does not follow redirects.
func (h *memberOffers) client(ip string) *http.Client {
	c := h.ca.Client()
	tr := c.Transport.(*http.Transport)
	tr.DisableKeepAlives, tr.MaxIdleConnsPerHost = false, 4
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		return d.DialContext(ctx, network, net.JoinHostPort(ip, port))
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// groupURL is memberPath on the group name, on hot's port for scheme.
func (h *memberOffers) groupURL(scheme string) string {
	port := h.port
	if scheme == "https" {
		port = h.tlsPort
	}
	return scheme + "://" + net.JoinHostPort(faultGroup, port) + memberPath
}

// ask sends c's request once: the status and the Location; a 200 whose
// body is not memberPath's content is an error. It counts the 302s and
// the requests that failed.
func (h *memberOffers) ask(c memberCase) (code int, loc string, err error) {
	if c.curl {
		code, loc, err = h.curl(c, h.groupURL(c.scheme))
	} else {
		code, loc, err = h.get(c)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil:
		h.failed++
	case code == http.StatusFound:
		h.redirected[h.target(loc, c.scheme)]++
	}
	return code, loc, err
}

// get is ask by the Go client.
func (h *memberOffers) get(c memberCase) (code int, loc string, err error) {
	resp, err := h.clients[c.ip].Get(h.groupURL(c.scheme))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode == http.StatusOK && string(body) != h.content {
		err = fmt.Errorf("a 200 with %d bytes that are not the file's %d", len(body), len(h.content))
	}
	return resp.StatusCode, resp.Header.Get("Location"), err
}

// curl is ask by the real curl, trusting the test CA, with the group
// name resolved to hot's listener on c.ip.
func (h *memberOffers) curl(c memberCase, u string) (int, string, error) {
	pu, err := url.Parse(u)
	if err != nil {
		return 0, "", err
	}
	ip := c.ip
	if strings.Contains(ip, ":") {
		ip = "[" + ip + "]"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "curl", "-sS", "--noproxy", "*", "--max-time", "10", "--cacert", h.ca.File,
		"--resolve", faultGroup+":"+pu.Port()+":"+ip, "-o", "/dev/null", "-w", "%{http_code} %{size_download} %{redirect_url}", u).Output()
	if err != nil {
		return 0, "", fmt.Errorf("curl %s: %w: %s", u, err, out)
	}
	f := strings.Fields(string(out)) // the code, the size, the Location if any
	var code, size int
	if len(f) < 2 || len(f) > 3 {
		return 0, "", fmt.Errorf("curl %s: %q", u, out)
	}
	if _, err := fmt.Sscan(f[0]+" "+f[1], &code, &size); err != nil {
		return 0, "", fmt.Errorf("curl %s: %q: %w", u, out, err)
	}
	if code == http.StatusOK && size != len(h.content) {
		return code, "", fmt.Errorf("curl %s: a 200 with %d bytes, want %d", u, size, len(h.content))
	}
	return code, strings.Join(f[2:], ""), nil
}

// names reports whether loc is a redirect with scheme to memberPath on
// the host name of one of the siblings allowed.
func (h *memberOffers) names(loc, scheme string, allowed ...string) bool {
	return slices.Contains(allowed, h.target(loc, scheme))
}

// target is the sibling loc sends the client to with scheme (to
// memberPath on the port the client asked), "" when it is anything else.
func (h *memberOffers) target(loc, scheme string) string {
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != scheme || u.Path != memberPath {
		return ""
	}
	if want, _ := url.Parse(h.groupURL(scheme)); u.Port() != want.Port() {
		return ""
	}
	name, ok := strings.CutSuffix(u.Hostname(), ".mirrors.example.test")
	if !ok || !slices.Contains([]string{"v4plain", "duals"}, name) {
		return ""
	}
	return name
}

// run sends c's request until it has seen minRedirects 302s (at most
// memberMaxAsks requests, for at most memberAsking), or memberServedAsks
// times when minRedirects is 0, and checks every answer: a 302 names one
// of c.allowed with c's scheme, a 200 carries the file, nothing else
// comes.
func (h *memberOffers) run(t *testing.T, c memberCase, minRedirects int) {
	got := map[string]int{}
	asks := memberServedAsks
	if minRedirects > 0 {
		asks = memberMaxAsks
	}
	deadline := time.Now().Add(memberAsking)
	n := 0
	for ; n < asks && (minRedirects == 0 || got["302"] < minRedirects && time.Now().Before(deadline)); n++ {
		code, loc, err := h.ask(c)
		switch {
		case err != nil:
			t.Fatalf("request %d: %v", n+1, err)
		case code == http.StatusOK:
			got["200"]++
		case code == http.StatusFound && h.names(loc, c.scheme, c.allowed...):
			got["302"]++
			got[h.target(loc, c.scheme)]++
		case len(c.allowed) == 0:
			t.Fatalf("request %d: %d %q, want a 200: no sibling qualifies", n+1, code, loc)
		default:
			t.Fatalf("request %d: %d %q, want a 200 or a 302 with %s:// to one of %v", n+1, code, loc, c.scheme, c.allowed)
		}
	}
	t.Logf("%s: %d requests: %v", c.name, n, got)
	if got["302"] < minRedirects {
		t.Errorf("%d of %d requests redirected, want at least %d: hot is not over its target", got["302"], n, minRedirects)
	}
}

// candidates is the number of siblings that hot's view offers redirects
// to (its /v1/status).
func (h *memberOffers) candidates() (int, error) {
	body, err := getBody(metricsClient, "http://"+h.hot.Admin+"/v1/status")
	if err != nil {
		return 0, err
	}
	var st struct {
		View *struct {
			Candidates int `json:"candidates"`
		} `json:"view"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.View == nil {
		return 0, fmt.Errorf("hot's status %q: no view (%v)", body, err)
	}
	return st.View.Candidates, nil
}

// noSibling is how many redirects hot skipped for want of a sibling.
func (h *memberOffers) noSibling(t *testing.T) float64 {
	t.Helper()
	v, err := metric(h.hot.Admin, "transmirror_mirror_redirects_skipped_total", `reason="no_sibling"`)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// memberLoad is the loader of overload: plain IPv4 requests on the group
// name at hot.
type memberLoad struct {
	stop func()        // stops it and waits for it; idempotent
	mu   sync.Mutex    // guards the figures
	sent int           // requests sent
	got  map[int]int   // answers, by status code
	bad  []string      // the first answers that failed their check
	done chan struct{} // closed when it has stopped
}

// String is what the loader did so far.
func (l *memberLoad) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprintf("%d requests sent, answers %v, %d failed their check %q", l.sent, l.got, len(l.bad), l.bad[:min(len(l.bad), 3)])
}

// overload starts the loader: memberLoadRate requests/s (one at a time,
// so a slow answer makes the rate fall, never the requests pile up), at
// most memberLoadMax, until stopped or the test ends. Every answer is
// checked as the "http over IPv4" case's are: a 200 with the file or a
// 302 to either sibling, with http.
func (h *memberOffers) overload(t *testing.T) *memberLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &memberLoad{got: map[int]int{}, done: make(chan struct{})}
	l.stop = func() { cancel(); <-l.done }
	t.Cleanup(l.stop)
	c := memberCase{ip: "127.0.0.1", scheme: "http"}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(time.Second / memberLoadRate)
		defer tick.Stop()
		for n := 0; n < memberLoadMax; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			code, loc, err := h.ask(c)
			l.mu.Lock()
			l.sent++
			l.got[code]++
			if ok := err == nil && (code == http.StatusOK || (code == http.StatusFound && h.names(loc, "http", "v4plain", "duals"))); !ok && len(l.bad) < 10 {
				l.bad = append(l.bad, fmt.Sprintf("%d %q %v", code, loc, err))
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// checkCounts stops the loader and checks that its answers all passed,
// and that hot's /metrics counts the 302s the clients got: in all, and to
// v4plain, the only sibling that plain IPv4 requests alone may go to.
func (h *memberOffers) checkCounts(t *testing.T, load *memberLoad) {
	t.Helper()
	load.stop()
	t.Logf("loader: %s", load)
	if len(load.bad) > 0 {
		t.Errorf("the loader's answers failed their check: %q", load.bad)
	}
	text := scrape(t, h.hot.Admin)
	h.mu.Lock()
	defer h.mu.Unlock()
	total := 0
	for _, n := range h.redirected {
		total += n
	}
	counted := map[string]float64{
		"":        metricSum(text, "transmirror_mirror_redirects_total", `reason="overload"`),
		"v4plain": metricSum(text, "transmirror_mirror_sibling_redirects_total", `member="v4plain"`),
		"duals":   metricSum(text, "transmirror_mirror_sibling_redirects_total", `member="duals"`),
	}
	t.Logf("302s the clients got: %v (%d in all, %d requests failed); hot's /metrics: %g overload redirects, %g to v4plain, %g to duals",
		h.redirected, total, h.failed, counted[""], counted["v4plain"], counted["duals"])
	if n := h.redirected[""]; n > 0 {
		t.Errorf("%d 302s named neither sibling with the request's scheme", n)
	}
	if h.failed > 0 {
		return // requests the server may have answered: the counts can not match
	}
	if int(counted[""]) != total {
		t.Errorf("hot's /metrics counts %g overload redirects, the clients got %d", counted[""], total)
	}
	for _, s := range []string{"v4plain", "duals"} {
		if int(counted[s]) != h.redirected[s] {
			t.Errorf("hot's /metrics counts %g redirects to %s, the clients got %d", counted[s], s, h.redirected[s])
		}
	}
}
