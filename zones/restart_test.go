package zones

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRestartChanges(t *testing.T) {
	const cur = "listen: [\"127.0.0.1:53\"]\nadmin: 127.0.0.1:8053\nhealth: {fall: 3}\n"
	tests := []struct {
		name string
		next string
		want []string // substrings of the error; none: reloadable
	}{
		{"same", cur, nil},
		{"other keys only", "listen: [\"127.0.0.1:53\"]\nadmin: 127.0.0.1:8053\nhealth: {fall: 5}\n", nil},
		{"listen", "listen: [\"127.0.0.1:5353\"]\nadmin: 127.0.0.1:8053\n",
			[]string{"next.yaml:1:1: listen: changed from [127.0.0.1:53] to [127.0.0.1:5353]: needs a restart"}},
		{"admin removed", "listen: [\"127.0.0.1:53\"]\n",
			[]string{`next.yaml: admin: changed from "127.0.0.1:8053" to "": needs a restart`}},
		{"udp sockets", "listen: [\"127.0.0.1:53\"]\nadmin: 127.0.0.1:8053\nserver: {udp_sockets: 4}\n",
			[]string{"next.yaml:3:10: server.udp_sockets: changed from 0 to 4: needs a restart"}},
		{"admin_tls on", cur + "admin_tls: {cert_file: a.crt, key_file: a.key}\n",
			[]string{"next.yaml:4:1: admin_tls: changed from off to on: needs a restart"}},
		{"limits", cur + "limits: {max_conns_per_client: 8}\n",
			[]string{"next.yaml:4:1: limits: changed from"}},
		{"both", "listen: [\"127.0.0.1:53\", \"[::1]:53\"]\nadmin: 127.0.0.1:9053\n",
			[]string{"next.yaml:1:1: listen: changed", "next.yaml:2:1: admin: changed"}},
	}
	// A running config with TLS takes new certificate files.
	withTLS := cur + "admin_tls: {cert_file: a.crt, key_file: a.key}\n"
	tlsA, err := Parse("cur.yaml", []byte(withTLS))
	if err != nil {
		t.Fatal(err)
	}
	tlsB, err := Parse("next.yaml", []byte(strings.ReplaceAll(withTLS, "a.", "b.")))
	if err != nil {
		t.Fatal(err)
	}
	if err := RestartChanges(tlsA, tlsB); err != nil {
		t.Errorf("new admin_tls files: %v, want reloadable", err)
	}
	a, err := Parse("cur.yaml", []byte(cur))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Parse("next.yaml", []byte(tt.next))
			if err != nil {
				t.Fatal(err)
			}
			err = RestartChanges(a, b)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("RestartChanges = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNeedsRestart) {
				t.Fatalf("RestartChanges = %v, want ErrNeedsRestart", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestRestartChangesCAFile: health.ca_file is read at start, so a reload
// that names another file, or finds other certificates in the same one,
// needs a restart; the same file with the same contents reloads.
func TestRestartChangesCAFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join("testdata", "good")
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(good, from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("example.org.zone", "example.org.zone")
	load := func(caFile string) *Config {
		t.Helper()
		text := "zones:\n  - {origin: example.org., file: example.org.zone}\n"
		if caFile != "" {
			text += "health: {ca_file: " + caFile + "}\n"
		}
		name := filepath.Join(dir, "dnsd.yaml")
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		set, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		return set.Config
	}
	copyFile("ca.pem", "ca.pem")
	cur := load("ca.pem")
	if len(cur.Health.CAPEM()) == 0 {
		t.Fatal("no CA certificates read")
	}
	tests := []struct {
		name  string
		setup func() *Config
		want  string // "" reloadable
	}{
		{"the same file, the same certificates", func() *Config { return load("ca.pem") }, ""},
		{"another file", func() *Config { copyFile("ca2.pem", "other.pem"); return load("other.pem") }, `health.ca_file: changed from "ca.pem" to "other.pem"`},
		{"the same file, other certificates", func() *Config { copyFile("ca2.pem", "ca.pem"); return load("ca.pem") }, `health.ca_file: changed from "ca.pem" to "ca.pem" (607 bytes)`},
		{"none", func() *Config { return load("") }, `health.ca_file: changed from "ca.pem" to ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RestartChanges(cur, tt.setup())
			if tt.want == "" {
				if err != nil {
					t.Fatalf("RestartChanges = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrNeedsRestart) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("RestartChanges = %v, want ErrNeedsRestart with %q", err, tt.want)
			}
		})
	}
}
