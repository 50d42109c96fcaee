// Package certs serves TLS certificates that can be replaced while the
// listener runs, one (Keypair, the admin listeners') or a set chosen by
// the client's SNI (Set, the mirror's public HTTPS listeners): the key
// pairs are loaded (and checked) first, then swapped in with one atomic
// store, so a handshake sees the old ones or the new ones, never a mix,
// and a pair that does not load changes nothing.
package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
)

// Keypair is the certificate that a TLS listener presents, swapped by
// Store. Its zero value has none; build it with New.
type Keypair struct {
	cur atomic.Pointer[tls.Certificate]
}

// New returns a Keypair that presents c.
func New(c *tls.Certificate) *Keypair {
	k := &Keypair{}
	k.Store(c)
	return k
}

// Load reads the PEM certificate chain at certFile and the PEM private
// key at keyFile and checks that they form a pair and that the leaf
// parses. The error names the files as given.
func Load(certFile, keyFile string) (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: key pair %s, %s: %w", certFile, keyFile, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certs: %s: %w", certFile, err)
		}
	}
	return &c, nil
}

// Store makes c the certificate of every handshake from now on;
// connections already established keep theirs.
func (k *Keypair) Store(c *tls.Certificate) { k.cur.Store(c) }

// Current returns the certificate presented now (nil before a Store).
func (k *Keypair) Current() *tls.Certificate { return k.cur.Load() }

// ErrNoCertificate: a handshake came before any certificate was stored.
var ErrNoCertificate = errors.New("certs: no certificate")

// ServerConfig returns the server side TLS settings that present k's
// current certificate: TLS 1.2 or later, HTTP/1.1.
func (k *Keypair) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := k.cur.Load(); c != nil {
				return c, nil
			}
			return nil, ErrNoCertificate
		},
	}
}

// ClientConfig returns client side TLS settings (TLS 1.2 or later) that
// trust the PEM certificates in caFile besides the system's roots; with
// caFile "" the system's roots only.
func ClientConfig(caFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return conf, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("certs: CA file: %w", err)
	}
	pool, err := RootsWith(pem)
	if err != nil {
		return nil, fmt.Errorf("certs: CA file %s: %w", caFile, err)
	}
	conf.RootCAs = pool
	return conf, nil
}

// RootsWith returns the system's roots and the PEM certificates of pem;
// nil (the system's roots, as crypto/tls takes a nil pool) for an empty
// pem.
func RootsWith(pem []byte) (*x509.CertPool, error) {
	if len(pem) == 0 {
		return nil, nil
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}

// Transport returns an HTTP transport like http.DefaultTransport whose
// TLS settings are ClientConfig(caFile)'s.
func Transport(caFile string) (*http.Transport, error) {
	conf, err := ClientConfig(caFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = conf
	return tr, nil
}
