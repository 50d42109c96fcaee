package certs

import (
	"crypto/tls"
	"sync"
	"sync/atomic"
)

// Set is the certificates that a TLS listener chooses from by the
// client's SNI: a managed one first (the ACME certificate, replaced by
// StoreManaged), then the files' (replaced whole by Store), each part
// swapped alone: a handshake sees the old set or the new one, never a
// mix. Its zero value has none; build it with NewSet.
type Set struct {
	cur atomic.Pointer[[]*tls.Certificate] // what handshakes read

	mu      sync.Mutex // serializes the writers
	managed *tls.Certificate
	files   []*tls.Certificate
}

// NewSet returns a Set that presents cs.
func NewSet(cs []*tls.Certificate) *Set {
	s := &Set{}
	s.Store(cs)
	return s
}

// Files is one certificate chain and its private key, PEM files.
type Files struct {
	CertFile, KeyFile string
}

// LoadAll loads every pair of fs (see Load), in order; the first that
// does not load is the error, naming its files, and nothing is returned.
func LoadAll(fs []Files) ([]*tls.Certificate, error) {
	cs := make([]*tls.Certificate, 0, len(fs))
	for _, f := range fs {
		c, err := Load(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// Store makes cs the certificates of every handshake from now on, after
// the managed one if there is one (a copy of the slice is kept);
// connections already established keep theirs.
func (s *Set) Store(cs []*tls.Certificate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files = append([]*tls.Certificate(nil), cs...)
	s.publish()
}

// StoreManaged makes c the first certificate of every handshake from now
// on, before the files' that Store keeps (nil removes it); connections
// already established keep theirs.
func (s *Set) StoreManaged(c *tls.Certificate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.managed = c
	s.publish()
}

// publish stores the managed certificate and the files' for the
// handshakes; s.mu is held.
func (s *Set) publish() {
	cp := make([]*tls.Certificate, 0, len(s.files)+1)
	if s.managed != nil {
		cp = append(cp, s.managed)
	}
	cp = append(cp, s.files...)
	s.cur.Store(&cp)
}

// Current returns the certificates presented now, in their order (nil
// before a Store). The caller must not modify them.
func (s *Set) Current() []*tls.Certificate {
	if p := s.cur.Load(); p != nil {
		return *p
	}
	return nil
}

// Choose returns the certificate for hello: the first of the set that
// supports it (its names cover the SNI name, its key the client's
// signature schemes and curves; tls.ClientHelloInfo.SupportsCertificate),
// the first of the set when none does or the client sent no SNI, as
// crypto/tls chooses from tls.Config.Certificates.
func (s *Set) Choose(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	cs := s.Current()
	if len(cs) == 0 {
		return nil, ErrNoCertificate
	}
	if hello.ServerName != "" {
		for _, c := range cs {
			if hello.SupportsCertificate(c) == nil {
				return c, nil
			}
		}
	}
	return cs[0], nil
}

// ServerConfig returns the server side TLS settings of a public HTTPS
// listener that presents s's current certificates: TLS 1.2 or later
// (1.3 preferred, crypto/tls's default), ALPN h2 then http/1.1, the
// certificate chosen by Choose.
func (s *Set) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: s.Choose,
	}
}

// Names returns the DNS names that c is for (its leaf's subject
// alternative names), else its common name; none without a leaf.
func Names(c *tls.Certificate) []string {
	if c == nil || c.Leaf == nil {
		return nil
	}
	if len(c.Leaf.DNSNames) > 0 {
		return c.Leaf.DNSNames
	}
	if c.Leaf.Subject.CommonName != "" {
		return []string{c.Leaf.Subject.CommonName}
	}
	return nil
}
