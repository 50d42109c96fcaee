package acmeclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/acme"
)

// ErrNoChallenge is a handshake on ALPN acme-tls/1 for a name that has
// no TLS-ALPN-01 challenge published.
var ErrNoChallenge = errors.New("acmeclient: no tls-alpn-01 challenge for the name")

// TLSALPN01 is the Solver of TLS-ALPN-01: a table of name → challenge
// certificate that ServerConfig presents on ALPN acme-tls/1 (RFC 8737).
// Its zero value is ready.
type TLSALPN01 struct {
	mu    sync.Mutex
	certs map[string]*tls.Certificate // by lower-case name
}

var _ Solver = (*TLSALPN01)(nil)

// Publish presents ch.Cert for ch.Name on acme-tls/1 from now on.
func (s *TLSALPN01) Publish(_ context.Context, ch Challenge) error {
	if ch.Type != ChallengeTLSALPN01 || ch.Cert == nil || ch.Name == "" {
		return fmt.Errorf("%w: tls-alpn-01 solver: challenge %s for %q", ErrOptions, ch.Type, ch.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.certs == nil {
		s.certs = make(map[string]*tls.Certificate)
	}
	s.certs[strings.ToLower(ch.Name)] = ch.Cert
	return nil
}

// Remove stops presenting ch.Cert (a newer one for the name stays).
func (s *TLSALPN01) Remove(_ context.Context, ch Challenge) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name := strings.ToLower(ch.Name); s.certs[name] == ch.Cert {
		delete(s.certs, name)
	}
	return nil
}

// Len is the number of names with a challenge certificate.
func (s *TLSALPN01) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.certs)
}

// ServerConfig returns a clone of base that answers TLS-ALPN-01: a
// ClientHello that offers ALPN acme-tls/1 gets a config of its own that
// negotiates only acme-tls/1 and presents the challenge certificate of
// its SNI name (the handshake fails without one), so its connection
// never carries HTTP (net/http closes a connection of a protocol it
// does not serve without reading it). Every other ClientHello gets base.
func (s *TLSALPN01) ServerConfig(base *tls.Config) *tls.Config {
	c := base.Clone()
	challenge := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{acme.ALPNProto}, GetCertificate: s.certificate}
	c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if !slices.Contains(hello.SupportedProtos, acme.ALPNProto) {
			return nil, nil
		}
		return challenge, nil
	}
	return c
}

// certificate is the challenge certificate for hello's SNI name.
func (s *TLSALPN01) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.certs[strings.ToLower(hello.ServerName)]; ok {
		return c, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNoChallenge, hello.ServerName)
}
