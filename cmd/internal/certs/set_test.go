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

// serveSet serves handshakes with s's ServerConfig on 127.0.0.1:0 and
// returns the address.
func serveSet(t *testing.T, s *Set) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", s.ServerConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
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
	return ln.Addr().String()
}

// shake returns the common name of the certificate served at addr to a
// client sending SNI name, verified against ca, and the protocol
// negotiated. With name "" it sends no SNI: Go's client sends none for
// an IP address, and certstest's leaves are for 127.0.0.1.
func shake(t *testing.T, ca *probetest.CA, addr, name string) (cn, proto string, err error) {
	t.Helper()
	if name == "" {
		name = "127.0.0.1"
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: ca.Pool, ServerName: name, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		return "", "", err
	}
	defer c.Close()
	st := c.ConnectionState()
	return st.PeerCertificates[0].Subject.CommonName, st.NegotiatedProtocol, nil
}

func TestSetChoose(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	cs, err := LoadAll([]Files{
		pair(ca.LeafFor(t, dir, "group", "www.example.test")),
		pair(ca.LeafFor(t, dir, "host", "fra1.mirrors.example.test", "*.cdn.example.test")),
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveSet(t, NewSet(cs))
	tests := []struct {
		name, sni, want string
	}{
		{"group name", "www.example.test", "group"},
		{"host name", "fra1.mirrors.example.test", "host"},
		{"wildcard", "a.cdn.example.test", "host"},
		{"unknown name gets the first", "other.example.test", "group"},
		{"no SNI gets the first", "", "group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cn, proto, err := shake(t, ca, addr, tt.sni)
			if tt.sni == "other.example.test" {
				// The first is served, and verification fails: it is not for the name.
				if err == nil || !strings.Contains(err.Error(), "www.example.test") {
					t.Fatalf("handshake for %s: %v, want the first certificate's name mismatch", tt.sni, err)
				}
				return
			}
			if err != nil || cn != tt.want || proto != "h2" {
				t.Fatalf("served %q over %q, %v; want %q over h2", cn, proto, err, tt.want)
			}
		})
	}
}

func pair(cert, key string) Files { return Files{cert, key} }

// TestSetReload: a Store changes what new handshakes see; a set that
// does not load is an error naming the file and changes nothing; an
// empty Set fails handshakes.
func TestSetReload(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	s := &Set{}
	addr := serveSet(t, s)
	if _, _, err := shake(t, ca, addr, "www.example.test"); err == nil {
		t.Fatal("handshake without a certificate succeeded")
	}
	for _, cn := range []string{"first", "second"} {
		cs, err := LoadAll([]Files{pair(ca.LeafFor(t, dir, cn, "www.example.test"))})
		if err != nil {
			t.Fatal(err)
		}
		s.Store(cs)
		if got, _, err := shake(t, ca, addr, "www.example.test"); err != nil || got != cn {
			t.Fatalf("served %q, %v; want %q", got, err, cn)
		}
	}
	bad := filepath.Join(dir, "bad.crt")
	if err := os.WriteFile(bad, []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := pair(ca.LeafFor(t, dir, "third", "www.example.test"))
	if _, err := LoadAll([]Files{good, {bad, good.KeyFile}}); err == nil || !strings.Contains(err.Error(), "bad.crt") {
		t.Fatalf("LoadAll with a bad pair = %v, want an error naming bad.crt", err)
	}
	if got, _, err := shake(t, ca, addr, "www.example.test"); err != nil || got != "second" {
		t.Fatalf("after a failed load served %q, %v; want second", got, err)
	}
	if n := Names(s.Current()[0]); len(n) != 1 || n[0] != "www.example.test" {
		t.Errorf("Names = %q", n)
	}
}

// TestSetManaged: the managed certificate comes first and outlives a
// Store of the files; StoreManaged(nil) leaves the files alone.
func TestSetManaged(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	load := func(cn string, names ...string) []*tls.Certificate {
		cs, err := LoadAll([]Files{pair(ca.LeafFor(t, dir, cn, names...))})
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	s := NewSet(load("files", "www.example.test", "other.example.test"))
	addr := serveSet(t, s)
	s.StoreManaged(load("acme", "www.example.test")[0])
	steps := []struct {
		name string
		do   func()
		sni  map[string]string // SNI name → common name served
	}{
		{"managed first", func() {}, map[string]string{"www.example.test": "acme", "other.example.test": "files"}},
		{"files reloaded", func() { s.Store(load("files2", "other.example.test")) }, map[string]string{"www.example.test": "acme", "other.example.test": "files2"}},
		{"managed renewed", func() { s.StoreManaged(load("acme2", "www.example.test")[0]) }, map[string]string{"www.example.test": "acme2", "other.example.test": "files2"}},
		{"managed removed", func() { s.StoreManaged(nil) }, map[string]string{"other.example.test": "files2"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			for sni, want := range st.sni {
				if cn, _, err := shake(t, ca, addr, sni); err != nil || cn != want {
					t.Errorf("%s: served %q, %v; want %q", sni, cn, err, want)
				}
			}
		})
	}
}
