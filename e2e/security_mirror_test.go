package e2e

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// Tests of issue 21's serving findings with the real binaries: apt on a
// flat and a dists/ repository, -check on roots that would serve secrets,
// the scheme of 302s behind a TLS terminator, and the request targets and
// Host ports that are refused.

// aptPackages is a Packages file of one stanza.
const aptPackages = `Package: tm-hello
Version: 1.0
Architecture: all
Maintainer: transmirror e2e <e2e@example.test>
Filename: pool/tm-hello_1.0_all.deb
Size: 1234
SHA256: 0000000000000000000000000000000000000000000000000000000000000000
Description: a package that apt lists from a transmirror mirror

`

// aptRelease is an unsigned Release file (no InRelease: apt with
// [trusted=yes] takes the Release alone) listing the Packages file at
// the path name relative to it.
func aptRelease(suite, name string, extra string) string {
	sum := sha256.Sum256([]byte(aptPackages))
	return fmt.Sprintf("Origin: transmirror-e2e\nLabel: transmirror-e2e\nSuite: %s\nCodename: %s\nDate: %s\n%sSHA256:\n %s %d %s\n",
		suite, suite, time.Now().UTC().Format(time.RFC1123), extra, hex.EncodeToString(sum[:]), len(aptPackages), name)
}

// startPlainMirror starts a mirror with no dnsd (it serves every request
// itself) on a root in dir, with extra config lines.
func startPlainMirror(t *testing.T, dir, root, extra string) *mirrorProc {
	t.Helper()
	cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: apt1
host: apt1.mirrors.example.test
root: %s
%s`, root, extra)
	return runMirror(t, writeFile(t, dir, "mirror.yaml", cfg), "apt1")
}

// TestAptUpdate runs the real apt-get update against a real mirror on the
// group name, with the mirror as apt's HTTP proxy (so apt resolves no
// name: it sends absolute-form requests, "GET http://www.example.test/..."
// to the mirror): a flat repository ("deb URL ./", whose Release and
// Packages apt asks for as /debian/./Release and /debian/./Packages, which
// every mirror answered 400 before) and a dists/ one. apt must exit 0
// with both Packages files in its lists directory.
func TestAptUpdate(t *testing.T) {
	aptGet, err := exec.LookPath("apt-get")
	if err != nil {
		t.Fatalf("apt-get is needed (make deps installs it): %v", err)
	}
	dir := t.TempDir()
	root := filepath.Join(dir, "www")
	for _, d := range []string{"www/debian", "www/deb/dists/stable/main/binary-amd64", "apt/state", "apt/cache", "apt/empty"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "debian"), "Packages", aptPackages)
	writeFile(t, filepath.Join(root, "debian"), "Release", aptRelease("flat", "Packages", ""))
	writeFile(t, filepath.Join(root, "deb/dists/stable/main/binary-amd64"), "Packages", aptPackages)
	writeFile(t, filepath.Join(root, "deb/dists/stable"), "Release",
		aptRelease("stable", "main/binary-amd64/Packages", "Architectures: amd64\nComponents: main\n"))
	m := startPlainMirror(t, dir, root, "")

	apt := filepath.Join(dir, "apt")
	sources := writeFile(t, apt, "sources.list",
		"deb [trusted=yes] http://www.example.test/debian ./\n"+
			"deb [trusted=yes] http://www.example.test/deb stable main\n")
	empty := filepath.Join(apt, "empty")
	args := []string{"update",
		"-o", "Acquire::http::Proxy=http://" + m.HTTP + "/",
		"-o", "Acquire::Retries=0",
		"-o", "Acquire::Languages=none",
		"-o", "APT::Architecture=amd64",
		"-o", "APT::Architectures=amd64",
		"-o", "Dir::State=" + filepath.Join(apt, "state"),
		"-o", "Dir::Cache=" + filepath.Join(apt, "cache"),
		"-o", "Dir::Etc::SourceList=" + sources,
		"-o", "Dir::Etc::SourceParts=" + empty,
		"-o", "Dir::Etc::Parts=" + empty,
		"-o", "Dir::Etc::PreferencesParts=" + empty,
		"-o", "Dir::Etc::TrustedParts=" + empty,
		"-o", "Debug::NoLocking=1",
		"-o", "APT::Sandbox::User=root",
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, aptGet, args...)
	// apt reads its config files from APT_CONFIG or /etc/apt: an empty
	// file keeps the host's proxy and source settings out.
	cmd.Env = append(os.Environ(), "APT_CONFIG="+writeFile(t, apt, "apt.conf", ""), "http_proxy=", "https_proxy=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	t.Logf("apt-get update:\n%s", out)
	if err != nil {
		t.Fatalf("apt-get update: %v\nmirror:\n%s", err, m.Logs())
	}
	lists := filepath.Join(apt, "state", "lists")
	for _, prefix := range []string{"www.example.test_debian_._Packages", "www.example.test_deb_dists_stable_main_binary-amd64_Packages"} {
		found, _ := filepath.Glob(filepath.Join(lists, prefix+"*"))
		if len(found) == 0 {
			entries, _ := os.ReadDir(lists)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("no %s* in apt's lists: %v", prefix, names)
		}
	}
	for _, line := range []string{"debian ./ Packages", "deb stable/main amd64 Packages"} {
		if !strings.Contains(string(out), "Get:") || !strings.Contains(string(out), line) {
			t.Errorf("apt-get update did not get %q", line)
		}
	}
	if strings.Contains(string(out), "400") || strings.Contains(string(out), "Err:") {
		t.Errorf("apt-get update saw an error")
	}
}

// TestMirrorCheckRefusesSecretRoots runs mirror -check on configs whose
// root would serve the mirror's own secrets or the machine's files: each
// fails with the config's file:line and what the root holds.
func TestMirrorCheckRefusesSecretRoots(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "group.secret", "e2e-group-secret\n")
	if err := os.MkdirAll(filepath.Join(dir, "www"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "www"), "group.secret", "e2e-group-secret\n")
	head := "listen: ['127.0.0.1:0']\ngroup: www.example.test\nmember: a\nhost: a.mirrors.example.test\n"
	tests := []struct {
		name, yaml, want string // want "" means -check passes
	}{
		{"config directory", head + "root: .\ndnsd: {url: 'http://127.0.0.1:1', secret: {file: group.secret}}\n",
			`mirror.yaml:5:1: root: "." holds the config file: it would be served`},
		{"config directory, the secret too", head + "root: .\ndnsd: {url: 'http://127.0.0.1:1', secret: {file: group.secret}}\n",
			`mirror.yaml:5:1: root: "." holds the push secret (dnsd.secret): it would be served`},
		{"file system root", head + "root: /\n", `mirror.yaml:5:1: root: "/" is the file system's root`},
		{"etc", head + "root: /etc\n", `mirror.yaml:5:1: root: "/etc" is in the system directory /etc`},
		{"secret inside the root", head + "root: www\ndnsd: {url: 'http://127.0.0.1:1', secret: {file: www/group.secret}}\n",
			`mirror.yaml:5:1: root: "www" holds the push secret (dnsd.secret)`},
		{"root beside the secret", head + "root: www\ndnsd: {url: 'http://127.0.0.1:1', secret: {file: group.secret}}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, dir, "mirror.yaml", tt.yaml)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin("mirror"), "-check", "-config", path).CombinedOutput()
			switch {
			case tt.want == "" && (err != nil || !strings.Contains(string(out), ": ok: ")):
				t.Errorf("mirror -check: %v\n%s", err, out)
			case tt.want == "":
			case err == nil:
				t.Errorf("mirror -check passed, want it to fail with %q:\n%s", tt.want, out)
			case !strings.Contains(string(out), tt.want):
				t.Errorf("mirror -check output\n%s\ndoes not contain\n%s", out, tt.want)
			}
		})
	}
}

