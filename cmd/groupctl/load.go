package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/miekg/dns"
)

// Hard limits of groupctl load: it is a demo and test tool for a group
// running on this machine, never a load tool against anyone else.
const (
	// maxLoadRate is the highest request rate, per second.
	maxLoadRate = 2000
	// maxLoadDuration is the longest run.
	maxLoadDuration = 5 * time.Minute
	// maxLoadConcurrency is the most requests in flight.
	maxLoadConcurrency = 256
	// maxLoadFiles is the most files -paths spreads over.
	maxLoadFiles = 100000
	// loadRequestTimeout bounds one HTTP exchange, redirect included.
	loadRequestTimeout = 10 * time.Second
	// loadDNSTimeout bounds one DNS query.
	loadDNSTimeout = 2 * time.Second
	// loadNegativeTTL is how long a failed lookup is remembered.
	loadNegativeTTL = time.Second
)

// errNotLoopback is returned for any destination outside 127.0.0.0/8 and ::1.
var errNotLoopback = errors.New("not a loopback address: groupctl load only talks to 127.0.0.0/8 and ::1 (it is a demo tool, not a load tool)")

const loadUsage = `usage: groupctl load [-dns HOST:PORT] [-subnet PREFIX] [-rate N] [-duration D]
      [-concurrency N] [-paths PATTERN -files N] [-progress D] URL

Sends GET requests at a steady rate to URL (on the group name, e.g.
http://www.example.test:8080/pub/file-0001.bin) for a bounded time,
resolving host names through the DNS server -dns like a caching resolver
(with an EDNS Client Subnet when -subnet is given), follows at most one
redirect, and prints what each mirror did. Only loopback destinations
are allowed; rate <= 2000/s, duration <= 5m.
`

// loadOptions are the checked settings of groupctl load.
type loadOptions struct {
	dns         netip.AddrPort
	subnet      netip.Prefix // invalid: no ECS option
	rate        float64
	duration    time.Duration
	concurrency int
	paths       string // fmt pattern with one integer verb; "" uses the URL's path
	files       int
	progress    time.Duration
	seed        uint64
	target      *url.URL
}

// parseLoad parses and bounds the arguments of groupctl load.
func parseLoad(args []string, stderr io.Writer) (*loadOptions, error) {
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, loadUsage); fs.PrintDefaults() }
	dnsAddr := fs.String("dns", "127.0.0.1:5300", "DNS server HOST:PORT that resolves the URL's host name (loopback only)")
	subnet := fs.String("subnet", "", "EDNS Client Subnet to send, e.g. 198.51.100.0/24 (the clients' region)")
	o := &loadOptions{}
	fs.Float64Var(&o.rate, "rate", 50, fmt.Sprintf("requests per second (at most %d)", maxLoadRate))
	fs.DurationVar(&o.duration, "duration", 10*time.Second, fmt.Sprintf("how long to send (at most %s)", maxLoadDuration))
	fs.IntVar(&o.concurrency, "concurrency", 16, fmt.Sprintf("requests in flight at most (at most %d)", maxLoadConcurrency))
	fs.StringVar(&o.paths, "paths", "", "path pattern with one integer verb, e.g. /pub/file-%04d.bin: spread requests over files 1..-files")
	fs.IntVar(&o.files, "files", 200, "how many files -paths spreads over")
	fs.DurationVar(&o.progress, "progress", 5*time.Second, "time between progress lines (0: none)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the file and address choices")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) != 1 {
		return nil, usageError{"usage: groupctl load [flags] URL (see groupctl load -h)"}
	}
	var errs []string
	bad := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if o.dns, err = netip.ParseAddrPort(*dnsAddr); err != nil {
		bad("-dns %q: want IP:PORT", *dnsAddr)
	} else if !o.dns.Addr().Unmap().IsLoopback() {
		bad("-dns %s: %v", o.dns.Addr(), errNotLoopback)
	}
	if *subnet != "" {
		p, err := netip.ParsePrefix(*subnet)
		if err != nil {
			bad("-subnet %q: want a prefix such as 198.51.100.0/24", *subnet)
		} else {
			o.subnet = p.Masked()
		}
	}
	if !(o.rate > 0 && o.rate <= maxLoadRate) {
		bad("-rate %g: want more than 0 and at most %d per second", o.rate, maxLoadRate)
	}
	if !(o.duration > 0 && o.duration <= maxLoadDuration) {
		bad("-duration %s: want more than 0 and at most %s", o.duration, maxLoadDuration)
	}
	if o.concurrency < 1 || o.concurrency > maxLoadConcurrency {
		bad("-concurrency %d: want 1..%d", o.concurrency, maxLoadConcurrency)
	}
	if o.files < 1 || o.files > maxLoadFiles {
		bad("-files %d: want 1..%d", o.files, maxLoadFiles)
	}
	if o.progress < 0 {
		bad("-progress %s: want 0 (off) or more", o.progress)
	}
	if o.paths != "" {
		if p := fmt.Sprintf(o.paths, 1); !strings.HasPrefix(o.paths, "/") || strings.Contains(p, "%!") || p == fmt.Sprintf(o.paths, 2) {
			bad("-paths %q: want a path starting with / and holding one integer verb, e.g. /pub/file-%%04d.bin", o.paths)
		}
	}
	u, err := url.Parse(pos[0])
	switch {
	case err != nil:
		bad("URL %q: %v", pos[0], err)
	case u.Scheme != "http":
		bad("URL %q: want an http:// URL", pos[0])
	case u.Hostname() == "":
		bad("URL %q: no host", pos[0])
	case u.User != nil:
		bad("URL %q: must not carry user information", pos[0])
	default:
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && !a.Unmap().IsLoopback() {
			bad("URL host %s: %v", a, errNotLoopback)
		}
		o.target = u
	}
	if len(errs) > 0 {
		return nil, usageError{strings.Join(errs, "\n")}
	}
	return o, nil
}

