package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/probe/probetest"
)

// The fault matrix (issue 15): each TestFault… starts a cluster of its own
// (dnsd, mirrors, a resolver, as the scenario needs) on loopback, injects
// one fault and checks the outcome the scenario must show, logging the
// figure it measured. They run in parallel; each one stops every process
// it started, by PID.

const (
	faultGroup  = "www.example.test"
	faultSecret = "e2e-fault-secret"
)

// faultHealth is the health block of the fault scenarios' dnsd: the
// figures the bounds are computed from.
var faultHealth = membersHealthConfig{Interval: 300 * time.Millisecond, Timeout: 250 * time.Millisecond, Jitter: 30 * time.Millisecond, Fall: 3}

// faultRise is the rise of that block.
const faultRise = 2

// faultMember is a static member of a fault scenario's group.
type faultMember struct {
	name, ip string
	probe    string // load report URL, "" for none
	capacity float64
}

// faultDNSD writes dnsd's config and zone into dir (the zone of the e2e
// tests, a wildcard alias of the group, *.any, and an A record for each
// member's own host name) and returns the
// config's path. extra is appended to the top level (state_file, geo, …);
// answers is the group's answer count.
func faultDNSD(t *testing.T, dir string, answers int, extra string, members ...faultMember) string {
	t.Helper()
	zone, err := os.ReadFile(filepath.Join("testdata", "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	var zb, mb strings.Builder
	zb.Write(zone)
	// Names that a resolver has never seen, each an alias of the group.
	zb.WriteString("\n*.any IN CNAME www\n")
	zb.WriteString("\n; the fault scenario's mirrors\n")
	for _, m := range members {
		fmt.Fprintf(&zb, "%s.mirrors IN A %s\n", m.name, m.ip)
		capacity := m.capacity
		if capacity == 0 {
			capacity = 1000
		}
		fmt.Fprintf(&mb, "      - {name: %s, host: %s.mirrors.example.test., addresses: [%s], capacity: %g", m.name, m.name, m.ip, capacity)
		if m.probe != "" {
			fmt.Fprintf(&mb, ", probe: %q", m.probe)
		}
		mb.WriteString("}\n")
	}
	writeFile(t, dir, "example.test.zone", zb.String())
	h := faultHealth
	return writeFile(t, dir, "dnsd.yaml", fmt.Sprintf(`# e2e fault scenario
listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
health: {interval: %v, timeout: %v, jitter: %v, rise: %d, fall: %d}
zones:
  - origin: example.test.
    file: example.test.zone
%sgroups:
  - name: %s.
    ttl: {min: 1, max: 1}
    answers: %d
    secret: %s
    allow_private: true # run-time members on loopback
    members:
%s`, h.Interval, h.Timeout, h.Jitter, faultRise, h.Fall, extra, faultGroup, answers, faultSecret, mb.String()))
}

// faultAdd adds a run-time member with groupctl.
func faultAdd(t *testing.T, d *dnsdProc, m faultMember) {
	t.Helper()
	args := []string{"add", faultGroup, "-name", m.name, "-host", m.name + ".mirrors.example.test", "-addr", m.ip,
		"-capacity", "1000", "-lat", "50.11", "-lon", "8.68", "-country", "DE"}
	if m.probe != "" {
		args = append(args, "-probe", m.probe)
	}
	if out, err := groupctl(t, d.Admin, faultSecret, args...); err != nil {
		t.Fatalf("groupctl add %s: %v\n%s", m.name, err, out)
	}
}

// groupAnswer asks dnsd at addr for the group's A records, over UDP, and
// returns the addresses.
func groupAnswer(c *dns.Client, addr string) ([]string, error) {
	m := new(dns.Msg).SetQuestion(faultGroup+".", dns.TypeA)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("rcode %s", dns.RcodeToString[r.Rcode])
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no address in the answer")
	}
	return out, nil
}

// answerLog records, for every address, when the last answer that named
// it was asked for (by send time), and how many answers it saw; for the
// watched addresses, when each answer that named them was asked for.
type answerLog struct {
	start   time.Time
	mu      sync.Mutex
	last    map[string]time.Duration
	watched map[string][]time.Duration
	n       int
}

// newAnswerLog returns a log whose times count from start, recording each
// answer that names one of watch.
func newAnswerLog(start time.Time, watch ...string) *answerLog {
	l := &answerLog{start: start, last: map[string]time.Duration{}, watched: map[string][]time.Duration{}}
	for _, a := range watch {
		l.watched[a] = nil
	}
	return l
}

func (l *answerLog) note(sent time.Time, addrs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	at := sent.Sub(l.start)
	for _, a := range addrs {
		if at > l.last[a] {
			l.last[a] = at
		}
		if ts, ok := l.watched[a]; ok {
			l.watched[a] = append(ts, at)
		}
	}
}

// namedAfter counts the answers naming the watched address addr that were
// asked for later than after (from the log's start).
func (l *answerLog) namedAfter(addr string, after time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.watched[addr] {
		if at > after {
			n++
		}
	}
	return n
}

// lastNamed returns when the last answer naming addr was asked for,
// relative to the log's start, and whether one was.
func (l *answerLog) lastNamed(addr string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.last[addr]
	return at, ok
}

// pollAnswers asks dnsd for the group every 20 ms until ctx is done and
// notes every answer in log; the channel is closed when it has stopped.
func pollAnswers(ctx context.Context, addr string, log *answerLog) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		c := &dns.Client{Net: "udp", Timeout: time.Second}
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			sent := time.Now()
			if a, err := groupAnswer(c, addr); err == nil {
				log.note(sent, a)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return done
}

// retryingClient is the client model of the fault scenarios, named for
// what its "0 gave up" means: it retries every address, resolving again,
// for up to 15 s, so a fetch fails only when no mirror served the file in
// all that time; while one mirror lives that holds whatever dnsd answers.
// A scenario that judges dnsd bounds its answers (answerLog) as well. It
// is a client that
// follows DNS the way a browser or a download tool does. For each file it
// asks dnsd for the group (no cache: the TTL is 1 s and the scenarios
// last longer), connects to the addresses of the answer in order on the
// mirrors' port, and follows one 302 to a sibling's own host name (which
// it resolves through dnsd too). A failure of the transport — connection
// refused or reset, a response cut short — makes it try the next address,
// and when none is left, resolve again after 100 ms; it gives up after
// giveUp. An HTTP status other than 200 and 302, or a body that is not the
// file, is a failure at once: no client retries what a server answered.
type retryingClient struct {
	dnsAddr string
	port    string
	content []byte
	dns     *dns.Client
	http    *http.Client
	giveUp  time.Duration
	log     *answerLog // every answer the client got, nil for none
	// pin, when set, is an address the client's resolver has cached for
	// the group: tried first, before the rest of dnsd's answer (which is
	// why a mirror gets more than its share, and redirects).
	pin string

	fetches, retried, tries, hops, hopFailed atomic.Int64
}

// retryingGiveUp is how long a retryingClient tries before it gives up.
const retryingGiveUp = 15 * time.Second

func newRetryingClient(dnsAddr, port string, content []byte, log *answerLog) *retryingClient {
	dialer := &net.Dialer{Timeout: time.Second}
	return &retryingClient{
		dnsAddr: dnsAddr, port: port, content: content, log: log, giveUp: retryingGiveUp,
		dns: &dns.Client{Net: "udp", Timeout: time.Second},
		http: &http.Client{
			Transport: &http.Transport{
				Proxy: nil, DialContext: dialer.DialContext, DisableCompression: true,
				MaxIdleConnsPerHost: 4, ResponseHeaderTimeout: 5 * time.Second,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       10 * time.Second,
		},
	}
}

func (c *retryingClient) close() { c.http.CloseIdleConnections() }

// errTransport marks a failure that the client model retries.
var errTransport = errors.New("transport")

// get fetches path from addr with the Host header host and returns the
// status and, for a 302, the Location; transport failures wrap
// errTransport.
func (c *retryingClient) get(ctx context.Context, addr, host, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(addr, c.port)+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = net.JoinHostPort(host, c.port)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%w: %v", errTransport, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(2*len(c.content)+4096)))
	if err != nil {
		return 0, "", fmt.Errorf("%w: reading the body: %v", errTransport, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		if !bytes.Equal(body, c.content) {
			return 0, "", fmt.Errorf("GET %s from %s: %d bytes that are not the file", path, addr, len(body))
		}
		return http.StatusOK, "", nil
	case http.StatusFound:
		return http.StatusFound, resp.Header.Get("Location"), nil
	}
	return 0, "", fmt.Errorf("GET %s from %s (Host %s): status %s", path, addr, host, resp.Status)
}

// resolve asks dnsd for host's addresses, noting the group's answers.
func (c *retryingClient) resolve(host string) ([]string, error) {
	m := new(dns.Msg).SetQuestion(dns.Fqdn(host), dns.TypeA)
	sent := time.Now()
	r, _, err := c.dns.Exchange(m, c.dnsAddr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %s, no address", host, dns.RcodeToString[r.Rcode])
	}
	if c.log != nil && strings.EqualFold(host, faultGroup) {
		c.log.note(sent, out)
	}
	return out, nil
}

// fetch gets path as the client model says and returns nil once it has
// the file.
func (c *retryingClient) fetch(ctx context.Context, path string) error {
	c.fetches.Add(1)
	deadline := time.Now().Add(c.giveUp)
	var last error
	for round := 0; ; round++ {
		if round > 0 {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("gave up after %d rounds: %w", round, last)
			}
			if round == 1 {
				c.retried.Add(1)
			}
			time.Sleep(100 * time.Millisecond) // a client's back-off, not a wait for the test
		}
		addrs, err := c.resolve(faultGroup)
		if err != nil {
			last = err
			continue
		}
		if c.pin != "" {
			rest := []string{c.pin}
			for _, a := range addrs {
				if a != c.pin {
					rest = append(rest, a)
				}
			}
			addrs = rest
		}
		for _, a := range addrs {
			c.tries.Add(1)
			code, loc, err := c.get(ctx, a, faultGroup, path)
			if errors.Is(err, errTransport) {
				last = err
				continue
			}
			if err != nil {
				return err
			}
			if code == http.StatusOK {
				return nil
			}
			// One hop to the sibling's own host name.
			c.hops.Add(1)
			u, err := url.Parse(loc)
			if err != nil || u.Port() != c.port {
				return fmt.Errorf("302 from %s to %q: not a sibling on port %s", a, loc, c.port)
			}
			to, err := c.resolve(u.Hostname())
			if err != nil {
				return fmt.Errorf("302 from %s to %q: %w", a, loc, err)
			}
			code, loc, err = c.get(ctx, to[0], u.Hostname(), u.RequestURI())
			if errors.Is(err, errTransport) {
				c.hopFailed.Add(1)
				last = err
				continue
			}
			if err != nil {
				return err
			}
			if code != http.StatusOK {
				return fmt.Errorf("302 from %s was redirected again, to %q", a, loc)
			}
			return nil
		}
	}
}

// retryingLoad is what a load of retryingClients did.
type retryingLoad struct {
	done    chan struct{}
	gaveUp  atomic.Int64 // fetches that found no mirror serving the file for giveUp
	mu      sync.Mutex
	errs    []string
	clients []*retryingClient
}

func (r *retryingLoad) wait() { <-r.done }

func (r *retryingLoad) fail(err error) {
	r.gaveUp.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 5 {
		r.errs = append(r.errs, err.Error())
	}
}

func (r *retryingLoad) firstErrors() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errs, "; ")
}