// curlHead sends GET url with the headers through the real curl (no
// proxy, never the resolver: url names an address), with the extra curl
// arguments, and returns the status and the Location.
func curlHead(t *testing.T, rawURL string, headers []string, extra ...string) (int, string) {
	t.Helper()
	args := []string{"-sS", "--noproxy", "*", "--max-time", "10", "-o", "/dev/null", "-D", "-"}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "curl", append(args, rawURL)...).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", rawURL, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(out))), nil)
	if err != nil {
		t.Fatalf("curl %s: %v\n%s", rawURL, err, out)
	}
	return resp.StatusCode, resp.Header.Get("Location")
}

// TestRedirectSchemeBehindProxy starts dnsd, a member and three real
// dispatchers (one that trusts 127.0.0.1 as its TLS terminator, one that
// trusts no one, one with redirect.scheme https) and sends them requests
// with curl from 127.0.0.1, with and without X-Forwarded-Proto: the 302
// is https only where it should be, the scheme's default port is left
// out, and a Host port that is not a port, or a target that is not a
// path, never gets a 302.
func TestRedirectSchemeBehindProxy(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatalf("curl is needed (make deps installs it): %v", err)
	}
	const secret = "e2e-group-secret"
	dir := t.TempDir()
	d := startMembersDNSD(t, dir)
	// The member is behind the same terminator: it serves http and https
	// (its reports say so), so the https requests may be sent to it.
	m := startMirror(t, dir, "fra9", d.Admin, secret, "trusted_proxies: [127.0.0.1]\n")
	if out, err := groupctl(t, d.Admin, secret, "add", "www.example.test", "-name", "fra9", "-host", "fra9.mirrors.example.test",
		"-addr", "127.0.9.1", "-capacity", "1000", "-lat", "50.11", "-lon", "8.68", "-country", "DE",
		"-probe", "http://"+m.Admin+"/v1/load"); err != nil {
		t.Fatalf("groupctl add: %v\n%s", err, out)
	}
	dispatcher := func(name, extra string) *mirrorProc {
		cfg := fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: %s
host: %s.mirrors.example.test
dispatcher: true
dnsd: {url: "http://%s", secret: %q, push_interval: 200ms, view_interval: 200ms}
%s`, name, name, d.Admin, secret, extra)
		return runMirror(t, writeFile(t, dir, name+".yaml", cfg), name)
	}
	trusting := dispatcher("trusting", "trusted_proxies: [127.0.0.1]\n")
	untrusting := dispatcher("untrusting", "")
	https := dispatcher("https", "redirect: {scheme: https}\n")
	// Each dispatcher is ready once its view has the member with the
	// scheme it will be asked for: the member's https comes with its
	// first report, which may reach the views after its http entry.
	ready := []struct {
		p       *mirrorProc
		headers []string
	}{
		{trusting, []string{"Host: www.example.test", "X-Forwarded-Proto: https"}},
		{untrusting, []string{"Host: www.example.test"}},
		{https, []string{"Host: www.example.test"}},
	}
	for _, r := range ready {
		probetest.Until(t, 15*time.Second, func() string {
			if code, loc := curlHead(t, "http://"+r.p.HTTP+"/pub/x.iso", r.headers); code != http.StatusFound {
				return fmt.Sprintf("dispatcher at %s: %d %q, want a 302 once it has the group view", r.p.HTTP, code, loc)
			}
			return ""
		})
	}
	tests := []struct {
		name    string
		to      *mirrorProc
		headers []string
		scheme  string
		port    string // the Location's port, "" for none
	}{
		{"trusted proxy says https", trusting, []string{"Host: www.example.test", "X-Forwarded-Proto: https"}, "https", ""},
		{"trusted proxy says https, Host :443 dropped", trusting, []string{"Host: www.example.test:443", "X-Forwarded-Proto: https"}, "https", ""},
		{"trusted proxy with Forwarded", trusting, []string{"Host: www.example.test", "Forwarded: for=198.51.100.7;proto=https"}, "https", ""},
		{"trusted proxy says nothing", trusting, []string{"Host: www.example.test:8080"}, "http", "8080"},
		{"untrusted peer says https", untrusting, []string{"Host: www.example.test", "X-Forwarded-Proto: https"}, "http", ""},
		{"untrusted peer, Host :80 dropped", untrusting, []string{"Host: www.example.test:80", "X-Forwarded-Proto: https"}, "http", ""},
		{"scheme https, Host :443 dropped", https, []string{"Host: www.example.test:443"}, "https", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, loc := curlHead(t, "http://"+tt.to.HTTP+"/pub/x.iso?v=1", tt.headers)
			if code != http.StatusFound {
				t.Fatalf("status %d, want 302", code)
			}
			u, err := url.Parse(loc)
			if err != nil {
				t.Fatalf("Location %q: %v", loc, err)
			}
			if u.Scheme != tt.scheme || u.Port() != tt.port || u.RequestURI() != "/pub/x.iso?v=1" || !strings.HasSuffix(u.Hostname(), ".mirrors.example.test") {
				t.Errorf("Location %q, want %s://<member>.mirrors.example.test%s/pub/x.iso?v=1", loc, tt.scheme, map[bool]string{true: ":" + tt.port}[tt.port != ""])
			}
		})
	}

	// What the request check refuses never reaches the dispatcher's 302.
	raw := []struct{ name, request string }{
		{"asterisk-form GET", "GET * HTTP/1.1\r\nHost: www.example.test\r\n"},
		{"authority-form GET", "GET www.example.test:80 HTTP/1.1\r\nHost: www.example.test\r\n"},
		{"Host port with a domain", "GET /pub/x.iso HTTP/1.1\r\nHost: www.example.test:80.evil.example\r\n"},
		{"Host port with parameters", "GET /pub/x.iso HTTP/1.1\r\nHost: www.example.test:1;x=y\r\n"},
		{"Host port -1", "GET /pub/x.iso HTTP/1.1\r\nHost: www.example.test:-1\r\n"},
		{"dotdot out of the root", "GET /pub/../../etc/passwd HTTP/1.1\r\nHost: www.example.test\r\n"},
	}
	for _, tt := range raw {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.DialTimeout("tcp", trusting.HTTP, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if _, err := io.WriteString(c, tt.request+"Connection: close\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
				t.Errorf("status %d, Location %q; want 400 and none", resp.StatusCode, resp.Header.Get("Location"))
			}
		})
	}
	// apt's flat repository path, sent as it is, is redirected normalized.
	t.Run("dot segment redirected normalized", func(t *testing.T) {
		code, loc := curlHead(t, "http://"+trusting.HTTP+"/debian/./Release", []string{"Host: www.example.test"}, "--path-as-is")
		if u, err := url.Parse(loc); code != http.StatusFound || err != nil || u.RequestURI() != "/debian/Release" {
			t.Errorf("status %d, Location %q; want 302 to /debian/Release", code, loc)
		}
	})
}
