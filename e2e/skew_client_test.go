package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// skewResolver is one recursive resolver of the population: it asks dnsd
// with its own EDNS Client Subnet and caches the answer for exactly the
// TTL it got.
type skewResolver struct {
	id  int
	ecs netip.Prefix
	dns string // the dnsd it asks (of an NS set: one of the nodes)

	mu      sync.Mutex
	ip      string
	expires time.Time
	answers []skewAnswer // every answer it got, in order
}

// skewAnswer is one answer a resolver got.
type skewAnswer struct {
	at  time.Time // when it got it
	ip  string
	ttl uint32
}

// lookup returns the cached address, asking dnsd when the TTL has run
// out. Clients of the resolver wait for its query, as they would.
func (r *skewResolver) lookup() (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ip != "" && time.Now().Before(r.expires) {
		return r.ip, nil
	}
	ip, ttl, err := skewQueryA(r.dns, skewGroup, r.ecs)
	if err != nil {
		return "", err
	}
	now := time.Now()
	r.ip, r.expires = ip, now.Add(time.Duration(ttl)*time.Second)
	r.answers = append(r.answers, skewAnswer{at: now, ip: ip, ttl: ttl})
	return ip, nil
}

// history returns a copy of the answers the resolver got, in order.
func (r *skewResolver) history() []skewAnswer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.answers)
}

// heldIn returns the answers of a history that a resolver held at some
// time in [from, to]: the one it held at from, if any, and every one it
// got after from and not after to.
func heldIn(h []skewAnswer, from, to time.Time) []skewAnswer {
	var held []skewAnswer
	for k, a := range h {
		if a.at.After(to) {
			break
		}
		if !a.at.After(from) && k+1 < len(h) && !h[k+1].at.After(from) {
			continue // replaced by from
		}
		held = append(held, a)
	}
	return held
}

// skewQueryA asks dnsd at addr for name's A record, with ecs as the EDNS
// Client Subnet when it is valid, and returns the first address and its TTL.
func skewQueryA(addr, name string, ecs netip.Prefix) (string, uint32, error) {
	m := new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA)
	m.RecursionDesired = false
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(1232)
	if ecs.IsValid() {
		opt.Option = append(opt.Option, &dns.EDNS0_SUBNET{
			Code: dns.EDNS0SUBNET, Family: 1, SourceNetmask: uint8(ecs.Bits()),
			Address: net.IP(ecs.Addr().AsSlice()),
		})
	}
	m.Extra = append(m.Extra, opt)
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return "", 0, fmt.Errorf("query %s A: %w", name, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return "", 0, fmt.Errorf("query %s A: %s", name, dns.RcodeToString[r.Rcode])
	}
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String(), a.Hdr.Ttl, nil
		}
	}
	return "", 0, fmt.Errorf("query %s A: no address in %v", name, r.Answer)
}

// skewClient is the clients of all the resolvers: it sends each request
// to the address its resolver has with Host: the group name, and follows
// one 302 to a sibling's own host name, which it resolves through dnsd.
// It never retries: a request that does not end in a 2xx is failed, so
// its "0 failed" means every answer and every redirect was served at the
// first try.
type skewClient struct {
	dnsAddr   string
	port      string
	heavy     float64 // resolver 0's share of the requests; 0: all alike
	hc        *http.Client
	resolvers []*skewResolver
	ipIndex   map[string]int // mirror address → index
	hostIndex map[string]int // mirror host name → index

	hostMu  sync.Mutex
	hostIPs map[string]string // member host names resolved so far

	served     []atomic.Int64 // final 2xx per mirror
	completed  atomic.Int64   // requests done, whatever the outcome
	redirected atomic.Int64
	twice      atomic.Int64
	failed     atomic.Int64
	late       atomic.Int64

	failMu  sync.Mutex
	failure string
}

func newSkewClient(cl *skewCluster, heavy float64) *skewClient {
	c := &skewClient{
		dnsAddr: cl.dnsd[0].Addr,
		heavy:   heavy,
		port:    cl.port,
		hc: &http.Client{
			Transport: &http.Transport{
				Proxy:               nil, // loopback only, whatever the environment says
				MaxIdleConnsPerHost: skewWorkers,
				DisableCompression:  true,
				IdleConnTimeout:     30 * time.Second,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Timeout:       10 * time.Second,
		},
		ipIndex:   make(map[string]int),
		hostIndex: make(map[string]int),
		hostIPs:   make(map[string]string),
		served:    make([]atomic.Int64, len(cl.mirrors)),
	}
	for i, m := range cl.mirrors {
		c.ipIndex[m.ip] = i
		c.hostIndex[m.host] = i
	}
	for k := range skewResolvers {
		// 100.64.k.0/24: global unicast and not private, so dnsd trusts it
		// as ECS and each resolver is its own scope.
		// Of an NS set, resolver k asks node k mod n: the heavy one and
		// every other light one the first node.
		c.resolvers = append(c.resolvers, &skewResolver{id: k, ecs: netip.PrefixFrom(netip.AddrFrom4([4]byte{100, 64, byte(k), 0}), 24),
			dns: cl.dnsd[k%len(cl.dnsd)].Addr})
	}
	return c
}

func (c *skewClient) fail(format string, args ...any) {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	if c.failure == "" {
		c.failure = fmt.Sprintf(format, args...)
	}
}

func (c *skewClient) firstFailure() string {
	c.failMu.Lock()
	defer c.failMu.Unlock()
	return c.failure
}

// memberIP resolves a member's own host name through dnsd (no ECS), once.
func (c *skewClient) memberIP(host string) (string, error) {
	c.hostMu.Lock()
	defer c.hostMu.Unlock()
	if ip, ok := c.hostIPs[host]; ok {
		return ip, nil
	}
	ip, _, err := skewQueryA(c.dnsAddr, host, netip.Prefix{})
	if err != nil {
		return "", err
	}
	c.hostIPs[host] = ip
	return ip, nil
}

// get sends GET path to ip:port with the Host header host and returns the
// status code and Location; it reads the body to the end.
func (c *skewClient) get(ctx context.Context, ip, host, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, c.port)+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return 0, "", err
	}
	if resp.StatusCode/100 == 2 && n != skewFileSize {
		return 0, "", fmt.Errorf("%s from %s: %d bytes, want %d", resp.Status, ip, n, skewFileSize)
	}
	return resp.StatusCode, resp.Header.Get("Location"), nil
}

