package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestAdminTLS: the mirror's admin listener over TLS; a reload after the
// files are replaced serves the new certificate, a bad pair fails the
// reload and keeps the old one.
func TestAdminTLS(t *testing.T) {
	cfgYAML := goodYAML + "admin_tls: {cert_file: admin.crt, key_file: admin.key}\n"
	config := writeConfig(t, cfgYAML)
	dir := filepath.Dir(config)
	ca := probetest.NewCA(t, dir, "ca")
	install := func(cn string) {
		t.Helper()
		crt, key := ca.Leaf(t, dir, cn)
		if err := os.Rename(crt, filepath.Join(dir, "admin.crt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(key, filepath.Join(dir, "admin.key")); err != nil {
			t.Fatal(err)
		}
	}
	install("one")
	_, admin, logs := startServe(t, config)
	if !strings.Contains(logs.String(), "tls=true") {
		t.Fatalf("admin line without tls=true:\n%s", logs.String())
	}
	client := ca.Client()
	reload := func() (int, string) {
		t.Helper()
		resp, err := client.Post("https://"+admin+"/-/reload", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	resp, err := client.Get("https://" + admin + "/v1/load")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/load over HTTPS: %s", resp.Status)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + admin + "/v1/load"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served")
		}
	}
	if got := ca.Served(t, admin); got != "one" {
		t.Fatalf("served %q", got)
	}
	install("two")
	if code, body := reload(); code != http.StatusOK {
		t.Fatalf("reload: %d %s", code, body)
	}
	if got := ca.Served(t, admin); got != "two" {
		t.Errorf("served %q after a reload, want two", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "admin.key"), []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := reload(); code != http.StatusBadRequest || !strings.Contains(body, "admin_tls: key pair") {
		t.Errorf("reload with a bad key: %d %s", code, body)
	}
	if got := ca.Served(t, admin); got != "two" {
		t.Errorf("served %q after a failed reload, want two", got)
	}
}

// TestPublicConnCap: limits.max_conns_per_client closes a client's
// public connection beyond the cap, counted, while another client is
// served.
func TestPublicConnCap(t *testing.T) {
	public, admin, _ := startServe(t, writeConfig(t, goodYAML+"limits: {max_conns_per_client: 2}\n"))
	get := func(from string) bool {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", public)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET /hello.txt HTTP/1.1\r\nHost: www.example.test\r\n\r\n"); err != nil {
			return false
		}
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		return err == nil && strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200 ")
	}
	for i := range 2 {
		if !get("127.0.0.1") {
			t.Fatalf("connection %d refused", i+1)
		}
	}
	if get("127.0.0.1") {
		t.Fatal("third connection served")
	}
	if !get("127.0.0.2") {
		t.Fatal("another client refused")
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `transmirror_mirror_http_refused_connections_total{listener="public"} 1`) {
		t.Errorf("metrics lack the refused connection:\n%s", b)
	}
}