// load is groupctl load: see loadUsage.
func (g *global) load(ctx context.Context, args []string, stderr io.Writer) error {
	o, err := parseLoad(args, stderr)
	if err != nil {
		return err
	}
	return runLoad(ctx, o, g.stdout)
}

// runLoad sends the load o describes and prints progress lines and the
// final table to w. A destination that is not loopback stops the run
// with an error.
func runLoad(ctx context.Context, o *loadOptions, w io.Writer) error {
	l := newLoader(o)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.abort = cancel

	start := time.Now()
	jobs := make(chan *url.URL, o.concurrency)
	var wg sync.WaitGroup
	for range o.concurrency {
		wg.Go(func() {
			for u := range jobs {
				l.one(ctx, u)
			}
		})
	}
	fmt.Fprintf(w, "load: %g requests/s for %s to %s (DNS %s", o.rate, o.duration, o.target, o.dns)
	if o.subnet.IsValid() {
		fmt.Fprintf(w, ", client subnet %s", o.subnet)
	}
	fmt.Fprintln(w, ")")

	pace := time.NewTimer(0)
	defer pace.Stop()
	var tick <-chan time.Time
	if o.progress > 0 {
		t := time.NewTicker(o.progress)
		defer t.Stop()
		tick = t.C
	}
	end := start.Add(o.duration)
	rng := rand.New(rand.NewPCG(o.seed, 0x6c6f6164))
send:
	for i := 0; ; i++ {
		next := start.Add(time.Duration(float64(i) / o.rate * float64(time.Second)))
		if !next.Before(end) {
			break
		}
		pace.Reset(time.Until(next))
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				break send
			case <-tick:
				l.printProgress(w, time.Since(start))
			case <-pace.C:
				waiting = false
			}
		}
		u := *o.target
		if o.paths != "" {
			u.Path, u.RawPath = fmt.Sprintf(o.paths, 1+rng.IntN(o.files)), ""
		}
		select {
		case jobs <- &u:
			l.sent.Add(1)
		default:
			l.skipped.Add(1) // every worker busy: the mirrors are slower than the rate
		}
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return l.printTable(w, elapsed)
}

// mirrorStats is what one mirror (one address and port) did.
type mirrorStats struct {
	names      map[string]bool
	served     int64
	redirected int64
	errors     int64
	bytes      int64
}