// request is one client request of resolver k's population.
func (c *skewClient) request(k int) {
	defer c.completed.Add(1)
	// Not the generator's context: a request that was started finishes.
	ctx := context.Background()
	ip, err := c.resolvers[k].lookup()
	if err != nil {
		c.failed.Add(1)
		c.fail("resolver %d: %v", k, err)
		return
	}
	from := c.ipIndex[ip]
	code, loc, err := c.get(ctx, ip, net.JoinHostPort(skewGroup, c.port), skewPath)
	switch {
	case err != nil:
		c.failed.Add(1)
		c.fail("GET %s on %s: %v", skewPath, ip, err)
		return
	case code/100 == 2:
		c.served[from].Add(1)
		return
	case code != http.StatusFound:
		c.failed.Add(1)
		c.fail("GET %s on %s: status %d", skewPath, ip, code)
		return
	}
	c.redirected.Add(1)
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "http" || u.RequestURI() != skewPath || u.Port() != c.port {
		c.failed.Add(1)
		c.fail("302 from %s to %q: want http://<member host>:%s%s", ip, loc, c.port, skewPath)
		return
	}
	to, ok := c.hostIndex[u.Hostname()]
	if !ok || to == from {
		c.failed.Add(1)
		c.fail("302 from %s to %q: not a sibling's own host name", ip, loc)
		return
	}
	ip2, err := c.memberIP(u.Hostname())
	if err != nil {
		c.failed.Add(1)
		c.fail("resolving %s: %v", u.Hostname(), err)
		return
	}
	if c.ipIndex[ip2] != to {
		c.failed.Add(1)
		c.fail("dnsd resolved %s to %s", u.Hostname(), ip2)
		return
	}
	code, loc2, err := c.get(ctx, ip2, u.Host, u.RequestURI())
	switch {
	case err != nil:
		c.failed.Add(1)
		c.fail("GET %s: %v", loc, err)
	case code/100 == 3:
		c.twice.Add(1)
		c.fail("GET %s (redirected from %s) was redirected again, %d to %q", loc, ip, code, loc2)
	case code/100 != 2:
		c.failed.Add(1)
		c.fail("GET %s (redirected from %s): status %d", loc, ip, code)
	default:
		c.served[to].Add(1)
	}
}

// skewGen is a running load generator.
type skewGen struct {
	start           time.Time // when the pacer started
	issued, dropped atomic.Int64
	done            chan struct{} // closed when the pacer stops
	workers         sync.WaitGroup
}

// wait returns when the pacer has stopped and every request has finished.
func (g *skewGen) wait() {
	<-g.done
	g.workers.Wait()
}

// drive offers rate requests per second until ctx is done: a pacer
// schedules them on a 10 ms ticker (as many as are due, so a late tick
// catches up), each from resolver 0 with probability c.heavy and from one
// of the others at random otherwise (from any at random when c.heavy is
// 0), and a fixed pool of workers
// sends them. A request that finds every worker busy and the queue full is
// dropped, one that starts more than skewMaxLag after its time is late;
// both are counted, so a test process that can not keep up says so.
func (c *skewClient) drive(ctx context.Context, rate float64) *skewGen {
	g := &skewGen{start: time.Now(), done: make(chan struct{})}
	type job struct {
		k  int
		at time.Time
	}
	jobs := make(chan job, skewQueue)
	for range skewWorkers {
		g.workers.Add(1)
		go func() {
			defer g.workers.Done()
			for j := range jobs {
				if time.Since(j.at) > skewMaxLag {
					c.late.Add(1)
				}
				c.request(j.k)
			}
		}()
	}
	go func() {
		defer close(g.done)
		defer close(jobs)
		rnd := rand.New(rand.NewPCG(1, 2))
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			due := int64(time.Since(g.start).Seconds() * rate)
			for n := g.issued.Load(); n < due; n++ {
				k := 0
				switch {
				case c.heavy == 0:
					k = rnd.IntN(len(c.resolvers))
				case rnd.Float64() >= c.heavy:
					k = 1 + rnd.IntN(len(c.resolvers)-1)
				}
				at := g.start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
				select {
				case jobs <- job{k: k, at: at}:
				default:
					g.dropped.Add(1)
				}
				g.issued.Add(1)
			}
		}
	}()
	return g
}
