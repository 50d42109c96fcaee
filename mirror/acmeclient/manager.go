package acmeclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Errors of the package.
var (
	// ErrOptions is a Manager's options that can not work (no directory,
	// dir, names, solver or install, an unknown challenge type), or a
	// challenge given to a Solver of another type.
	ErrOptions = errors.New("acmeclient: bad options")
	// ErrStore is a failure to read or write the directory's files.
	ErrStore = errors.New("acmeclient: store")
	// ErrOrder is an order that did not end in a certificate.
	ErrOrder = errors.New("acmeclient: order")
)

// Results of the orders metric, its bounded label values.
const (
	ResultIssued = "issued" // a new certificate installed
	ResultFailed = "failed" // an order that failed (retried with backoff)
)

// Options configure a Manager.
type Options struct {
	Directory string       // the CA's directory URL
	Email     string       // the account's contact; "" for none
	HTTP      *http.Client // talks to the CA (default http.DefaultClient)
	Dir       string       // where the keys and the certificate are kept
	Names     []string     // what the certificate is for, the first its subject
	// Challenge is the type answered (default ChallengeDNS01): of each
	// authorization the Manager takes the challenge of this type, and
	// Solver makes it answerable.
	Challenge string
	Solver    Solver
	// Install is given each certificate to serve: the stored one in New,
	// then every renewal. It must not block.
	Install func(*tls.Certificate)
	// Lifetime, when > 0, renews as if a certificate lived at most this
	// long from its NotBefore (tests: a CA's certificates live years).
	Lifetime   time.Duration
	RetryBase  time.Duration    // default DefaultRetryBase
	RetryMax   time.Duration    // default DefaultRetryMax
	Clock      func() time.Time // default time.Now
	Rand       *mrand.Rand      // the jitter (default: seeded at random)
	Logger     *slog.Logger     // default: discard
	Registerer prometheus.Registerer
}

// Manager keeps the certificate of Options.Names current; Run renews it.
type Manager struct {
	o      Options
	store  store
	orders *prometheus.CounterVec

	mu      sync.Mutex
	cur     *tls.Certificate
	renewAt time.Time
	account *accountClient // made on the first order
}

// New returns a Manager of o, its metric registered on o.Registerer,
// with the stored certificate installed when it is valid and covers the
// names.
func New(o Options) (*Manager, error) {
	if o.Directory == "" || o.Dir == "" || len(o.Names) == 0 || o.Solver == nil || o.Install == nil {
		return nil, fmt.Errorf("%w: directory, dir, names, solver and install are required", ErrOptions)
	}
	o = o.withDefaults()
	if !validChallenge(o.Challenge) {
		return nil, fmt.Errorf("%w: challenge %q", ErrOptions, o.Challenge)
	}
	m := &Manager{o: o, store: store{dir: o.Dir}, orders: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "transmirror", Subsystem: "mirror", Name: "acme_orders_total",
		Help: "ACME orders of the public HTTPS certificate by result (issued; failed, retried with backoff) and challenge type (the configured one).",
	}, []string{"result", "challenge"})}
	for _, r := range []string{ResultIssued, ResultFailed} {
		m.orders.WithLabelValues(r, o.Challenge)
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(m.orders); err != nil {
			return nil, fmt.Errorf("acmeclient: register metrics: %w", err)
		}
	}
	c, err := m.store.certificate(o.Names, o.Clock())
	if err != nil {
		return nil, err
	}
	if c != nil {
		m.install(c)
	}
	return m, nil
}

func (o Options) withDefaults() Options {
	if o.HTTP == nil {
		o.HTTP = http.DefaultClient
	}
	if o.Challenge == "" {
		o.Challenge = ChallengeDNS01
	}
	if o.RetryBase <= 0 {
		o.RetryBase = DefaultRetryBase
	}
	if o.RetryMax <= 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Rand == nil {
		o.Rand = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Current returns the certificate served now, nil before the first.
func (m *Manager) Current() *tls.Certificate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// install makes c the certificate served and draws its renewal time.
func (m *Manager) install(c *tls.Certificate) {
	notAfter := c.Leaf.NotAfter
	if m.o.Lifetime > 0 && c.Leaf.NotBefore.Add(m.o.Lifetime).Before(notAfter) {
		notAfter = c.Leaf.NotBefore.Add(m.o.Lifetime)
	}
	m.mu.Lock()
	m.cur, m.renewAt = c, RenewAt(c.Leaf.NotBefore, notAfter, m.o.Rand.Float64())
	m.mu.Unlock()
	m.o.Install(c)
}

// Run orders a certificate when there is none, and a new one at each
// renewal time, until ctx ends (nil then). A failed order is counted,
// logged at Warn and retried after Backoff; the certificate served stays.
func (m *Manager) Run(ctx context.Context) error {
	failures := 0
	for {
		t := time.NewTimer(m.wait(failures))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		err := m.renew(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			failures++
			m.orders.WithLabelValues(ResultFailed, m.o.Challenge).Inc()
			m.o.Logger.Warn("acme order failed", "names", m.o.Names, "failures", failures, "err", err)
		default:
			failures = 0
			m.orders.WithLabelValues(ResultIssued, m.o.Challenge).Inc()
		}
	}
}

// wait is how long Run waits before its next order: the backoff after
// failures, else until the renewal time (0 without a certificate).
func (m *Manager) wait(failures int) time.Duration {
	if failures > 0 {
		return Backoff(failures, m.o.RetryBase, m.o.RetryMax, m.o.Rand)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		return 0
	}
	return max(m.renewAt.Sub(m.o.Clock()), 0)
}

// renew orders a certificate, stores it and installs it.
func (m *Manager) renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultOrderTimeout)
	defer cancel()
	start := m.o.Clock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOrder, err)
	}
	chain, err := m.order(ctx, key)
	if err != nil {
		m.mu.Lock()
		m.account = nil // registered again next time: a CA that lost it (a test CA's restart) is not asked in vain
		m.mu.Unlock()
		return err
	}
	c, err := tls.X509KeyPair(pemChain(chain), pemKey(key))
	if err != nil {
		return fmt.Errorf("%w: the CA's certificate: %w", ErrOrder, err)
	}
	if err := m.store.saveCertificate(key, chain); err != nil {
		return err
	}
	m.install(&c)
	m.o.Logger.Info("acme certificate issued", "names", m.o.Names, "not_after", c.Leaf.NotAfter,
		"renew_at", m.renewAtTime(), "seconds", m.o.Clock().Sub(start).Seconds())
	return nil
}

func (m *Manager) renewAtTime() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renewAt
}
