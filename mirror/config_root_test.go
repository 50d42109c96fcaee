package mirror

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigRootSafety checks that a document root that would serve the
// machine's or the mirror's own secrets is refused at its line, also
// through a symbolic link, and that a root beside them is not.
func TestConfigRootSafety(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("www/index.html", "hello\n")
	write("group.secret", "s3cret\n")
	write("www/group.secret", "s3cret\n")
	write("www/tls/admin.key", "not a key\n")
	write("www/tls/admin.crt", "not a cert\n")
	write("conf/x", "")
	for _, l := range []struct{ name, to string }{{"etc-link", "/etc"}, {"www-link", "www"}, {"slash-link", "/"}} {
		if err := os.Symlink(l.to, filepath.Join(dir, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	head := "listen: ['127.0.0.1:0']\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\n"
	tests := []struct {
		name   string
		config string // the config file's name in dir
		yaml   string
		want   string // "" means valid
	}{
		{"file system root", "mirror.yaml", head + "root: /\n", `mirror.yaml:5:1: root: "/" is the file system's root`},
		{"file system root through a link", "mirror.yaml", head + "root: slash-link\n", `root: "slash-link" is the file system's root`},
		{"etc", "mirror.yaml", head + "root: /etc\n", `mirror.yaml:5:1: root: "/etc" is in the system directory /etc`},
		{"below etc", "mirror.yaml", head + "root: /etc/ssl\n", `root: "/etc/ssl" is in the system directory /etc`},
		{"etc through a link", "mirror.yaml", head + "root: etc-link\n", `root: "etc-link" is in the system directory /etc`},
		{"proc", "mirror.yaml", head + "root: /proc/self\n", `is in the system directory /proc`},
		{"usr", "mirror.yaml", head + "root: /usr\n", `root: "/usr" is in the system directory /usr`},
		{"bin, a link to usr/bin", "mirror.yaml", head + "root: /usr/bin\n", `is in the system directory /bin`},
		{"var/lib", "mirror.yaml", head + "root: /var/lib\n", `root: "/var/lib" is in the system directory /var/lib`},
		{"dot, holding the config file", "mirror.yaml", head + "root: .\n", `mirror.yaml:5:1: root: "." holds the config file`},
		{"parent of the config file", "conf/mirror.yaml", head + "root: ..\n", `root: ".." holds the config file`},
		{"holding the push secret", "mirror.yaml", head + "root: www\ndnsd: {url: 'http://a', secret: {file: www/group.secret}}\n", `root: "www" holds the push secret (dnsd.secret)`},
		{"holding the push secret through a link", "mirror.yaml", head + "root: www-link\ndnsd: {url: 'http://a', secret: {file: www/group.secret}}\n", `root: "www-link" holds the push secret (dnsd.secret)`},
		{"holding the admin TLS key", "mirror.yaml", head + "root: www\nadmin: 127.0.0.1:0\nadmin_tls: {cert_file: www/tls/admin.crt, key_file: www/tls/admin.key}\n", `root: "www" holds the admin TLS key (admin_tls.key_file)`},
		{"holding the admin TLS certificate", "mirror.yaml", head + "root: www\nadmin: 127.0.0.1:0\nadmin_tls: {cert_file: www/tls/admin.crt, key_file: www/tls/admin.key}\n", `root: "www" holds the admin TLS certificate (admin_tls.cert_file)`},
		{"beside the secret", "mirror.yaml", head + "root: www\ndnsd: {url: 'http://a', secret: {file: group.secret}}\n", ""},
		{"usr/share is content", "mirror.yaml", head + "root: /usr/share\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, tt.config)
			if err := os.WriteFile(file, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			defer os.Remove(file)
			_, err := LoadConfig(file)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("error\n%v\ndoes not contain\n%s", err, tt.want)
			}
		})
	}
}
