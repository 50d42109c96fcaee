package etcdtest

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestStartSecure: the secure etcd takes User's writes under the prefix,
// over TLS with a client certificate, and refuses every other client,
// each with its own reason; a restart keeps auth on.
func TestStartSecure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	s := StartSecure(t, Secure{CA: ca, Prefix: "/granted/"})
	if !strings.HasPrefix(s.Endpoint(), "https://127.0.0.1:") {
		t.Fatalf("endpoint %s, want https on loopback", s.Endpoint())
	}
	cert, key := s.ClientCert(t, "node1")
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &tls.Config{RootCAs: ca.Pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	noCert := &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS12}
	check := func(t *testing.T) {
		for _, tc := range []struct {
			name, user, password, key string
			tls                       *tls.Config
			wantErr                   string // "": the put succeeds
		}{
			{"user under its prefix", User, s.Password(), "/granted/k", withCert, ""},
			{"user outside its prefix", User, s.Password(), "/other/k", withCert, "permission denied"},
			{"wrong password", User, "wrong", "/granted/k", withCert, "authentication failed"},
			{"no client certificate", User, s.Password(), "/granted/k", noCert, "context deadline exceeded"},
			// Without a token etcd takes the certificate's common name for
			// the user, and node1 has no role.
			{"certificate only", "", "", "/granted/k", withCert, "permission denied"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				err := put(t, s.Endpoint(), tc.user, tc.password, tc.tls, tc.key)
				t.Logf("put %s: %v", tc.key, err)
				switch {
				case tc.wantErr == "" && err != nil:
					t.Errorf("put %s: %v, want it to succeed", tc.key, err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Errorf("put %s: %v, want an error saying %q", tc.key, err, tc.wantErr)
				}
			})
		}
	}
	t.Run("started", check)
	s.Restart()
	t.Run("restarted", check)
}

// put puts key as user over TLS config tc.
func put(t *testing.T, endpoint, user, password string, tc *tls.Config, key string) error {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, Username: user, Password: password,
		DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, key, "v")
	return err
}
