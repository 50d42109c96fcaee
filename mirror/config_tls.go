package mirror

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"

	"github.com/transmirror/transmirror/zones/yamlconf"
)

// tls checks the tls block: its listen addresses (as listen's, none in
// taken, the plain and admin addresses), that listen and certificates
// come together, and that each pair loads; it resolves the files. A
// certificate set that covers neither the group name nor the host name
// is a warning: clients asking for that name would fail to verify.
func (v *validator) tls(taken map[string]bool) {
	t := &v.c.TLS
	seen := make(map[string]bool)
	for i, addr := range t.Listen {
		path := fmt.Sprintf("tls.listen[%d]", i)
		switch err := yamlconf.CheckHostPort(addr); {
		case err != nil:
			v.errorf(path, "%q: %v", addr, err)
		case anyPort(addr):
		case seen[addr]:
			v.errorf(path, "%q is listed twice", addr)
		case taken[addr]:
			v.errorf(path, "%q is also a plain or the admin listen address", addr)
		}
		seen[addr] = true
	}
	switch {
	case len(t.Listen) > 0 && len(t.Certificates) == 0:
		v.errorf("tls.listen", "needs certificates (ACME is not there yet)")
	case len(t.Listen) == 0 && len(t.Certificates) > 0:
		v.errorf("tls.certificates", "needs listen (the HTTPS listen addresses)")
	}
	var leaves []*x509.Certificate
	for i, f := range t.Certificates {
		path := fmt.Sprintf("tls.certificates[%d]", i)
		if !f.Enabled() {
			v.errorf(path, "cert_file and key_file are required")
			continue
		}
		n := v.errs.Len()
		f.Check(v.errs, path, v.dir)
		t.Certificates[i] = f.Resolve(v.dir)
		if v.errs.Len() == n {
			leaves = append(leaves, leafOf(t.Certificates[i].CertFile, t.Certificates[i].KeyFile))
		}
	}
	if len(leaves) == len(t.Certificates) && len(leaves) > 0 {
		v.covered("group", v.c.Group, leaves)
		v.covered("host", v.c.Host, leaves)
	}
}

// covered warns when none of leaves is valid for name, the value of key.
func (v *validator) covered(key, name string, leaves []*x509.Certificate) {
	if name == "" {
		return
	}
	name = strings.TrimSuffix(name, ".")
	for _, l := range leaves {
		if l != nil && l.VerifyHostname(name) == nil {
			return
		}
	}
	v.errs.Warnf("tls.certificates", "tls.certificates: no certificate covers the %s name %q: clients asking for it fail to verify", key, name)
}

// leafOf is the parsed leaf of a pair that Check has accepted (nil if it
// changed in between).
func leafOf(certFile, keyFile string) *x509.Certificate {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil
	}
	l, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return l
}
