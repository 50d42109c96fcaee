package zones

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("  from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		yaml    string
		want    string // the token after Build
		wantErr string
	}{
		{"none", "listen: [\"127.0.0.1:0\"]\n", "", ""},
		{"inline", "admin_token: inline-token-0123456789\n", "inline-token-0123456789", ""},
		{"from a file, trimmed", "admin_token_file: token\n", "from-a-file-0123456789", ""},
		{"too short", "listen: []\nadmin_token: short\n", "", "c.yaml:2:1: admin_token must be at least 16 characters"},
		{"white space", "admin_token: \"has space 0123456789\"\n", "", "c.yaml:1:1: admin_token must not contain white space"},
		{"both", "admin_token: inline-token-0123456789\nadmin_token_file: token\n", "", "c.yaml:2:1: admin_token and admin_token_file are mutually exclusive"},
		{"missing file", "admin_token_file: nope\n", "", "c.yaml:1:1: admin_token_file: open "},
		{"empty file", "admin_token_file: empty\n", "", "c.yaml:1:1: admin_token_file empty is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			set, err := Build(cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if set.Config.AdminToken != tt.want {
				t.Errorf("token %q, want %q", set.Config.AdminToken, tt.want)
			}
			if _, err := Build(set.Config); err != nil {
				t.Errorf("Build of its own output: %v", err)
			}
		})
	}
}
