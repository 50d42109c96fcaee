package yamlconf

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
	"strings"
	"testing"
	"time"
)

// writeSelfSigned writes a self-signed certificate and its key to
// dir/name.crt and dir/name.key.
func writeSelfSigned(t *testing.T, dir, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{
		name + ".crt": {Type: "CERTIFICATE", Bytes: der},
		name + ".key": {Type: "PRIVATE KEY", Bytes: kder},
	} {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTLSFilesCheck(t *testing.T) {
	dir := t.TempDir()
	writeSelfSigned(t, dir, "a")
	writeSelfSigned(t, dir, "b")
	pos := Positions{"admin_tls": {3, 1}, "admin_tls.cert_file": {4, 3}, "admin_tls.key_file": {5, 3}}
	tests := []struct {
		name string
		t    TLSFiles
		want string // "" is valid
	}{
		{"off", TLSFiles{}, ""},
		{"pair", TLSFiles{"a.crt", "a.key"}, ""},
		{"absolute", TLSFiles{filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")}, ""},
		{"no key", TLSFiles{CertFile: "a.crt"}, "c.yaml:3:1: admin_tls: key_file is required with cert_file"},
		{"no cert", TLSFiles{KeyFile: "a.key"}, "c.yaml:3:1: admin_tls: cert_file is required with key_file"},
		{"missing", TLSFiles{"none.crt", "a.key"}, `c.yaml:4:3: admin_tls.cert_file: cannot use "none.crt": no such file or directory`},
		{"not a pair", TLSFiles{"a.crt", "b.key"}, `c.yaml:3:1: admin_tls: key pair "a.crt", "b.key": tls: private key does not match public key`},
		{"swapped", TLSFiles{"a.key", "a.crt"}, `c.yaml:3:1: admin_tls: key pair "a.key", "a.crt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := NewErrors("c.yaml", pos, "test")
			tt.t.Check(errs, "admin_tls", dir)
			err := errs.Err()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestCheckCAFile(t *testing.T) {
	dir := t.TempDir()
	writeSelfSigned(t, dir, "ca")
	for _, tt := range []struct{ name, file, want string }{
		{"certificate", "ca.crt", ""},
		{"a key", "ca.key", `"ca.key" holds no PEM certificate`},
		{"missing", "none.crt", `cannot use "none.crt"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := CheckCAFile(filepath.Join(dir, tt.file), tt.file); !strings.Contains(got, tt.want) || (tt.want == "") != (got == "") {
				t.Errorf("CheckCAFile = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestHTTPLimitsCheck(t *testing.T) {
	tests := []struct {
		name    string
		written Positions
		in      HTTPLimits
		want    HTTPLimits
		err     string
	}{
		{"defaults", nil, HTTPLimits{}, HTTPLimits{DefaultMaxConnsPerClient, DefaultMaxHeaderBytes}, ""},
		{"written", Positions{"limits.max_conns_per_client": {2, 3}, "limits.max_header_bytes": {3, 3}},
			HTTPLimits{0, 8 << 10}, HTTPLimits{0, 8 << 10}, ""},
		{"negative cap", Positions{"limits.max_conns_per_client": {2, 3}}, HTTPLimits{MaxConnsPerClient: -1}, HTTPLimits{},
			"c.yaml:2:3: limits.max_conns_per_client: must be >= 0 (0 is no cap), got -1"},
		{"tiny headers", Positions{"limits.max_header_bytes": {3, 3}}, HTTPLimits{MaxHeaderBytes: 100}, HTTPLimits{},
			"c.yaml:3:3: limits.max_header_bytes: must be in 4KiB..1MiB, got 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := NewErrors("c.yaml", tt.written, "test")
			l := tt.in
			l.Check(errs, tt.written, "limits")
			err := errs.Err()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Check = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || l != tt.want {
				t.Fatalf("Check = %+v, %v; want %+v", l, err, tt.want)
			}
		})
	}
}

// TestCheckAdminHosts: admin_hosts are host names, stored lowercase
// without a final dot; an address, a port or a URL is an error at its
// entry.
func TestCheckAdminHosts(t *testing.T) {
	tests := []struct {
		name, host, want, err string
	}{
		{"name", "NS1.Example.ORG.", "ns1.example.org", ""},
		{"single label", "dnsd", "dnsd", ""},
		{"address", "192.0.2.53", "", `admin_hosts[0]: "192.0.2.53" is an address`},
		{"with a port", "ns1.example.org:8053", "", `admin_hosts[0]: "ns1.example.org:8053": want a host name`},
		{"a URL", "http://ns1.example.org", "", "want a host name"},
		{"empty", "", "", "want a host name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hosts := []string{tt.host}
			e := NewErrors("d.yaml", Positions{"": {1, 1}, "admin_hosts[0]": {2, 3}}, "zones")
			CheckAdminHosts(e, "admin_hosts", hosts)
			err := e.Err()
			switch {
			case tt.err == "" && (err != nil || hosts[0] != tt.want):
				t.Errorf("%q, %v; want %q", hosts[0], err, tt.want)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), "d.yaml:2:3: "+tt.err) && !strings.Contains(err.Error(), tt.err)):
				t.Errorf("error %v, want %q", err, tt.err)
			}
		})
	}
}

func TestCheckHostPort(t *testing.T) {
	tests := []struct {
		name, addr, err string // err: "" for none
	}{
		{"IPv4", "127.0.0.1:8080", ""},
		{"IPv6", "[::1]:53", ""},
		{"IPv6 with a zone", "[fe80::1%eth0]:53", ""},
		{"every address", ":80", ""},
		{"localhost", "localhost:9180", ""},
		{"port 0 picks one", "127.0.0.1:0", ""},
		{"port 65535", "0.0.0.0:65535", ""},
		{"no port", "127.0.0.1", "want HOST:PORT"},
		{"bare port", "8080", "want HOST:PORT"},
		{"IPv6 without brackets", "::1:53", "want HOST:PORT"},
		{"empty port", "127.0.0.1:", `invalid port ""`},
		{"named port", ":http", `invalid port "http"`},
		{"port 65536", "127.0.0.1:65536", `invalid port "65536"`},
		{"negative port", "127.0.0.1:-1", `invalid port "-1"`},
		{"signed port", "127.0.0.1:+80", `invalid port "+80"`},
		{"host name", "www.example.org:80", `host "www.example.org" is not an IP address`},
		{"localhost with a dot", "localhost.:80", `host "localhost." is not an IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckHostPort(tt.addr)
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("CheckHostPort(%q) = %v, want nil", tt.addr, err)
			case tt.err != "" && (err == nil || err.Error() != tt.err):
				t.Errorf("CheckHostPort(%q) = %v, want %q", tt.addr, err, tt.err)
			}
		})
	}
}