// sum adds up a counter over the clients.
func (r *retryingLoad) sum(f func(*retryingClient) *atomic.Int64) int64 {
	var n int64
	for _, c := range r.clients {
		n += f(c).Load()
	}
	return n
}

// runClients runs n clients, each fetching path again and again with a
// pause of pause between fetches, until ctx is done.
func runRetryingClients(ctx context.Context, n int, pause time.Duration, path string, mk func() *retryingClient) *retryingLoad {
	r := &retryingLoad{done: make(chan struct{})}
	var wg sync.WaitGroup
	for range n {
		c := mk()
		r.clients = append(r.clients, c)
		wg.Go(func() {
			defer c.close()
			for ctx.Err() == nil {
				if err := c.fetch(context.WithoutCancel(ctx), path); err != nil {
					r.fail(err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(r.done)
	}()
	return r
}

// goroutines reads go_goroutines from the /metrics of an admin address.
func goroutines(admin string) (float64, error) { return metric(admin, "go_goroutines") }

// faultContent is the file the scenarios' mirrors serve.
func faultContent() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 8192; i++ {
		fmt.Fprintf(&b, "line %04d of the file the fault scenarios fetch\n", i)
	}
	return b.Bytes()[:8192]
}

// faultMirrorProc is a mirror process of a fault scenario, on its own
// loopback address and the scenario's shared port.
type faultMirrorProc struct {
	*proc
	name, ip, admin string
}

// startFaultMirrors starts one mirror per member on the member's address
// and one shared port, serving root; cfg returns the config of each (its
// listen address given). Should the port be taken on one of the
// addresses, it starts them all again on another.
func startFaultMirrors(t *testing.T, dir string, members []faultMember, cfg func(m faultMember, listen string) string) (string, []*faultMirrorProc) {
	t.Helper()
	return onePort(t, len(members), func(i int, port string) (*faultMirrorProc, string, error) {
		return launchFaultMirror(t, dir, members[i], net.JoinHostPort(members[i].ip, port), cfg)
	})
}

// launchFaultMirror starts the mirror of m listening on listen and returns
// the public address it reported; an error when it exits before it is
// ready (the address taken).
func launchFaultMirror(t *testing.T, dir string, m faultMember, listen string, cfg func(faultMember, string) string) (*faultMirrorProc, string, error) {
	t.Helper()
	mp, err := launchMirror(t, writeFile(t, dir, m.name+".yaml", cfg(m, listen)), m.name)
	if err != nil {
		return nil, "", fmt.Errorf("on %s: %w", listen, err)
	}
	return &faultMirrorProc{proc: mp.proc, name: m.name, ip: m.ip, admin: mp.Admin}, mp.HTTP, nil
}

// memberStates returns the state of each member in dnsd's group view.
func memberStates(admin string) (map[string]string, error) {
	v, err := groupView(admin)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, m := range v.Members {
		out[m.Name] = m.State
	}
	return out, nil
}

// waitMembersUp waits until dnsd at admin has every one of members up.
func waitMembersUp(t *testing.T, admin string, members []faultMember) {
	t.Helper()
	probetest.Until(t, 15*time.Second, func() string {
		st, err := memberStates(admin)
		if err != nil {
			return err.Error()
		}
		for _, m := range members {
			if st[m.name] != "up" {
				return fmt.Sprintf("members %v, want all up", st)
			}
		}
		return ""
	})
}

// faultView is the part of dnsd's group view the fault scenarios read.
type faultView struct {
	Members []struct {
		Name   string `json:"name"`
		State  string `json:"state"`
		Source string `json:"source"`
	} `json:"members"`
}

// groupView returns dnsd's group view (GROUP-QUERY).
func groupView(admin string) (faultView, error) {
	c := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	var v faultView
	resp, err := c.Get("http://" + admin + "/v1/groups/" + faultGroup)
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET the group view: %s", resp.Status)
	}
	return v, jsonDecode(resp.Body, &v)
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// readFileT returns the content of a file the test wrote.
func readFileT(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
