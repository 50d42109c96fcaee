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
		{"from a file, trimmed", "admin_token: {file: token}\n", "from-a-file-0123456789", ""},
		{"too short", "listen: []\nadmin_token: short\n", "", "c.yaml:2:1: admin_token must be at least 16 characters"},
		{"white space", "admin_token: \"has space 0123456789\"\n", "", "c.yaml:1:1: admin_token must not contain white space"},
		{"missing file", "admin_token: {file: nope}\n", "", "c.yaml:1:1: admin_token: file nope: no such file or directory"},
		{"empty file", "admin_token: {file: empty}\n", "", "c.yaml:1:1: admin_token: file empty is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(tt.yaml+"allow_no_zones: true\n"))
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

// TestSecretFileWarnings: an admin token file or a group's secret files
// readable by group or others load, each with a warning at the key that
// names it; private ones give none.
func TestSecretFileWarnings(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("from-a-file-0123456789\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("private", 0o600)
	write("open", 0o644)
	write("group", 0o640)
	write("previous", 0o604)
	if err := os.WriteFile(filepath.Join(dir, "previous"), []byte("the-previous-secret-0123\n"), 0o604); err != nil {
		t.Fatal(err)
	}
	zone, err := os.ReadFile(filepath.Join("testdata", "good", "example.org.zone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), zone, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"private token", "admin_token: {file: private}\n", nil},
		{"open token", "listen: []\nadmin_token: {file: open}\n",
			[]string{"c.yaml:2:1: admin_token: UNPROTECTED SECRET FILE open: mode 0644"}},
		{"group secrets", "groups:\n  - name: www.example.org\n    secret: {file: group}\n    previous_secret:\n      file: previous\n    previous_secret_until: 2030-01-01T00:00:00Z\n    members: [{name: a, host: a.example.org, addresses: [192.0.2.1], capacity: 10}]\n" +
			"zones: [{origin: example.org, file: example.org.zone}]\n",
			[]string{
				`c.yaml:3:5: group "www.example.org.": secret: UNPROTECTED SECRET FILE group: mode 0640`,
				`c.yaml:4:5: group "www.example.org.": previous_secret: UNPROTECTED SECRET FILE previous: mode 0604`,
			}},
		{"open etcd password", "cluster:\n  node: ns1\n  etcd: {endpoints: [\"http://127.0.0.1:2379\"], username: dnsd, password: {file: open}}\n",
			[]string{"c.yaml:3:64: cluster: etcd password: UNPROTECTED SECRET FILE open: mode 0644"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(tt.yaml+"allow_no_zones: true\n"))
			if err != nil {
				t.Fatal(err)
			}
			set, err := Build(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(set.Warnings) != len(tt.want) {
				t.Fatalf("warnings %q, want %q", set.Warnings, tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(set.Warnings[i], filepath.Join(dir, w)) {
					t.Errorf("warning %q, want it to start %q", set.Warnings[i], filepath.Join(dir, w))
				}
			}
		})
	}
}

// TestRetiredKeys: each *_file twin of a secret, and each old name of a
// key, is an error at the place it was written that says what to write
// instead.
func TestRetiredKeys(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"admin_token_file", "admin_token_file: token\n", "c.yaml:1:1: admin_token_file: retired key: write admin_token: {file: PATH}"},
		{"secret_file", "groups:\n  - name: www.example.org\n    secret_file: s\n", "c.yaml:3:5: groups[0].secret_file: retired key: write secret: {file: PATH}"},
		{"previous_secret_file", "groups:\n  - name: a.example.org\n  - name: www.example.org\n    previous_secret_file: s\n", "c.yaml:4:5: groups[1].previous_secret_file: retired key: write previous_secret: {file: PATH}"},
		{"password_file", "cluster:\n  etcd:\n    password_file: p\n", "c.yaml:3:5: cluster.etcd.password_file: retired key: write password: {file: PATH}"},
		{"admin_limits", "admin: 127.0.0.1:0\nadmin_limits: {max_conns_per_client: 8}\n", "c.yaml:2:1: admin_limits: retired key: write limits (the name mirror.yaml has for the same block)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("c.yaml", []byte(tt.yaml))
			if err == nil || err.Error() != tt.want {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
}
