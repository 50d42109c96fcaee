package probe

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// Reason names the phase of a probe that failed first.
type Reason string

// The reasons a probe fails, in the order of the phases.
const (
	ReasonNone     Reason = ""         // the probe succeeded
	ReasonRequest  Reason = "request"  // the target is not a usable URL
	ReasonDNS      Reason = "dns"      // resolving the host failed
	ReasonConnect  Reason = "connect"  // the TCP connection failed
	ReasonTLS      Reason = "tls"      // the TLS handshake failed
	ReasonResponse Reason = "response" // the connection failed before the response headers
	ReasonStatus   Reason = "status"   // the status was not 200
	ReasonBody     Reason = "body"     // reading the body failed, or it was too large
	ReasonDecode   Reason = "decode"   // the body is not a well-formed report
	ReasonValidate Reason = "validate" // the report's values are invalid
	ReasonStale    Reason = "stale"    // a push-only member's pushes went stale
)

// Phases are the durations of a probe's phases; a phase that did not happen
// (a reused connection has no DNS, connect or TLS) is zero.
type Phases struct {
	// DNS is the time resolving the host.
	DNS time.Duration
	// Connect is the time establishing the TCP connection.
	Connect time.Duration
	// TLS is the time of the TLS handshake.
	TLS time.Duration
	// FirstByte is the time from the start to the first response byte.
	FirstByte time.Duration
	// Total is the time from the start to the body read (or the failure).
	Total time.Duration
}

// Result is the outcome of one probe.
type Result struct {
	// Success is true when a valid report was read.
	Success bool
	// Report is the report read, when Success.
	Report Report
	// Status is the HTTP status, 0 when no response arrived.
	Status int
	// Reason is the phase that failed first, ReasonNone on success.
	Reason Reason
	// Err is the first failure, wrapping ErrProbe; nil on success.
	Err error
	// Phases are the durations of the probe's phases.
	Phases Phases
	// ConnReused is true when the probe went over a kept-alive connection.
	ConnReused bool
}

// ClientOptions configure NewClient.
type ClientOptions struct {
	// MaxIdlePerHost is how many idle connections are kept per host:port
	// (default 16).
	MaxIdlePerHost int
	// Roots verify https URLs (nil: the system's roots).
	Roots *x509.CertPool
	// Resolver resolves the host names of probe URLs (nil: the system's).
	Resolver *net.Resolver
	// Public, when set, says why an address is not one that the probes
	// of a PublicOnly member may connect to ("is private (RFC 1918)"), ""
	// when it is one. It is asked at dial time about the address the
	// host name resolved to, so a name that resolves or rebinds to a
	// private address is refused as one written as an IP address.
	Public func(netip.Addr) string
}

// NewClient returns the http.Client a Watcher shares among its probes: keep
// alives on, one idle connection kept for up to MaxIdlePerHost probes to
// the same host:port (several members may share a host), no proxy, no
// compression, no redirects followed, and no timeouts of its own — each
// probe's deadline comes from its context.
func NewClient(o ClientOptions) *http.Client {
	if o.MaxIdlePerHost <= 0 {
		o.MaxIdlePerHost = 16
	}
	transport := func(control func(context.Context, string, string, syscall.RawConn) error) *http.Transport {
		d := &net.Dialer{KeepAlive: 30 * time.Second, Resolver: o.Resolver, ControlContext: control}
		return &http.Transport{
			Proxy:                  nil,
			DialContext:            d.DialContext,
			TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: o.Roots},
			MaxIdleConns:           0, // bounded by hosts × MaxIdleConnsPerHost
			MaxIdleConnsPerHost:    o.MaxIdlePerHost,
			IdleConnTimeout:        90 * time.Second,
			DisableCompression:     true,
			MaxResponseHeaderBytes: 64 << 10,
		}
	}
	var rt http.RoundTripper = transport(nil)
	if o.Public != nil {
		// Two pools, so that a connection made for a probe that may go
		// anywhere is never reused by one limited to public addresses.
		rt = &publicTransport{open: rt.(*http.Transport), public: transport(func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %q: %w", ErrNotPublic, address, err)
			}
			if why := o.Public(ap.Addr().Unmap()); why != "" {
				return fmt.Errorf("%w: %s %s", ErrNotPublic, ap.Addr().Unmap(), why)
			}
			return nil
		})}
	}
	return &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// publicTransport sends the probes of PublicOnly members (their context
// marked with publicOnlyKey) through public, whose dialer refuses what
// ClientOptions.Public does not accept, and the others through open.
type publicTransport struct {
	open, public *http.Transport
}

func (p *publicTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if only, _ := r.Context().Value(publicOnlyKey{}).(bool); only {
		return p.public.RoundTrip(r)
	}
	return p.open.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of both pools.
func (p *publicTransport) CloseIdleConnections() {
	p.open.CloseIdleConnections()
	p.public.CloseIdleConnections()
}

// publicOnlyKey marks the context of a probe of a PublicOnly member.
type publicOnlyKey struct{}

// PublicOnly returns ctx marked so that a request made with it through a
// client of NewClient connects only to the addresses that
// ClientOptions.Public accepts, as the probes of a PublicOnly member do
// (for other requests to such a member, such as dnsd's fetch of its
// content index).
func PublicOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, publicOnlyKey{}, true)
}

