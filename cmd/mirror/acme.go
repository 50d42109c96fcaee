package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/cmd/internal/certs"
	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/acmeclient"
	"github.com/transmirror/transmirror/probe/api"
)

// Bounds of the DNS-01 answer through dnsd.
const (
	// acmeServedTimeout bounds the wait until the dnsd that took a
	// challenge lists it (it serves it then).
	acmeServedTimeout = 10 * time.Second
	// acmeServedPoll is the time between two looks at the list.
	acmeServedPoll = 50 * time.Millisecond
)

// acmeManager returns the manager of the certificate of tls.acme, which
// installs it first in set (the stored one at once); nil without
// tls.acme. dnsd answers the challenges, reached with client.
func acmeManager(cfg *mirror.Config, set *certs.Set, client *http.Client, logger *slog.Logger, reg prometheus.Registerer) (*acmeclient.Manager, error) {
	a := cfg.TLS.ACME
	if !a.Enabled() {
		return nil, nil
	}
	tr, err := certs.Transport(a.CAFile)
	if err != nil {
		return nil, fmt.Errorf("mirror: tls.acme.ca_file: %w", err)
	}
	solver, err := newDNSDSolver(cfg, client)
	if err != nil {
		return nil, err
	}
	m, err := acmeclient.New(acmeclient.Options{
		Directory: a.Directory, Email: a.Email, HTTP: &http.Client{Transport: tr}, Dir: a.Dir,
		Names: acmeNames(cfg), Solver: solver, Install: set.StoreManaged, Lifetime: a.TestLifetime,
		Logger: logger, Registerer: reg,
	})
	if err != nil {
		return nil, fmt.Errorf("mirror: tls.acme: %w", err)
	}
	return m, nil
}

// acmeNames are the names of the ACME certificate: the group's and the
// host's (once when they are one).
func acmeNames(cfg *mirror.Config) []string {
	names := []string{strings.TrimSuffix(cfg.Group, ".")}
	if h := strings.TrimSuffix(cfg.Host, "."); !strings.EqualFold(h, names[0]) {
		names = append(names, h)
	}
	return names
}

// dnsdSolver answers DNS-01 through dnsd's admin API: it publishes a
// value on the first dnsd of dnsd.urls that takes it (the nodes of an NS
// set share the values through etcd, so one is enough), waits until
// that dnsd lists it, and removes it there.
type dnsdSolver struct {
	clients       []*api.Client
	group, member string

	mu    sync.Mutex
	where map[api.ACMEChallenge]*api.Client // who took each value
}

var _ acmeclient.Solver = (*dnsdSolver)(nil)

func newDNSDSolver(cfg *mirror.Config, client *http.Client) (*dnsdSolver, error) {
	s := &dnsdSolver{group: cfg.Group, member: cfg.Member, where: make(map[api.ACMEChallenge]*api.Client)}
	for _, u := range cfg.DNSD.URLs {
		c, err := api.NewClient(u, api.ClientOptions{HTTP: client, Secret: []byte(cfg.DNSD.Secret)})
		if err != nil {
			return nil, fmt.Errorf("mirror: dnsd: %w", err)
		}
		s.clients = append(s.clients, c)
	}
	return s, nil
}

// Publish publishes on the first dnsd that takes the value and returns
// once it lists it.
func (s *dnsdSolver) Publish(ctx context.Context, name, value string) error {
	ch := api.ACMEChallenge{Name: name, Value: value}
	var errs []error
	for i, c := range s.clients {
		if _, err := c.PublishChallenge(ctx, s.group, s.member, ch); err != nil {
			errs = append(errs, fmt.Errorf("dnsd.urls[%d]: %w", i, err))
			continue
		}
		s.mu.Lock()
		s.where[ch] = c
		s.mu.Unlock()
		return s.served(ctx, c, ch)
	}
	return errors.Join(errs...)
}

// served waits until c lists ch as one of the member's live values.
func (s *dnsdSolver) served(ctx context.Context, c *api.Client, ch api.ACMEChallenge) error {
	ctx, cancel := context.WithTimeout(ctx, acmeServedTimeout)
	defer cancel()
	t := time.NewTicker(acmeServedPoll)
	defer t.Stop()
	for {
		l, err := c.Challenges(ctx)
		if err == nil && slices.ContainsFunc(l.Challenges, func(x api.ACMELive) bool {
			return sameName(x.Group, s.group) && x.Member == s.member && x.Value == ch.Value && sameName(x.Name, ch.Name)
		}) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mirror: dnsd does not list the challenge of %s: %w", ch.Name, errors.Join(err, ctx.Err()))
		case <-t.C:
		}
	}
}

// Remove removes the value where it was published (from every dnsd when
// that is not known).
func (s *dnsdSolver) Remove(ctx context.Context, name, value string) error {
	ch := api.ACMEChallenge{Name: name, Value: value}
	s.mu.Lock()
	c, ok := s.where[ch]
	delete(s.where, ch)
	s.mu.Unlock()
	targets := s.clients
	if ok {
		targets = []*api.Client{c}
	}
	var errs []error
	for _, c := range targets {
		if _, err := c.RemoveChallenge(ctx, s.group, s.member, ch); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// sameName reports whether a and b are one DNS name (case and the final
// dot aside): dnsd lists its names fully qualified.
func sameName(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}
