package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// syncBuffer is a bytes.Buffer that the logger and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startDNSD runs dnsd on config until the test ends and returns the admin
// address from its log, with TLS exactly when config has admin_tls.
func startDNSD(t *testing.T, config string) string {
	t.Helper()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runContext(ctx, []string{"-config", config}, io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Errorf("dnsd did not stop:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `msg="dnsd started"`) {
		select {
		case code := <-done:
			t.Fatalf("dnsd exited %d:\n%s", code, logs.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("dnsd not started:\n%s", logs.String())
		}
	}
	m := regexp.MustCompile(`msg="admin listening" addr=(\S+) tls=(true|false)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no admin line in\n%s", logs.String())
	}
	if want := strings.Contains(readFile(t, config), "admin_tls:"); (m[2] == "true") != want {
		t.Fatalf("admin listening with tls=%s, want %v:\n%s", m[2], want, logs.String())
	}
	return m[1]
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAdminTLS: dnsd's admin API over TLS: HTTPS with the configured
// certificate, plain HTTP refused; a reload after the files are replaced
// serves the new certificate, a reload with a key that does not match
// fails with the reason and the old certificate keeps serving; turning
// TLS off needs a restart.
func TestAdminTLS(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	zone := "$ORIGIN example.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 604800 60\n@ IN NS ns1\nns1 IN A 127.0.0.1\n"
	if err := os.WriteFile(filepath.Join(dir, "example.test.zone"), []byte(zone), 0o644); err != nil {
		t.Fatal(err)
	}
	// install makes a certificate named cn the one at admin.crt/admin.key.
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
	head := "listen: [\"127.0.0.1:0\"]\nadmin: 127.0.0.1:0\nzones:\n  - {origin: example.test., file: example.test.zone}\n"
	withTLS := head + "admin_tls: {cert_file: admin.crt, key_file: admin.key}\n"
	config := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(config, []byte(withTLS), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startDNSD(t, config)
	base := "https://" + addr
	client := ca.Client()
	call := func(method, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.RequestHeader, "1")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := call(http.MethodGet, "/-/healthy"); code != http.StatusOK {
		t.Fatalf("GET /-/healthy over HTTPS: %d %s", code, body)
	}
	if got := ca.Served(t, addr); got != "one" {
		t.Fatalf("served %q, want one", got)
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/-/healthy"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("plain HTTP served")
		}
	}

	tests := []struct {
		name   string
		setup  func()
		config string
		code   int
		body   string
		served string
	}{
		{"rotated", func() { install("two") }, withTLS, http.StatusOK, "reloaded", "two"},
		{"key of another certificate", func() {
			_, key := ca.Leaf(t, dir, "three")
			if err := os.Rename(key, filepath.Join(dir, "admin.key")); err != nil {
				t.Fatal(err)
			}
		}, withTLS, http.StatusBadRequest, "private key does not match public key", "two"},
		{"TLS off", func() { install("four") }, head, http.StatusBadRequest, "admin_tls: changed from on to off: needs a restart", "two"},
		{"good again", func() {}, withTLS, http.StatusOK, "reloaded", "four"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.setup()
			if err := os.WriteFile(config, []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			code, body := call(http.MethodPost, "/-/reload")
			if code != tt.code || !strings.Contains(body, tt.body) {
				t.Errorf("POST /-/reload: %d %s, want %d with %q", code, body, tt.code, tt.body)
			}
			if got := ca.Served(t, addr); got != tt.served {
				t.Errorf("served %q, want %q", got, tt.served)
			}
		})
	}
	if _, body := call(http.MethodGet, "/metrics"); !strings.Contains(body, `transmirror_dnsd_http_refused_connections_total{listener="admin"} 0`) {
		t.Error("metrics lack transmirror_dnsd_http_refused_connections_total")
	}
}
