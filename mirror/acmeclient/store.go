package acmeclient

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The files of the directory.
const (
	accountFile     = "account.key"     // the account's ECDSA P-256 key, PEM
	certificateFile = "certificate.pem" // the certificate's key, then its chain, leaf first, PEM
)

// store is the directory of the account key and the certificate.
type store struct{ dir string }

// accountKey returns the stored account key, or makes and stores one.
func (s store) accountKey() (crypto.Signer, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, accountFile))
	if err == nil {
		b, _ := pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("%w: %s: no PEM key", ErrStore, accountFile)
		}
		k, err := x509.ParseECPrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrStore, accountFile, err)
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	return k, s.write(accountFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

// certificate returns the stored certificate when it covers every one of
// names and is valid at now; nil (no error) when there is none or it does
// not (a new one is ordered).
func (s store) certificate(names []string, now time.Time) (*tls.Certificate, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, certificateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStore, err)
	}
	c, err := tls.X509KeyPair(data, data)
	if err != nil {
		return nil, nil // a torn or foreign file: order again
	}
	if !usable(c.Leaf, names, now) {
		return nil, nil
	}
	return &c, nil
}

// usable reports whether leaf covers every one of names and is valid at now.
func usable(leaf *x509.Certificate, names []string, now time.Time) bool {
	if leaf == nil || now.Before(leaf.NotBefore) || !now.Before(leaf.NotAfter) {
		return false
	}
	for _, n := range names {
		if leaf.VerifyHostname(n) != nil {
			return false
		}
	}
	return true
}

// saveCertificate writes key and chain (DER, leaf first) as one file.
func (s store) saveCertificate(key *ecdsa.PrivateKey, chain [][]byte) error {
	return s.write(certificateFile, append(pemKey(key), pemChain(chain)...))
}

// write writes data to the file name of the directory whole or not at
// all, mode 0600: a temporary file beside it, fsync, rename over it,
// fsync of the directory (which is made, 0700, if missing).
func (s store) write(name string, data []byte) error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	tmp, err := os.CreateTemp(s.dir, "."+name+".tmp-*") // 0600
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStore, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(s.dir, name))
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrStore, name, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