// loader sends the requests of one run and counts what happened.
type loader struct {
	o      *loadOptions
	res    *resolver
	client *http.Client
	abort  context.CancelCauseFunc

	sent, skipped atomic.Int64 // requests handed to a worker; not sent, every worker busy

	mu            sync.Mutex
	mirrors       map[string]*mirrorStats
	dnsErrors     int64
	followed      int64 // served after one redirect
	twice         int64 // redirected again after a redirect
	statuses      map[string]int64
	firstFailure  string
	rng           *rand.Rand
	lastProgress  int64
	totalFinished int64
}

func newLoader(o *loadOptions) *loader {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: loopbackOnly}
	tr := &http.Transport{
		Proxy:               nil, // never through a proxy from the environment
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: o.concurrency,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return &loader{
		o:   o,
		res: newResolver(o.dns.String(), o.subnet),
		client: &http.Client{
			Transport:     tr,
			Timeout:       loadRequestTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		mirrors:  make(map[string]*mirrorStats),
		statuses: make(map[string]int64),
		rng:      rand.New(rand.NewPCG(o.seed, 0x61646472)),
	}
}

// loopbackOnly is the dialer's last check: whatever the resolver said,
// no socket connects outside loopback.
func loopbackOnly(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("load: dial %s: %w", address, err)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return fmt.Errorf("load: dial %s: %s %w", network, ap.Addr(), errNotLoopback)
	}
	return nil
}

// one sends one request for u and follows at most one redirect.
func (l *loader) one(ctx context.Context, u *url.URL) {
	rctx, cancel := context.WithTimeout(ctx, loadRequestTimeout)
	defer cancel()
	hop, err := l.fetch(rctx, u)
	if err != nil {
		l.failed(ctx, hop, err)
		return
	}
	l.record(hop, false)
	if hop.location == nil {
		return
	}
	next, err := l.fetch(rctx, hop.location)
	switch {
	case err != nil:
		l.failed(ctx, next, err)
	case next.location != nil:
		l.record(next, false)
		l.mu.Lock()
		l.twice++
		l.mu.Unlock()
		l.failed(ctx, next, fmt.Errorf("GET %s (redirected from %s) was redirected again, to %s", hop.location, hop.mirror, next.location))
	default:
		l.record(next, true)
	}
}

// hop is one HTTP exchange with one mirror.
type hop struct {
	mirror   string // IP:port, "" when resolution failed
	name     string // the host name it was reached on
	status   int
	bytes    int64
	location *url.URL // a redirect's target, nil otherwise
	dnsErr   bool
}

// fetch resolves u's host name through the DNS server, sends GET to one
// of its addresses with u's Host, and reads the whole answer.
func (l *loader) fetch(ctx context.Context, u *url.URL) (hop, error) {
	h := hop{name: u.Hostname()}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	addrs, err := l.res.lookup(ctx, u.Hostname())
	if err != nil {
		h.dnsErr = true
		return h, err
	}
	l.mu.Lock()
	a := addrs[l.rng.IntN(len(addrs))]
	l.mu.Unlock()
	if !a.Unmap().IsLoopback() {
		err := fmt.Errorf("load: %s resolved to %s: %w", u.Hostname(), a, errNotLoopback)
		l.abort(err)
		return h, err
	}
	pn, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return h, fmt.Errorf("load: %s: bad port %q", u, port)
	}
	h.mirror = netip.AddrPortFrom(a.Unmap(), uint16(pn)).String()
	direct := *u
	direct.Host = h.mirror
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, direct.String(), nil)
	if err != nil {
		return h, err
	}
	req.Host = u.Host
	req.Header.Set("User-Agent", "groupctl-load")
	resp, err := l.client.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	h.status = resp.StatusCode
	h.bytes, err = io.Copy(io.Discard, resp.Body)
	if err != nil {
		return h, fmt.Errorf("GET %s on %s: reading the body: %w", u, h.mirror, err)
	}
	switch {
	case resp.StatusCode/100 == 2:
		return h, nil
	case slices.Contains([]int{301, 302, 303, 307, 308}, resp.StatusCode):
		loc, err := resp.Location()
		if err != nil {
			return h, fmt.Errorf("GET %s on %s: %s without a usable Location: %w", u, h.mirror, resp.Status, err)
		}
		if loc.Scheme != "http" {
			return h, fmt.Errorf("GET %s on %s: redirect to %s: only http is followed", u, h.mirror, loc)
		}
		h.location = loc
		return h, nil
	}
	return h, fmt.Errorf("GET %s on %s: %s", u, h.mirror, resp.Status)
}