// traceState records which phases of a request happened; the dial may call
// back after client.Do returned, hence the mutex.
type traceState struct {
	mu                            sync.Mutex
	start                         time.Time
	dnsStart, connStart, tlsStart time.Time
	dnsDone, connDone, tlsDone    bool
	dnsErr, connErr, tlsErr       error
	gotConn, reused               bool
	phases                        Phases
}

func (t *traceState) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) {
			t.mu.Lock()
			t.dnsStart = time.Now()
			t.mu.Unlock()
		},
		DNSDone: func(i httptrace.DNSDoneInfo) {
			t.mu.Lock()
			t.dnsDone, t.dnsErr, t.phases.DNS = true, i.Err, time.Since(t.dnsStart)
			t.mu.Unlock()
		},
		ConnectStart: func(string, string) {
			t.mu.Lock()
			if t.connStart.IsZero() {
				t.connStart = time.Now()
			}
			t.mu.Unlock()
		},
		ConnectDone: func(_, _ string, err error) {
			t.mu.Lock()
			// With several addresses the dialer tries each; keep the
			// first success, else the last error.
			if !t.connDone || t.connErr != nil {
				t.connDone, t.connErr, t.phases.Connect = true, err, time.Since(t.connStart)
			}
			t.mu.Unlock()
		},
		TLSHandshakeStart: func() {
			t.mu.Lock()
			t.tlsStart = time.Now()
			t.mu.Unlock()
		},
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			t.mu.Lock()
			t.tlsDone, t.tlsErr, t.phases.TLS = true, err, time.Since(t.tlsStart)
			t.mu.Unlock()
		},
		GotConn: func(i httptrace.GotConnInfo) {
			t.mu.Lock()
			t.gotConn, t.reused = true, i.Reused
			t.mu.Unlock()
		},
		GotFirstResponseByte: func() {
			t.mu.Lock()
			t.phases.FirstByte = time.Since(t.start)
			t.mu.Unlock()
		},
	}
}

// failedPhase says where a request that got no response failed.
func (t *traceState) failedPhase(err error) Reason {
	t.mu.Lock()
	defer t.mu.Unlock()
	var dnsErr *net.DNSError
	switch {
	case t.gotConn:
		return ReasonResponse
	case t.tlsErr != nil || (!t.tlsStart.IsZero() && !t.tlsDone):
		return ReasonTLS
	case t.connDone && t.connErr == nil && !t.tlsStart.IsZero():
		return ReasonTLS
	case t.connErr != nil || (!t.connStart.IsZero() && !t.connDone):
		return ReasonConnect
	case t.dnsErr != nil || (!t.dnsStart.IsZero() && !t.dnsDone) || errors.As(err, &dnsErr):
		return ReasonDNS
	}
	return ReasonConnect
}

// ProbeLoad fetches and validates the load report at target (a /v1/load
// URL) with client (shared, see NewClient). The deadline comes only from ctx; the body is read up
// to MaxReportSize. The Result names the first failure and the phases'
// durations; logger gets one Debug line per probe.
func ProbeLoad(ctx context.Context, client *http.Client, target string, logger *slog.Logger) Result {
	ts := &traceState{start: time.Now()}
	res := probeLoad(ctx, client, target, ts)
	ts.mu.Lock()
	res.Phases = ts.phases
	res.ConnReused = ts.reused
	ts.mu.Unlock()
	res.Phases.Total = time.Since(ts.start)
	if logger != nil && logger.Enabled(ctx, slog.LevelDebug) {
		logger.LogAttrs(ctx, slog.LevelDebug, "load probe",
			slog.String("target", target), slog.Bool("success", res.Success),
			slog.String("reason", string(res.Reason)), slog.Int("status", res.Status),
			slog.Duration("duration", res.Phases.Total), slog.Any("err", res.Err))
	}
	return res
}

func probeLoad(ctx context.Context, client *http.Client, target string, ts *traceState) Result {
	fail := func(res Result, reason Reason, err error) Result {
		res.Reason, res.Err = reason, fmt.Errorf("%w: %s: %w", ErrProbe, reason, err)
		return res
	}
	if client == nil {
		return fail(Result{}, ReasonRequest, errors.New("no http client"))
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, ts.trace()), http.MethodGet, target, nil)
	if err != nil {
		return fail(Result{}, ReasonRequest, err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fail(Result{}, ReasonRequest, fmt.Errorf("scheme %q: want http or https", req.URL.Scheme))
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fail(Result{}, ts.failedPhase(err), err)
	}
	defer resp.Body.Close()
	res := Result{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		// Drain a little so the connection can be kept alive.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return fail(res, ReasonStatus, fmt.Errorf("status %d", resp.StatusCode))
	}
	if resp.ContentLength > MaxReportSize {
		return fail(res, ReasonBody, fmt.Errorf("%w: content length %d", ErrReportTooLarge, resp.ContentLength))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxReportSize+1))
	if err != nil {
		return fail(res, ReasonBody, err)
	}
	if len(body) > MaxReportSize {
		return fail(res, ReasonBody, fmt.Errorf("%w: more than %d bytes", ErrReportTooLarge, MaxReportSize))
	}
	rep, err := DecodeReport(bytes.NewReader(body), MaxReportSize)
	switch {
	case errors.Is(err, ErrInvalidReport):
		return fail(res, ReasonValidate, err)
	case err != nil:
		return fail(res, ReasonDecode, err)
	}
	res.Success, res.Report = true, rep
	return res
}
