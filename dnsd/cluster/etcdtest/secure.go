package etcdtest

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// Ctl is the etcd client executable (Debian's etcd-client), looked up in
// PATH; StartSecure sets up the users with it, the way an operator does.
const Ctl = "etcdctl"

// The users and the role that StartSecure makes.
const (
	// Root is etcd's root user (role root): StartSecure's own etcdctl.
	Root = "root"
	// User is the limited user, for the dnsd nodes: its one role, Role,
	// may read and write the keys under Secure.Prefix and nothing else.
	User = "dnsd"
	Role = "dnsd"
)

// Secure is what StartSecure turns on.
type Secure struct {
	// CA signs etcd's server certificate (for 127.0.0.1): a client
	// verifies etcd with CA.File.
	CA *probetest.CA
	// Prefix is the key prefix that Role may read and write
	// (role grant-permission --prefix=true).
	Prefix string
}

// secure is a secure etcd's files and passwords.
type secure struct {
	Secure
	dir               string
	clients           *probetest.CA // signs the client certificates etcd trusts
	certFile, keyFile string        // the server's
	rootCert, rootKey string        // root's client certificate
	rootPassword      string
	password          string // User's
	authOn            bool   // auth enable done: etcdctl says who it is
}

// StartSecure starts etcd (one member) serving clients over TLS only
// (https, a certificate of sec.CA), requiring a client certificate that
// its own client CA signed (--client-cert-auth, --trusted-ca-file: see
// ClientCert), with auth on: a root user, and User, whose Role may read
// and write under sec.Prefix only. The peer URL stays plain http: there
// are no peers.
func StartSecure(t testing.TB, sec Secure) *Server {
	t.Helper()
	if sec.CA == nil || !strings.HasPrefix(sec.Prefix, "/") {
		t.Fatalf("etcdtest: StartSecure needs a CA and a prefix starting with /, got %v %q", sec.CA, sec.Prefix)
	}
	base, flags := slowDisk(t)
	c := newSecure(t, sec)
	s := &Server{t: t, flags: flags, sec: c}
	s.hc = c.httpClient(t)
	s.start(base, "https")
	if err := s.enableAuth(); err != nil {
		t.Fatalf("etcdtest: %v\n%s", err, tail(s.Logs()))
	}
	return s
}

func newSecure(t testing.TB, sec Secure) *secure {
	t.Helper()
	c := &secure{Secure: sec, dir: t.TempDir(), rootPassword: password(t), password: password(t)}
	c.clients = probetest.NewCA(t, c.dir, "clients-ca")
	c.certFile, c.keyFile = sec.CA.Leaf(t, c.dir, "etcd-server")
	c.rootCert, c.rootKey = c.clients.ClientLeaf(t, c.dir, Root)
	return c
}

// password is a fresh random password.
func password(t testing.TB) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// flags are etcd's TLS flags; none for a plain etcd.
func (c *secure) flags() []string {
	if c == nil {
		return nil
	}
	return []string{"--cert-file", c.certFile, "--key-file", c.keyFile,
		"--client-cert-auth", "--trusted-ca-file", c.clients.File}
}

// httpClient is the client of etcd's own endpoints (/health, /metrics):
// root's certificate, sec.CA trusted.
func (c *secure) httpClient(t testing.TB) *http.Client {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(c.rootCert, c.rootKey)
	if err != nil {
		t.Fatalf("etcdtest: root's client certificate: %v", err)
	}
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: c.CA.Pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}}
}

// enableAuth makes the users and the role, then turns auth on.
func (s *Server) enableAuth() error {
	c := s.sec
	for _, args := range [][]string{
		{"user", "add", Root, "--interactive=false", "--new-user-password=" + c.rootPassword},
		{"user", "grant-role", Root, "root"},
		{"role", "add", Role},
		{"role", "grant-permission", Role, "--prefix=true", "readwrite", c.Prefix},
		{"user", "add", User, "--interactive=false", "--new-user-password=" + c.password},
		{"user", "grant-role", User, Role},
		{"auth", "enable"},
	} {
		if out, err := s.Ctl(args...); err != nil {
			return fmt.Errorf("etcdctl %s: %w: %s", args[0]+" "+args[1], err, out)
		}
	}
	c.authOn = true
	return nil
}

// Ctl runs etcdctl against this etcd (as root once auth is on) and
// returns what it wrote, stdout and stderr.
func (s *Server) Ctl(args ...string) (string, error) {
	base := []string{"--endpoints", s.client, "--dial-timeout", "5s", "--command-timeout", "10s"}
	if c := s.sec; c != nil {
		base = append(base, "--cacert", c.CA.File, "--cert", c.rootCert, "--key", c.rootKey)
		if c.authOn {
			base = append(base, "--user", Root+":"+c.rootPassword)
		}
	}
	cmd := exec.Command(Ctl, append(base, args...)...)
	cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
	out, err := cmd.CombinedOutput()
	if err != nil && strings.Contains(err.Error(), "executable file not found") {
		err = fmt.Errorf("%w (make deps installs etcd-client)", err)
	}
	return string(out), err
}

// Password is User's password; "" for a plain etcd.
func (s *Server) Password() string {
	if s.sec == nil {
		return ""
	}
	return s.sec.password
}

// ClientCert makes a client certificate that this etcd accepts, with
// common name cn, in a directory of the test's, and returns its files.
// etcd takes cn for the user of a request without a token: name a node's
// certificate after a user only to mean that.
func (s *Server) ClientCert(t testing.TB, cn string) (certFile, keyFile string) {
	t.Helper()
	if s.sec == nil {
		t.Fatal("etcdtest: ClientCert of a plain etcd")
	}
	return s.sec.clients.ClientLeaf(t, t.TempDir(), cn)
}