// stats returns the entry of mirror m; l.mu is held.
func (l *loader) stats(h hop) *mirrorStats {
	s := l.mirrors[h.mirror]
	if s == nil {
		s = &mirrorStats{names: make(map[string]bool)}
		l.mirrors[h.mirror] = s
	}
	s.names[h.name] = true
	return s
}

// record counts a successful exchange: served, or a redirect given.
func (l *loader) record(h hop, afterRedirect bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.stats(h)
	s.bytes += h.bytes
	if h.location != nil {
		s.redirected++
		l.statuses[strconv.Itoa(h.status)]++
		return
	}
	s.served++
	l.totalFinished++
	l.statuses[strconv.Itoa(h.status)]++
	if afterRedirect {
		l.followed++
	}
}

// failed counts a failed exchange; requests cut short by the end of the
// run (Ctrl-C) are not failures of the mirrors.
func (l *loader) failed(ctx context.Context, h hop, err error) {
	if ctx.Err() != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.totalFinished++
	if l.firstFailure == "" {
		l.firstFailure = err.Error()
	}
	switch {
	case h.dnsErr:
		l.dnsErrors++
		l.statuses["dns error"]++
	case h.status != 0:
		l.stats(h).errors++
		l.statuses[strconv.Itoa(h.status)]++
	default:
		l.stats(h).errors++
		l.statuses["no answer"]++
	}
}

// printProgress prints one line with the counts so far.
func (l *loader) printProgress(w io.Writer, elapsed time.Duration) {
	l.mu.Lock()
	var served, redirected, errs int64
	for _, s := range l.mirrors {
		served += s.served
		redirected += s.redirected
		errs += s.errors
	}
	errs += l.dnsErrors
	done := l.totalFinished
	rate := float64(done-l.lastProgress) / l.o.progress.Seconds()
	l.lastProgress = done
	l.mu.Unlock()
	fmt.Fprintf(w, "%6.1fs  sent %d  served %d  redirected %d  errors %d  not sent %d  (%.0f/s)\n",
		elapsed.Seconds(), l.sent.Load(), served, redirected, errs, l.skipped.Load(), rate)
}

// printTable prints what each mirror did and the totals.
func (l *loader) printTable(w io.Writer, elapsed time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.mirrors))
	for k := range l.mirrors {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := netip.ParseAddrPort(keys[i])
		b, _ := netip.ParseAddrPort(keys[j])
		return a.Compare(b) < 0
	})
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tSERVED\tREDIRECTED\tERRORS\tMB\tREACHED AS")
	var served, redirected, errs int64
	for _, k := range keys {
		s := l.mirrors[k]
		names := make([]string, 0, len(s.names))
		for n := range s.names {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%s\n", k, s.served, s.redirected, s.errors, float64(s.bytes)/1e6, strings.Join(names, " "))
		served += s.served
		redirected += s.redirected
		errs += s.errors
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t\t\n", served, redirected, errs+l.dnsErrors)
	if err := tw.Flush(); err != nil {
		return err
	}
	sent := l.sent.Load()
	fmt.Fprintf(w, "\n%d requests in %.1fs (%.1f/s); %d served after one redirect, %d redirected twice; %d DNS queries",
		sent, elapsed.Seconds(), float64(sent)/elapsed.Seconds(), l.followed, l.twice, l.res.queries())
	if l.dnsErrors > 0 {
		fmt.Fprintf(w, ", %d DNS failures", l.dnsErrors)
	}
	if n := l.skipped.Load(); n > 0 {
		fmt.Fprintf(w, "; %d not sent (all %d workers busy: the mirrors were slower than the rate)", n, l.o.concurrency)
	}
	fmt.Fprintln(w)
	codes := make([]string, 0, len(l.statuses))
	for c := range l.statuses {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%s: %d", c, l.statuses[c]))
	}
	fmt.Fprintf(w, "answers: %s\n", strings.Join(parts, ", "))
	if l.firstFailure != "" {
		fmt.Fprintf(w, "first failure: %s\n", l.firstFailure)
	}
	return nil
}

// resolver asks one DNS server for A (then AAAA) records and caches each
// answer for its TTL, as a recursive resolver would.
type resolver struct {
	server string
	subnet netip.Prefix
	client *dns.Client
	now    func() time.Time

	mu    sync.Mutex
	cache map[string]*dnsEntry
	count int64
}

// dnsEntry is one cached lookup; ready is closed once it is filled in.
type dnsEntry struct {
	ready   chan struct{}
	addrs   []netip.Addr
	err     error
	expires time.Time
}

func newResolver(server string, subnet netip.Prefix) *resolver {
	return &resolver{
		server: server, subnet: subnet, now: time.Now,
		client: &dns.Client{Net: "udp", Timeout: loadDNSTimeout},
		cache:  make(map[string]*dnsEntry),
	}
}

// queries returns how many DNS queries were sent.
func (r *resolver) queries() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count
}

