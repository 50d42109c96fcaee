package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// clientCA signs the client certificates that a secure etcd accepts
// (--trusted-ca-file). It is not probetest.CA because that one's leaves
// are for servers only (extended key usage serverAuth), which etcd
// refuses from a client ("certificate specifies an incompatible key
// usage"); the server's certificate does come from probetest.CA.
type clientCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its certificate, PEM
}

// newClientCA makes a client CA and writes its certificate to
// dir/clients-ca.crt.
func newClientCA(t testing.TB, dir string) *clientCA {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "etcdtest clients"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	ca := &clientCA{file: filepath.Join(dir, "clients-ca.crt")}
	ca.cert, ca.key = ca.create(t, tmpl, nil, nil, ca.file, "")
	return ca
}

// leaf makes a client certificate with common name cn (etcd takes it for
// the user name of a request that carries no token) and writes it and
// its key to dir/cn.crt and dir/cn.key.
func (ca *clientCA) leaf(t testing.TB, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	certFile, keyFile = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	ca.create(t, tmpl, ca.cert, ca.key, certFile, keyFile)
	return certFile, keyFile
}

// create signs tmpl (valid for a day) with parent and its key (nil: by
// itself) and writes the certificate to certFile and, unless keyFile is
// "", its new key to keyFile.
func (ca *clientCA) create(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey,
	certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)); err != nil {
		t.Fatal(err)
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	if keyFile != "" {
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		writePEM(t, keyFile, "PRIVATE KEY", kder)
	}
	return cert, key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
