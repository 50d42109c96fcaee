package yamlconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadSecretFile: a secret file that its group or others can get at
// is read, with a warning naming it and its mode; a private one has none.
func TestReadSecretFile(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		warn string // "" for no warning
	}{
		{"owner only", 0o600, ""},
		{"owner read only", 0o400, ""},
		{"group readable", 0o640, "UNPROTECTED SECRET FILE group.secret: mode 0640 lets group or others at it (chmod 600 group.secret)"},
		{"world readable", 0o644, "mode 0644"},
		{"others only", 0o604, "mode 0604"},
		{"group writable", 0o620, "mode 0620"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := filepath.Join(t.TempDir(), "group.secret")
			if err := os.WriteFile(name, []byte(" s3cret \n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(name, tt.mode); err != nil {
				t.Fatal(err)
			}
			secret, warning, err := ReadSecretFile(name, "group.secret")
			if err != nil || secret != "s3cret" {
				t.Fatalf("ReadSecretFile: %q, %v; want s3cret", secret, err)
			}
			if tt.warn == "" && warning != "" || tt.warn != "" && !strings.Contains(warning, tt.warn) {
				t.Errorf("warning %q, want %q", warning, tt.warn)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		if _, _, err := ReadSecretFile(filepath.Join(t.TempDir(), "nope"), "nope"); !os.IsNotExist(err) {
			t.Errorf("error %v, want not exist", err)
		}
	})
}

// TestWarnings: a warning is prefixed as an error is and fails nothing.
func TestWarnings(t *testing.T) {
	e := NewErrors("d.yaml", Positions{"": {1, 1}, "admin_token_file": {3, 1}}, "zones")
	e.Warnf("admin_token_file", "admin_token_file: %s", "UNPROTECTED")
	if got := e.Warnings(); len(got) != 1 || got[0] != "d.yaml:3:1: admin_token_file: UNPROTECTED" {
		t.Errorf("warnings %q", got)
	}
	if e.Err() != nil || e.Len() != 0 {
		t.Errorf("a warning is an error: %v", e.Err())
	}
}
