package certs

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	cert, key := ca.Leaf(t, dir, "one")
	_, otherKey := ca.Leaf(t, dir, "two")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, cert, key, err string
	}{
		{"pair", cert, key, ""},
		{"key of another certificate", cert, otherKey, "private key does not match public key"},
		{"missing cert", filepath.Join(dir, "none.crt"), key, "none.crt"},
		{"garbage key", cert, garbage, "garbage.pem"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.cert, tt.key)
			if tt.err == "" {
				if err != nil || c.Leaf == nil || c.Leaf.Subject.CommonName != "one" {
					t.Fatalf("Load = %v, %v", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("Load = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

// TestSwap: a handshake after Store sees the new certificate; one before
// any Store fails; a client config with the CA file verifies it.
func TestSwap(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	k := &Keypair{}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", k.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				_ = c.(*tls.Conn).Handshake()
			}()
		}
	}()
	client, err := ClientConfig(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	served := func() (string, error) {
		d := &net.Dialer{Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", ln.Addr().String(), client)
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	if _, err := served(); err == nil {
		t.Fatal("handshake without a certificate succeeded")
	}
	for _, cn := range []string{"first", "second"} {
		c, err := Load(ca.Leaf(t, dir, cn))
		if err != nil {
			t.Fatal(err)
		}
		k.Store(c)
		if got, err := served(); err != nil || got != cn {
			t.Fatalf("served %q, %v; want %q", got, err, cn)
		}
	}
	if _, err := ClientConfig(filepath.Join(dir, "second.key")); err == nil {
		t.Error("ClientConfig took a key file as a CA")
	}
}
