package probetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throw-away certificate authority for one test: it signs leaf
// certificates for 127.0.0.1, ::1 and the names asked for, written as
// PEM files.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// File is its certificate, PEM, in the test's temporary directory.
	File string
	// Pool trusts it (and nothing else).
	Pool *x509.CertPool
}

// NewCA makes a CA named name and writes its certificate to dir/name.crt.
func NewCA(t testing.TB, dir, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, File: filepath.Join(dir, name+".crt"), Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	writePEM(t, ca.File, "CERTIFICATE", der)
	return ca
}

// Leaf makes a server certificate signed by ca with common name cn, for
// 127.0.0.1, ::1 and localhost, and writes it and its key to
// dir/cn.crt and dir/cn.key, whose paths it returns.
func (ca *CA) Leaf(t testing.TB, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	return ca.LeafFor(t, dir, cn, "localhost")
}

// LeafFor is Leaf for the DNS names names (and 127.0.0.1, ::1).
func (ca *CA) LeafFor(t testing.TB, dir, cn string, names ...string) (certFile, keyFile string) {
	t.Helper()
	return ca.sign(t, dir, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    names,
	})
}

// ClientLeaf makes a client certificate signed by ca with common name cn
// (extended key usage clientAuth, which a server that asks for client
// certificates wants: etcd refuses a server's), and writes it and its
// key to dir/cn.crt and dir/cn.key, whose paths it returns.
func (ca *CA) ClientLeaf(t testing.TB, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	return ca.sign(t, dir, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// sign signs tmpl, valid for a day, with a new key, and writes the
// certificate and the key to dir/CN.crt and dir/CN.key.
func (ca *CA) sign(t testing.TB, dir string, tmpl *x509.Certificate) (certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cn := tmpl.Subject.CommonName
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", kder)
	return certFile, keyFile
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Client returns an HTTP client that trusts only ca, opens a new
// connection for every request (so each sees the certificate served at
// that moment) and gives up after 5 s.
func (ca *CA) Client() *http.Client {
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12},
		},
	}
}

// Served returns the common name of the certificate that the TLS server
// at addr presents now, verified against ca.
func (ca *CA) Served(t testing.TB, addr string) string {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}
