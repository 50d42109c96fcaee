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
// installs it first in set (the stored one at once), with its Solver;
// nils without tls.acme. dnsd, reached with client, answers dns-01; the
// public listeners answer the other types (see acmeSolver).
func acmeManager(cfg *mirror.Config, set *certs.Set, client *http.Client, logger *slog.Logger, reg prometheus.Registerer) (*acmeclient.Manager, acmeclient.Solver, error) {
	a := cfg.TLS.ACME
	if !a.Enabled() {
		return nil, nil, nil
	}
	tr, err := certs.Transport(a.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: tls.acme.ca_file: %w", err)
	}
	solver, err := acmeSolver(cfg, client)
	if err != nil {
		return nil, nil, err
	}
	m, err := acmeclient.New(acmeclient.Options{
		Directory: a.Directory, Email: a.Email, HTTP: &http.Client{Transport: tr}, Dir: a.Dir,
		Names: acmeNames(cfg), Challenge: a.Challenge, Solver: solver, Install: set.StoreManaged, Lifetime: a.TestLifetime,
		Logger: logger, Registerer: reg,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("mirror: tls.acme: %w", err)
	}
	return m, solver, nil
}

// acmeSolver is the Solver of tls.acme.challenge: dnsd's for dns-01; for
// http-01 the table that the plain listeners serve (wired.front), for
// tls-alpn-01 the certificates that tls.listen presents on acme-tls/1
// (wired.httpsConfig).
func acmeSolver(cfg *mirror.Config, client *http.Client) (acmeclient.Solver, error) {
	switch cfg.TLS.ACME.Challenge {
	case mirror.ChallengeHTTP01:
		return &acmeclient.HTTP01{}, nil
	case mirror.ChallengeTLSALPN01:
		return &acmeclient.TLSALPN01{}, nil
	}
	return newDNSDSolver(cfg, client)
}

// acmeNames are the names of the ACME certificate: by dns-01 the group's
// and the host's (once when they are one); by http-01 and tls-alpn-01
// the host's alone, as the CA reaches any member for the group's name.
func acmeNames(cfg *mirror.Config) []string {
	host := strings.TrimSuffix(cfg.Host, ".")
	if cfg.TLS.ACME.Challenge == mirror.ChallengeHTTP01 || cfg.TLS.ACME.Challenge == mirror.ChallengeTLSALPN01 {
		return []string{host}
	}
	names := []string{strings.TrimSuffix(cfg.Group, ".")}
	if !strings.EqualFold(host, names[0]) {
		names = append(names, host)
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

// Publish publishes ch's value on the first dnsd that takes it and
// returns once it lists it.
func (s *dnsdSolver) Publish(ctx context.Context, a acmeclient.Challenge) error {
	ch := api.ACMEChallenge{Name: a.Name, Value: a.Value}
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

// Remove removes ch's value where it was published (from every dnsd
// when that is not known).
func (s *dnsdSolver) Remove(ctx context.Context, a acmeclient.Challenge) error {
	ch := api.ACMEChallenge{Name: a.Name, Value: a.Value}
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
