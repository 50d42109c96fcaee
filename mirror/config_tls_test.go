package mirror

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/probe/probetest"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// writeCert writes a certificate for names, signed by a throw-away CA,
// and its key to dir/name.crt and dir/name.key.
func writeCert(t *testing.T, dir, name string, names ...string) {
	t.Helper()
	probetest.NewCA(t, t.TempDir(), "ca").LeafFor(t, dir, name, names...)
}

// TestConfigTLS covers the tls block: listen and certificates together,
// addresses apart from the plain and admin ones, pairs that load, the
// files resolved, handoff refused, and the warning when no certificate
// covers the group or the host name.
func TestConfigTLS(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, "www", "www.example.org")
	writeCert(t, dir, "fra1", "fra1.example.org")
	writeCert(t, dir, "both", "www.example.org", "fra1.example.org")
	if err := os.WriteFile(filepath.Join(dir, "bad.crt"), []byte("not PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeCert(t, filepath.Join(dir, "root"), "served", "www.example.org", "fra1.example.org")
	head := "listen: [':80']\nadmin: 127.0.0.1:9180\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\nroot: root\n"
	dnsd := "dnsd: {url: 'http://127.0.0.1:9053', secret: {file: group.secret}}\n"
	if err := os.WriteFile(filepath.Join(dir, "group.secret"), []byte("s3cret-s3cret-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pairs := "certificates: [{cert_file: www.crt, key_file: www.key}, {cert_file: fra1.crt, key_file: fra1.key}]"
	dispatcher := strings.Replace(head, "root: root\n", "dispatcher: true\n", 1) + dnsd
	tests := []struct {
		name, yaml string
		want       string // the error; "" is valid
		warn       string // a warning expected; "" none
	}{
		{"two certificates", head + "tls: {listen: [':443'], " + pairs + "}\n", "", ""},
		{"one for both names", head + "tls: {listen: [':443', '[::]:8443'], certificates: [{cert_file: both.crt, key_file: both.key}]}\n", "", ""},
		{"group name not covered", head + "tls: {listen: [':443'], certificates: [{cert_file: fra1.crt, key_file: fra1.key}]}\n", "",
			`mirror.yaml:7:25: tls.certificates: no certificate covers the group name "www.example.org"`},
		{"host name not covered", head + "tls: {listen: [':443'], certificates: [{cert_file: www.crt, key_file: www.key}]}\n", "",
			`tls.certificates: no certificate covers the host name "fra1.example.org"`},
		{"listen without certificates", head + "tls: {listen: [':443']}\n", "mirror.yaml:7:7: tls.listen: needs certificates or acme", ""},
		{"acme", head + dnsd + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', email: ops@example.org, dir: acme}}\n", "", ""},
		{"acme and files", head + dnsd + "tls: {listen: [':443'], " + pairs + ", acme: {directory: 'https://ca.example/dir', dir: acme, challenge: dns-01}}\n", "", ""},
		{"acme without directory", head + dnsd + "tls: {listen: [':443'], acme: {dir: acme}}\n", "mirror.yaml:8:25: tls.acme: directory is required", ""},
		{"acme over http", head + dnsd + "tls: {listen: [':443'], acme: {directory: 'http://ca.example/dir', dir: acme}}\n", `tls.acme.directory: "http://ca.example/dir": want an https URL`, ""},
		{"acme without dir", head + dnsd + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir'}}\n", "tls.acme: dir is required", ""},
		{"acme bad email", head + dnsd + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', dir: acme, email: 'mailto:ops@example.org'}}\n", `tls.acme.email: "mailto:ops@example.org": want one address`, ""},
		{"acme bad ca_file", head + dnsd + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', dir: acme, ca_file: bad.crt}}\n", `tls.acme.ca_file: "bad.crt" holds no PEM certificate`, ""},
		{"acme without listen", head + dnsd + "tls: {acme: {directory: 'https://ca.example/dir', dir: acme}}\n", "tls.acme: needs tls.listen", ""},
		{"acme without dnsd", head + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', dir: acme}}\n", "tls.acme.challenge: dns-01 needs dnsd", ""},
		{"acme http-01", head + "tls: {listen: [':443'], " + pairs + ", acme: {directory: 'https://ca.example/dir', dir: acme, challenge: http-01}}\n", "", ""},
		{"acme http-01 without a file for the group", head + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', dir: acme, challenge: http-01}}\n", "",
			`mirror.yaml:7:80: tls.acme.challenge: http-01 proves the host name only (the CA may reach any member for the group name): https for the group name "www.example.org" needs a file of tls.certificates`},
		{"acme http-01 off port 80", strings.Replace(head, "':80'", "':8080'", 1) + "tls: {listen: [':443'], " + pairs + ", acme: {directory: 'https://ca.example/dir', dir: acme, challenge: http-01}}\n", "",
			"tls.acme.challenge: http-01: no listen address has port 80, where the CA connects"},
		{"acme http-01 without listen", strings.Replace(head, "listen: [':80']\n", "", 1) + "tls: {listen: [':443'], " + pairs + ", acme: {directory: 'https://ca.example/dir', dir: acme, challenge: http-01}}\n",
			"listen: at least one address is required", ""},
		{"acme http-01 dispatcher", dispatcher + "tls: {listen: [':443'], " + pairs + ", acme: {directory: 'https://ca.example/dir', dir: acme, challenge: http-01}}\n", "", ""},
		{"acme tls-alpn-01", head + "tls: {listen: [':443'], certificates: [{cert_file: www.crt, key_file: www.key}], acme: {directory: 'https://ca.example/dir', dir: acme, challenge: tls-alpn-01}}\n", "", ""},
		{"acme tls-alpn-01 off port 443", head + "tls: {listen: ['[::]:8443'], " + pairs + ", acme: {directory: 'https://ca.example/dir', dir: acme, challenge: tls-alpn-01}}\n", "",
			"tls.acme.challenge: tls-alpn-01: no tls.listen address has port 443"},
		{"acme tls-alpn-01 without tls.listen", head + "tls: {acme: {directory: 'https://ca.example/dir', dir: acme, challenge: tls-alpn-01}}\n", "mirror.yaml:7:7: tls.acme: needs tls.listen", ""},
		{"acme dns-01 dispatcher", dispatcher + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', dir: acme}}\n", "tls.acme: a dispatcher is no member", ""},
		{"acme unknown challenge", head + dnsd + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', dir: acme, challenge: dns-02}}\n", `mirror.yaml:8:80: tls.acme.challenge: "dns-02": want dns-01, http-01 or tls-alpn-01`, ""},
		{"acme dir in the root", head + dnsd + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', dir: root/acme}}\n", `root: "root" holds the ACME directory`, ""},
		{"acme unknown key", head + dnsd + "tls: {listen: [':443'], acme: {directory: 'https://ca.example/dir', dir: acme, renew: 30d}}\n", "tls.acme.renew: unknown field", ""},
		{"certificates without listen", head + "tls: {" + pairs + "}\n", "mirror.yaml:7:7: tls.certificates: needs listen", ""},
		{"plain address", head + "tls: {listen: [':80'], " + pairs + "}\n", `mirror.yaml:7:16: tls.listen[0]: ":80" is also a plain or the admin listen address`, ""},
		{"admin address", head + "tls: {listen: ['127.0.0.1:9180'], " + pairs + "}\n", `tls.listen[0]: "127.0.0.1:9180" is also a plain or the admin listen address`, ""},
		{"twice", head + "tls: {listen: [':443', ':443'], " + pairs + "}\n", `tls.listen[1]: ":443" is listed twice`, ""},
		{"port 0 twice", head + "tls: {listen: ['127.0.0.1:0', '127.0.0.1:0'], " + pairs + "}\n", "", ""},
		{"bad address", head + "tls: {listen: ['www.example.org:443'], " + pairs + "}\n", `tls.listen[0]: "www.example.org:443": host "www.example.org" is not an IP address`, ""},
		{"pair missing its key", head + "tls: {listen: [':443'], certificates: [{cert_file: www.crt}]}\n", "tls.certificates[0]: key_file is required with cert_file", ""},
		{"empty pair", head + "tls: {listen: [':443'], certificates: [{}]}\n", "tls.certificates[0]: cert_file and key_file are required", ""},
		{"pair that does not match", head + "tls: {listen: [':443'], certificates: [{cert_file: www.crt, key_file: fra1.key}]}\n", `tls.certificates[0]: key pair "www.crt", "fra1.key": tls: private key does not match public key`, ""},
		{"file that is no certificate", head + "tls: {listen: [':443'], certificates: [{cert_file: bad.crt, key_file: www.key}]}\n", `tls.certificates[0]: key pair "bad.crt", "www.key"`, ""},
		{"file missing", head + "tls: {listen: [':443'], certificates: [{cert_file: none.crt, key_file: www.key}]}\n", `tls.certificates[0].cert_file: cannot use "none.crt": no such file or directory`, ""},
		{"key in the root", head + "tls: {listen: [':443'], certificates: [{cert_file: root/served.crt, key_file: root/served.key}]}\n", `root: "root" holds a TLS key (tls.certificates[0].key_file): it would be served`, ""},
		{"unknown key", head + "tls: {listen: [':443'], ocsp: true}\n", "tls.ocsp: unknown field", ""},
		{"handoff front end", strings.Replace(head, "root: root\n", "", 1) + "backends: [{name: b1, url: 'http://10.0.0.1:8080', handoff_socket: /run/b1.sock}]\nsite: {mode: handoff}\ntls: {listen: [':443'], " + pairs + "}\n",
			"site.mode: handoff passes the clients' TCP connections to the back ends", ""},
		{"redirect front end", strings.Replace(head, "root: root\n", "", 1) + "backends: [{name: b1, url: 'http://10.0.0.1:8080', public_url: 'https://b1.example.org/', admin_url: 'http://10.0.0.1:8081'}]\nsite: {mode: redirect}\ntls: {listen: [':443'], " + pairs + "}\n", "", ""},
		{"redirect front end to http", strings.Replace(head, "root: root\n", "", 1) + "backends: [{name: b1, url: 'http://10.0.0.1:8080', public_url: 'http://b1.example.org/', admin_url: 'http://10.0.0.1:8081'}]\nsite: {mode: redirect}\ntls: {listen: [':443'], " + pairs + "}\n",
			`backends[0].public_url: "http://b1.example.org/": with tls.listen, site.mode redirect would send https clients to http`, ""},
		{"proxy front end", strings.Replace(head, "root: root\n", "", 1) + "backends: [{name: b1, url: 'http://10.0.0.1:8080'}]\ntls: {listen: [':443'], " + pairs + "}\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(tt.yaml))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case !strings.Contains(err.Error(), tt.want):
				t.Fatalf("error\n%v\ndoes not contain\n%s", err, tt.want)
			default:
				return
			}
			warnings := strings.Join(cfg.Warnings, "\n")
			if tt.warn == "" && warnings != "" || !strings.Contains(warnings, tt.warn) {
				t.Errorf("warnings %q, want %q", warnings, tt.warn)
			}
			for _, f := range cfg.TLS.Certificates {
				if !filepath.IsAbs(f.CertFile) && filepath.Dir(f.CertFile) != dir || filepath.Dir(f.KeyFile) != dir {
					t.Errorf("files %q, %q not resolved against %s", f.CertFile, f.KeyFile, dir)
				}
			}
		})
	}
}

// TestRestartChangesTLS: the certificates are read again by a reload; the
// HTTPS listen addresses need a restart.
func TestRestartChangesTLS(t *testing.T) {
	base := func() *Config {
		return &Config{File: "mirror.yaml", Listen: []string{":80"}, TLS: TLSConfig{
			Listen: []string{":443"}, Certificates: []yamlconf.TLSFiles{{CertFile: "a.crt", KeyFile: "a.key"}},
		}}
	}
	tests := []struct {
		name    string
		edit    func(*Config)
		restart string // "" reloadable
	}{
		{"same", func(*Config) {}, ""},
		{"other files", func(c *Config) { c.TLS.Certificates[0].CertFile = "b.crt" }, ""},
		{"one more", func(c *Config) {
			c.TLS.Certificates = append(c.TLS.Certificates, yamlconf.TLSFiles{CertFile: "b.crt", KeyFile: "b.key"})
		}, ""},
		{"listen", func(c *Config) { c.TLS.Listen = []string{":8443"} }, "tls.listen: changed"},
		{"off", func(c *Config) { c.TLS = TLSConfig{} }, "tls.listen: changed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := base()
			tt.edit(next)
			err := RestartChanges(base(), next)
			if tt.restart == "" && err != nil || tt.restart != "" && (err == nil || !strings.Contains(err.Error(), tt.restart)) {
				t.Fatalf("RestartChanges = %v, want %q", err, tt.restart)
			}
		})
	}
}