// lookup returns the addresses of host: an IP literal as it is, a name
// from the cache or from the server (one query at a time per name).
func (r *resolver) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	if a, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{a}, nil
	}
	name := dns.Fqdn(strings.ToLower(host))
	r.mu.Lock()
	e := r.cache[name]
	if e == nil || (isClosed(e.ready) && !r.now().Before(e.expires)) {
		e = &dnsEntry{ready: make(chan struct{})}
		r.cache[name] = e
		r.mu.Unlock()
		e.addrs, e.expires, e.err = r.query(ctx, name)
		close(e.ready)
		return e.addrs, e.err
	}
	r.mu.Unlock()
	select { // another request is asking: share its answer
	case <-e.ready:
		return e.addrs, e.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// query asks for A records of name, then AAAA when there are none, and
// returns them with the time the answer expires.
func (r *resolver) query(ctx context.Context, name string) ([]netip.Addr, time.Time, error) {
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		addrs, ttl, err := r.ask(ctx, name, qt)
		if err != nil {
			return nil, r.now().Add(loadNegativeTTL), err
		}
		if len(addrs) > 0 {
			return addrs, r.now().Add(ttl), nil
		}
	}
	return nil, r.now().Add(loadNegativeTTL), fmt.Errorf("dns: %s: no A or AAAA records", strings.TrimSuffix(name, "."))
}

func (r *resolver) ask(ctx context.Context, name string, qt uint16) ([]netip.Addr, time.Duration, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qt)
	m.RecursionDesired = false
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(1232)
	if r.subnet.IsValid() {
		e := &dns.EDNS0_SUBNET{Code: dns.EDNS0SUBNET, SourceNetmask: uint8(r.subnet.Bits()), Address: r.subnet.Addr().AsSlice()}
		e.Family = 1
		if r.subnet.Addr().Is6() {
			e.Family = 2
		}
		opt.Option = append(opt.Option, e)
	}
	m.Extra = append(m.Extra, opt)
	r.mu.Lock()
	r.count++
	r.mu.Unlock()
	resp, _, err := r.client.ExchangeContext(ctx, m, r.server)
	if err == nil && resp.Truncated {
		tcp := &dns.Client{Net: "tcp", Timeout: loadDNSTimeout}
		resp, _, err = tcp.ExchangeContext(ctx, m, r.server)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("dns: %s %s @%s: %w", strings.TrimSuffix(name, "."), dns.TypeToString[qt], r.server, err)
	}
	if resp.Rcode != dns.RcodeSuccess {
		return nil, 0, fmt.Errorf("dns: %s %s @%s: %s", strings.TrimSuffix(name, "."), dns.TypeToString[qt], r.server, dns.RcodeToString[resp.Rcode])
	}
	var addrs []netip.Addr
	ttl := uint32(1<<31 - 1)
	for _, rr := range resp.Answer {
		var ip net.IP
		switch v := rr.(type) {
		case *dns.A:
			ip = v.A
		case *dns.AAAA:
			ip = v.AAAA
		default:
			ttl = min(ttl, rr.Header().Ttl) // a CNAME on the way bounds it too
			continue
		}
		if a, ok := netip.AddrFromSlice(ip); ok {
			addrs = append(addrs, a.Unmap())
			ttl = min(ttl, rr.Header().Ttl)
		}
	}
	return addrs, time.Duration(ttl) * time.Second, nil
}
