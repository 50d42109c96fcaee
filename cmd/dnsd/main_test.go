package main

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoConfigIsValid checks the embedded demo the way -check does: the
// demo must always load, GeoIP database included.
func TestDemoConfigIsValid(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-demo", "-check"}, &out, &errb); code != 0 {
		t.Fatalf("dnsd -demo -check: exit %d\n%s", code, errb.String())
	}
	if !strings.Contains(out.String(), "ok: 1 zones, 1 groups") {
		t.Errorf("output %q", out.String())
	}
}

func TestFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no mode", nil, 2, "give exactly one of"},
		{"two modes", []string{"-demo", "-config", "x.yaml"}, 2, "give exactly one of"},
		{"stray argument", []string{"-demo", "extra"}, 2, `unexpected argument "extra"`},
		{"bad log format", []string{"-demo", "-log-format", "xml"}, 2, "-log-format"},
		{"bad zone flag", []string{"-listen", "127.0.0.1:0", "-zone", "nofile", "-check"}, 1, "want ORIGIN=FILE"},
		{"missing config", []string{"-config", "does-not-exist.yaml", "-check"}, 1, "does-not-exist.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(tc.args, &out, &errb); code != tc.code {
				t.Errorf("exit %d, want %d (%s)", code, tc.code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
		})
	}
}

// TestCheckGeo: -check opens the GeoIP database the way a start does, so
// a corrupt one fails the check with the file's name.
func TestCheckGeo(t *testing.T) {
	dir := t.TempDir()
	zone := "$ORIGIN example.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 604800 60\n@ IN NS ns1\nns1 IN A 127.0.0.1\n"
	if err := os.WriteFile(filepath.Join(dir, "example.test.zone"), []byte(zone), 0o644); err != nil {
		t.Fatal(err)
	}
	junk := make([]byte, 4096)
	if _, err := rand.Read(junk); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "corrupt.mmdb"), junk, 0o644); err != nil {
		t.Fatal(err)
	}
	demoMMDB, err := filepath.Abs(filepath.Join("..", "..", "scheduler", "geo", "testdata", "regions.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	config := func(mmdb string) string {
		return "listen: [\"127.0.0.1:0\"]\nzones:\n  - {origin: example.test., file: example.test.zone}\n" +
			"geo: {mmdb: \"" + mmdb + "\"}\n"
	}
	tests := []struct {
		name   string
		config string
		code   int
		want   string // in stdout for 0, in stderr otherwise
	}{
		{"good mmdb", config(demoMMDB), 0, "ok: 1 zones"},
		{"corrupt mmdb", config("corrupt.mmdb"), 1, "corrupt.mmdb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "-")+".yaml")
			if err := os.WriteFile(p, []byte(tt.config), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			code := run([]string{"-check", "-config", p}, &out, &errb)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %s)", code, tt.code, errb.String())
			}
			got := out.String()
			if tt.code != 0 {
				got = errb.String()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("output %q lacks %q", got, tt.want)
			}
		})
	}
}

// TestCheckWarnsUnprotectedToken: -check passes a config whose admin
// token file others may read, and prints the warning naming it and its
// mode; an empty config fails it, saying there are no zones.
func TestCheckWarnsUnprotectedToken(t *testing.T) {
	dir := t.TempDir()
	zone := "$ORIGIN example.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 604800 60\n@ IN NS ns1\nns1 IN A 127.0.0.1\n"
	files := map[string]string{
		"example.test.zone": zone,
		"admin.token":       "admin-token-0123456789abcdef\n",
		"dnsd.yaml":         "listen: [\"127.0.0.1:0\"]\nzones:\n  - {origin: example.test., file: example.test.zone}\nadmin_token: {file: admin.token}\n",
		"empty.yaml":        "",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "admin.token"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, config string
		code         int
		stderr       string
	}{
		{"unprotected token", "dnsd.yaml", 0, "level=WARN msg=\"config warning\" warning=\"" + filepath.Join(dir, "dnsd.yaml") + ":4:1: admin_token: UNPROTECTED SECRET FILE admin.token: mode 0644"},
		{"empty config", "empty.yaml", 1, "empty.yaml:1:1: no zones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run([]string{"-check", "-config", filepath.Join(dir, tt.config)}, &out, &errb); code != tt.code {
				t.Errorf("exit %d, want %d (stderr %s)", code, tt.code, errb.String())
			}
			if !strings.Contains(errb.String(), tt.stderr) {
				t.Errorf("stderr %q lacks %q", errb.String(), tt.stderr)
			}
		})
	}
}
