package yamlconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// CheckHostPort checks a listen address of either daemon (listen, admin):
// "HOST:PORT" with HOST empty (every address, or for an admin address the
// loopback, by the daemons' rule), an IP address or localhost, and PORT a
// number in 0..65535 (0: a free port). A host name other than localhost
// is refused: the daemon would listen on whatever it resolves to at start,
// not on what the operator reads in the file.
func CheckHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want HOST:PORT")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("invalid port %q", port)
	}
	if host == "" || host == "localhost" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err != nil {
		return fmt.Errorf("host %q is not an IP address", host)
	}
	return nil
}

// TLSFiles is the certificate and private key of a TLS server, PEM files
// written relative to the config file: the admin_tls block of both
// daemons. Neither given is plain HTTP.
type TLSFiles struct {
	// CertFile is the certificate chain, leaf first.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the leaf's private key.
	KeyFile string `yaml:"key_file"`
}

// Enabled reports whether t asks for TLS.
func (t TLSFiles) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Resolve returns t with both files resolved against dir, the config
// file's directory.
func (t TLSFiles) Resolve(dir string) TLSFiles {
	return TLSFiles{CertFile: Resolve(dir, t.CertFile), KeyFile: Resolve(dir, t.KeyFile)}
}

// Check validates t, written at key path in a config file in dir: both
// files or neither, each a readable file, and together a key pair whose
// certificate parses. Errors name the files as written.
func (t TLSFiles) Check(errs *Errors, path, dir string) {
	if !t.Enabled() {
		return
	}
	r := t.Resolve(dir)
	ok := true
	for _, f := range []struct{ key, other, written, name string }{
		{"cert_file", "key_file", t.CertFile, r.CertFile},
		{"key_file", "cert_file", t.KeyFile, r.KeyFile},
	} {
		if f.written == "" {
			errs.KeyErrorf(path, "%s is required with %s", f.key, f.other)
			ok = false
			continue
		}
		if msg := checkFile(f.name, f.written); msg != "" {
			errs.KeyErrorf(path+"."+f.key, "%s", msg)
			ok = false
		}
	}
	if !ok {
		return
	}
	c, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
	if err == nil {
		_, err = x509.ParseCertificate(c.Certificate[0])
	}
	if err != nil {
		errs.KeyErrorf(path, "key pair %q, %q: %v", t.CertFile, t.KeyFile, err)
	}
}

// CheckCAFile checks that name (resolved) is a readable file with at
// least one PEM certificate; written is the name as the config has it.
// It returns what is wrong, or "".
func CheckCAFile(name, written string) string {
	if msg := checkFile(name, written); msg != "" {
		return msg
	}
	pem, err := os.ReadFile(name)
	if err != nil {
		return fmt.Sprintf("cannot use %q: %v", written, WithoutPath(err))
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return fmt.Sprintf("%q holds no PEM certificate", written)
	}
	return ""
}

// Defaults of HTTPLimits.
const (
	// DefaultMaxConnsPerClient is limits.max_conns_per_client.
	DefaultMaxConnsPerClient = 256
	// DefaultMaxHeaderBytes is limits.max_header_bytes.
	DefaultMaxHeaderBytes = 64 << 10
	// MinHeaderBytes and MaxHeaderBytes bound limits.max_header_bytes.
	MinHeaderBytes = 4 << 10
	MaxHeaderBytes = 1 << 20
)

// HTTPLimits bound what one client may hold of an HTTP server: the
// limits block of both daemons.
type HTTPLimits struct {
	// MaxConnsPerClient caps the connections one client (an IPv4
	// address, an IPv6 /64) holds open at once on one listener; those
	// beyond are closed as soon as they are accepted (default 256; 0 is
	// no cap, for a listener behind a proxy whose clients all come from
	// its addresses).
	MaxConnsPerClient int `yaml:"max_conns_per_client"`
	// MaxHeaderBytes bounds a request's line and headers (default 64KiB,
	// 4KiB..1MiB); larger requests get 431.
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"`
}

// Check fills in the defaults of the keys under path that pos does not
// have and validates l.
func (l *HTTPLimits) Check(errs *Errors, pos Positions, path string) {
	if !pos.Has(path + ".max_conns_per_client") {
		l.MaxConnsPerClient = DefaultMaxConnsPerClient
	} else if l.MaxConnsPerClient < 0 {
		errs.KeyErrorf(path+".max_conns_per_client", "must be >= 0 (0 is no cap), got %d", l.MaxConnsPerClient)
	}
	if !pos.Has(path + ".max_header_bytes") {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	} else if l.MaxHeaderBytes < MinHeaderBytes || l.MaxHeaderBytes > MaxHeaderBytes {
		errs.KeyErrorf(path+".max_header_bytes", "must be in 4KiB..1MiB, got %d", l.MaxHeaderBytes)
	}
}

// CheckAdminHosts validates admin_hosts at path, the names besides IP
// addresses, localhost and the listen host that an admin listener
// answers in a request's Host (see the admin API's Guard): each a host
// name, without a port; they are stored lowercase, without a final dot.
func CheckAdminHosts(errs *Errors, path string, hosts []string) {
	for i, h := range hosts {
		p := fmt.Sprintf("%s[%d]", path, i)
		name := strings.ToLower(strings.TrimSuffix(h, "."))
		if _, err := netip.ParseAddr(name); err == nil {
			errs.KeyErrorf(p, "%q is an address: addresses are always answered, list host names only", h)
			continue
		}
		if !isHostName(name) {
			errs.KeyErrorf(p, "%q: want a host name such as ns1.example.org, without a port", h)
			continue
		}
		hosts[i] = name
	}
}

// isHostName reports whether s is a host name: dot-separated labels of
// 1..63 letters, digits, '-' and '_', at most 253 bytes in all.
func isHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}
