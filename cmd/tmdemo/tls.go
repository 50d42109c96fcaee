package main

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
	"time"
)

// demoCertLife is how long the demo's certificates are valid: far longer
// than any demo runs, far shorter than anything that could be mistaken
// for a real one.
const demoCertLife = 7 * 24 * time.Hour

// writeCerts writes the demo's own CA (l.CA, which curl --cacert trusts)
// and, for each site, a certificate of its front end for the group name
// and its host name (etc/NAME.crt and etc/NAME.key). The CA's key is
// never written: nothing else is signed with it.
func writeCerts(l layout, sites []site) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ca := certTemplate("transmirror demo CA")
	ca.IsCA, ca.BasicConstraintsValid, ca.KeyUsage = true, true, x509.KeyUsageCertSign
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return err
	}
	if err := writePEM(l.CA, "CERTIFICATE", caDER); err != nil {
		return err
	}
	for _, s := range sites {
		if err := writeLeaf(filepath.Join(l.Etc, s.Name), ca, caKey, groupName, s.Host); err != nil {
			return err
		}
	}
	return nil
}

// writeLeaf writes base.crt and base.key: a server certificate for names
// signed by ca.
func writeLeaf(base string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names ...string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := certTemplate(names[0])
	tmpl.DNSNames, tmpl.KeyUsage = names, x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(base+".crt", "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(base+".key", "PRIVATE KEY", kder)
}

func certTemplate(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)) // crypto/rand does not fail
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(demoCertLife)}
}

// writePEM writes der as one PEM block of typ, readable by its owner
// only (a key among them).
func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
