package yamlconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// secretConfig has a secret under a mapping, as both daemons' configs do.
type secretConfig struct {
	Group struct {
		Secret Secret `yaml:"secret"`
	} `yaml:"group"`
}

// TestSecret: a secret is a string or {file: PATH}; Read returns it
// either way, warns of a file others can read and names the file in
// every error.
func TestSecret(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"private.secret": 0o600, "open.secret": 0o644, "empty.secret": 0o600} {
		text := " s3cret \n"
		if name == "empty.secret" {
			text = "\n"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		yaml      string
		decodeErr string // "" for none
		secret    string
		warn      string // substring, "" for none
		readErr   string // substring, "" for none
	}{
		{name: "inline", yaml: "group:\n  secret: s3cret\n", secret: "s3cret"},
		{name: "absent", yaml: "group: {}\n"},
		{name: "empty string", yaml: "group:\n  secret: \"\"\n"},
		{name: "file", yaml: "group:\n  secret: {file: private.secret}\n", secret: "s3cret"},
		{name: "file block", yaml: "group:\n  secret:\n    file: private.secret\n", secret: "s3cret"},
		{name: "unprotected file", yaml: "group:\n  secret: {file: open.secret}\n", secret: "s3cret", warn: "UNPROTECTED SECRET FILE open.secret: mode 0644"},
		{name: "missing file", yaml: "group:\n  secret: {file: nope}\n", readErr: "file nope: no such file or directory"},
		{name: "empty file", yaml: "group:\n  secret: {file: empty.secret}\n", readErr: "file empty.secret is empty"},
		{name: "mapping without a file", yaml: "group:\n  secret: {file: \"\"}\n", readErr: "{file: PATH} without a PATH"},
		{name: "unknown key", yaml: "group:\n  secret:\n    path: x\n", decodeErr: "c.yaml:3:5: group.secret.path: unknown field"},
		{name: "sequence", yaml: "group:\n  secret: [x]\n", decodeErr: "c.yaml:2:11: group.secret: wrong type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c secretConfig
			_, err := Decode("c.yaml", []byte(tt.yaml), &c)
			if tt.decodeErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.decodeErr) {
					t.Fatalf("Decode error %v, want %q", err, tt.decodeErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			secret, warning, err := c.Group.Secret.Read(dir)
			if tt.readErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.readErr) {
					t.Fatalf("Read error %v, want %q", err, tt.readErr)
				}
				return
			}
			if err != nil || secret != tt.secret {
				t.Fatalf("Read: %q, %v; want %q", secret, err, tt.secret)
			}
			if tt.warn == "" && warning != "" || tt.warn != "" && !strings.Contains(warning, tt.warn) {
				t.Errorf("warning %q, want %q", warning, tt.warn)
			}
			if s := c.Group.Secret.String(); strings.Contains(s, "s3cret") {
				t.Errorf("String() shows the secret: %s", s)
			}
		})
	}
}

// TestRetired: a retired key is an error at the place it was written,
// saying what to write instead: the first one written.
func TestRetired(t *testing.T) {
	retired := []Retired{
		{Path: "members[].secret_file", Instead: "write secret: {file: PATH}"},
		{Path: "admin_limits", Instead: "write limits"},
	}
	tests := []struct {
		name string
		yaml string
		want string // "" for no error
	}{
		{"none", "admin: x\n", ""},
		{"top level", "admin: x\nadmin_limits: {}\n", "c.yaml:2:1: admin_limits: retired key: write limits"},
		{"in a list", "members:\n  - name: a\n  - name: b\n    secret_file: s\n",
			"c.yaml:4:5: members[1].secret_file: retired key: write secret: {file: PATH}"},
		{"the first written", "members:\n  - name: a\n    secret_file: s\nadmin_limits: {}\n  \n",
			"c.yaml:3:5: members[0].secret_file: retired key: write secret: {file: PATH}"},
		{"the first written, out of order", "admin_limits: {}\nmembers:\n  - secret_file: s\n",
			"c.yaml:1:1: admin_limits: retired key: write limits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v map[string]any
			_, err := Decode("c.yaml", []byte(tt.yaml), &v, retired...)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("error\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}
