package mirror

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"slices"
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
	case len(t.Listen) > 0 && len(t.Certificates) == 0 && !v.written("tls.acme"):
		v.errorf("tls.listen", "needs certificates or acme")
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
	if len(leaves) == len(t.Certificates) && len(leaves) > 0 && !v.written("tls.acme") {
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

// acme checks tls.acme: an https directory, the contact, the CA file and
// the directory resolved, the challenge (acmeChallenge), and listen.
func (v *validator) acme() {
	if !v.written("tls.acme") {
		return
	}
	a := &v.c.TLS.ACME
	switch u, err := url.Parse(a.Directory); {
	case a.Directory == "":
		v.errorf("tls.acme", "directory is required (the CA's directory URL)")
	case err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil:
		v.errorf("tls.acme.directory", "%q: want an https URL with a host (RFC 8555 §6.1)", a.Directory)
	}
	if a.Email != "" && (strings.HasPrefix(a.Email, "mailto:") || !strings.Contains(a.Email, "@") || strings.ContainsAny(a.Email, " ,\t\n")) {
		v.errorf("tls.acme.email", "%q: want one address, as user@example.org", a.Email)
	}
	if a.CAFile != "" {
		if msg := yamlconf.CheckCAFile(v.resolve(a.CAFile), a.CAFile); msg != "" {
			v.errorf("tls.acme.ca_file", "%s", msg)
		} else {
			a.CAFile = v.resolve(a.CAFile)
		}
	}
	if a.Dir == "" {
		v.errorf("tls.acme", "dir is required (where the account key and the certificate are kept)")
	} else {
		a.Dir = v.resolve(a.Dir)
	}
	if len(v.c.TLS.Listen) == 0 {
		v.errorf("tls.acme", "needs tls.listen (the HTTPS listen addresses)")
	}
	v.acmeChallenge(a)
}

// acmeChallenge defaults and checks tls.acme.challenge: dns-01 needs
// dnsd and a member; http-01 and tls-alpn-01 prove the host name only
// (see acmeHostOnly).
func (v *validator) acmeChallenge(a *ACMEConfig) {
	if !v.written("tls.acme.challenge") {
		a.Challenge = ChallengeDNS01
	}
	switch a.Challenge {
	case ChallengeDNS01:
		if len(v.c.DNSD.URLs) == 0 {
			v.errorf("tls.acme.challenge", "dns-01 needs dnsd (it publishes the challenge)")
		}
		if v.c.Dispatcher {
			v.errorf("tls.acme", "a dispatcher is no member: dnsd publishes challenges for members only (http-01 or tls-alpn-01 need no dnsd)")
		}
	case ChallengeHTTP01:
		v.acmeHostOnly(a.Challenge, "listen", v.c.Listen, "80")
	case ChallengeTLSALPN01:
		v.acmeHostOnly(a.Challenge, "tls.listen", v.c.TLS.Listen, "443")
	default:
		v.errorf("tls.acme.challenge", "%q: want dns-01, http-01 or tls-alpn-01", a.Challenge)
	}
}

// acmeHostOnly checks an http-01 or tls-alpn-01 challenge, answered on
// the addresses of key (none is an error, of listen's or of tls.acme's
// own). The CA connects to port (a warning when no address has it: a
// forward must then bring it there) of what DNS gives for a name, which
// for the group name is any member: only the host name is proved, so a
// warning when no file of tls.certificates covers the group name.
func (v *validator) acmeHostOnly(challenge, key string, addrs []string, port string) {
	if len(addrs) > 0 && !slices.ContainsFunc(addrs, func(a string) bool { _, p, _ := net.SplitHostPort(a); return p == port }) {
		v.errs.Warnf("tls.acme.challenge", "tls.acme.challenge: %s: no %s address has port %s, where the CA connects: forward port %s to one", challenge, key, port, port)
	}
	group := strings.TrimSuffix(v.c.Group, ".")
	if group == "" {
		return
	}
	for _, f := range v.c.TLS.Certificates {
		if l := leafOf(f.CertFile, f.KeyFile); l != nil && l.VerifyHostname(group) == nil {
			return
		}
	}
	v.errs.Warnf("tls.acme.challenge", "tls.acme.challenge: %s proves the host name only (the CA may reach any member for the group name): https for the group name %q needs a file of tls.certificates that covers it", challenge, group)
}
