package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// writeConfig writes a document root and a config file into a temporary
// directory and returns the config's path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "root", "hello.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "mirror.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodYAML = `listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: a
host: a.mirrors.example.test
root: root
`

func TestFlags(t *testing.T) {
	good := writeConfig(t, goodYAML)
	fixture, err := filepath.Abs(filepath.Join("..", "..", "scheduler", "geo", "testdata", "regions.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	goodMMDB := writeConfig(t, goodYAML+fmt.Sprintf("geo: {mmdb: %q}\n", fixture))
	corrupt := writeConfig(t, goodYAML+"geo: {mmdb: corrupt.mmdb}\n")
	writeRandom(t, filepath.Join(filepath.Dir(corrupt), "corrupt.mmdb"))
	bad := writeConfig(t, "listen: [':80']\ngroup: www.example.test\nmember: A\nhost: a.example.test\nroot: root\n")
	dispatcher := writeConfig(t, "listen: [':80']\ngroup: www.example.test\nmember: d\nhost: d.example.test\ndispatcher: true\n")
	missDelayKey := writeConfig(t, goodYAML+"site: {cache: {miss_delay_per_mib: 10ms}}\n")
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"no config", nil, 2, "", "-config FILE is required"},
		{"stray argument", []string{"-config", good, "extra"}, 2, "", `unexpected argument "extra"`},
		{"bad log format", []string{"-config", good, "-log-format", "xml", "-check"}, 2, "", "-log-format"},
		{"bad log level", []string{"-config", good, "-log-level", "loud", "-check"}, 2, "", "-log-level"},
		{"bad listen flag", []string{"-config", good, "-listen", "8080", "-check"}, 2, "", `listen address "8080"`},
		{"unknown flag", []string{"-config", good, "-verbose"}, 2, "", "flag provided but not defined"},
		{"help", []string{"-h"}, 0, "", "-config"},
		{"missing config", []string{"-config", "does-not-exist.yaml", "-check"}, 1, "", "does-not-exist.yaml"},
		{"good config", []string{"-config", good, "-check"}, 0, "ok: member a of group www.example.test, serving", ""},
		{"listen overridden", []string{"-config", good, "-check", "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}, 0, "ok:", ""},
		{"bad config: file:line:col", []string{"-config", bad, "-check"}, 1, "", `mirror.yaml:3:1: member: "A" must match [a-z0-9-]+`},
		{"dispatcher needs dnsd", []string{"-config", dispatcher, "-check"}, 1, "", "dispatcher: needs dnsd"},
		{"check opens the mmdb", []string{"-config", goodMMDB, "-check"}, 0, "ok:", ""},
		{"check: corrupt mmdb", []string{"-config", corrupt, "-check"}, 1, "", "corrupt.mmdb"},
		{"bench miss delay", []string{"-config", good, "-check", "-bench-miss-delay-per-mib", "20ms"}, 0, "ok:", ""},
		{"bench miss delay negative", []string{"-config", good, "-check", "-bench-miss-delay-per-mib", "-1s"}, 2, "", "-bench-miss-delay-per-mib -1s: want >= 0"},
		{"help marks the benchmark flag", []string{"-h"}, 0, "", "for benchmarks and tests only"},
		{"miss_delay_per_mib key retired", []string{"-config", missDelayKey, "-check"}, 1, "", "site.cache.miss_delay_per_mib: retired key: remove it: a benchmark knob, now the mirror's -bench-miss-delay-per-mib flag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tt.args, &out, &errb); code != tt.code {
				t.Errorf("exit %d, want %d (stderr %s)", code, tt.code, errb.String())
			}
			if !strings.Contains(out.String(), tt.stdout) {
				t.Errorf("stdout %q lacks %q", out.String(), tt.stdout)
			}
			if !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.stderr)
			}
		})
	}
}

// writeRandom writes 4 KiB of random bytes to path, e.g. a corrupt .mmdb.
func writeRandom(t *testing.T, path string) {
	t.Helper()
	b := make([]byte, 4096)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

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

// startServe runs the daemon with cfg on port 0 until the test ends,
// reads the addresses from its log the way the e2e harness does, and
// returns them and the log.
func startServe(t *testing.T, cfg string) (public, admin string, logs *syncBuffer) {
	t.Helper()
	logs = &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runContext(ctx, []string{"-config", cfg}, io.Discard, logs) }()
	exited := false
	t.Cleanup(func() {
		cancel()
		if exited {
			return
		}
		if code := <-done; code != 0 {
			t.Errorf("exit %d\n%s", code, logs.String())
		}
		if !strings.Contains(logs.String(), `msg="mirror stopped"`) {
			t.Errorf("no stop line in\n%s", logs.String())
		}
	})

	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `msg="mirror started"`) {
		if time.Now().After(deadline) {
			t.Fatalf("not started:\n%s", logs.String())
		}
		select {
		case code := <-done:
			exited = true
			t.Fatalf("exited %d:\n%s", code, logs.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	addr := func(msg string) string {
		m := regexp.MustCompile(`msg="` + msg + `" addr=(\S+)`).FindStringSubmatch(logs.String())
		if m == nil {
			t.Fatalf("no %q line in\n%s", msg, logs.String())
		}
		return m[1]
	}
	return addr("http listening"), addr("admin listening"), logs
}

// TestServe starts the daemon on port 0, fetches a file and the admin
// endpoints, and stops it.
func TestServe(t *testing.T) {
	public, admin, _ := startServe(t, writeConfig(t, goodYAML))
	c := &http.Client{Timeout: 5 * time.Second}
	for _, tc := range []struct{ url, want string }{
		{"http://" + public + "/hello.txt", "hello\n"},
		{"http://" + admin + "/-/healthy", "OK\n"},
		{"http://" + admin + "/v1/load", `"member":"a"`},
		{"http://" + admin + "/metrics", "transmirror_mirror_requests_total"},
	} {
		resp, err := c.Get(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: %s, body %q lacks %q", tc.url, resp.Status, body, tc.want)
		}
	}
}

// TestReload: POST /-/reload takes a new capacity, refuses a broken config
// or a restart-only change with the error in its body (the old config
// keeps serving), and the outcome is exported.
func TestReload(t *testing.T) {
	cfg := writeConfig(t, goodYAML+"capacity: 100\n")
	public, admin, _ := startServe(t, cfg)
	writeRandom(t, filepath.Join(filepath.Dir(cfg), "corrupt.mmdb"))
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(url string) string {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	tests := []struct {
		name     string
		yaml     string
		code     int
		body     string
		capacity string // in the load report afterwards
		ok       string // transmirror_mirror_config_last_reload_successful
	}{
		{"capacity", goodYAML + "capacity: 250\n", http.StatusOK, `"status":"reloaded"`, `"capacity":250`, "1"},
		{"invalid", goodYAML + "capacity: -1\n", http.StatusBadRequest, "capacity: must be > 0", `"capacity":250`, "0"},
		{"restart-only key", strings.Replace(goodYAML, "member: a", "member: b", 1), http.StatusBadRequest,
			`member: changed from \"a\" to \"b\": needs a restart`, `"capacity":250`, "0"},
		{"corrupt mmdb", goodYAML + "capacity: 300\ngeo: {mmdb: corrupt.mmdb}\n", http.StatusBadRequest, "corrupt.mmdb", `"capacity":250`, "0"},
		{"good again", goodYAML + "capacity: 400\n", http.StatusOK, "reloaded", `"capacity":400`, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(cfg, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			resp, err := c.Post("http://"+admin+"/-/reload", "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.body) {
				t.Errorf("POST /-/reload: %d %s, want %d with %q", resp.StatusCode, b, tt.code, tt.body)
			}
			if got := get("http://" + admin + "/v1/load"); !strings.Contains(got, tt.capacity) {
				t.Errorf("load report %s lacks %s", got, tt.capacity)
			}
			if got := get("http://" + public + "/hello.txt"); got != "hello\n" {
				t.Errorf("public GET: %q", got)
			}
			if m := get("http://" + admin + "/metrics"); !strings.Contains(m, "transmirror_mirror_config_last_reload_successful "+tt.ok+"\n") {
				t.Errorf("metrics lack last_reload_successful %s", tt.ok)
			}
		})
	}
}
