package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Issue 21: what the admin listeners of the real daemons refuse from a
// browser, what a reload says about an included file, and a zoneless
// configuration.

// adminDo sends one request to an admin listener at admin (host:port)
// with the headers given ("Host" sets the request's Host) and returns the
// status and body.
func adminDo(t *testing.T, method, admin, path string, header map[string]string, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	// No proxy: the admin listener is on loopback.
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// curlReload runs the real curl with the header the admin listener wants.
func curlReload(t *testing.T, admin string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "curl", "-sS", "--noproxy", "*", "-X", "POST",
		"-H", "X-Transmirror-Request: 1", "http://"+admin+"/-/reload").CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v: %s", err, out)
	}
	return string(out)
}

// browserForm is what a cross-site HTML form sends: a simple request.
var browserForm = map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}

// TestAdminRefusesBrowsers: on both daemons a cross-site form POST to
// /-/reload is refused and reloads nothing, a request with a rebinding
// Host is refused, and curl with the header, groupctl and the loopback
// URL of the tests still work.
func TestAdminRefusesBrowsers(t *testing.T) {
	t.Run("dnsd", func(t *testing.T) {
		d, dir := startE2EDNSD(t)
		zone := filepath.Join(dir, "example.test.zone")
		orig, err := os.ReadFile(zone)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dir, "example.test.zone", strings.Replace(string(orig), "2026113001", "2026113002", 1)+"browser IN A 127.0.9.9\n")
		refused := []struct {
			name, method, path string
			header             map[string]string
			code               int
			body               string
		}{
			{"cross-site form post", "POST", "/-/reload", browserForm, http.StatusForbidden, "cross-site request refused"},
			{"form post without Origin", "POST", "/-/reload", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusForbidden, "X-Transmirror-Request: 1"},
			{"text/plain post", "POST", "/-/reload", map[string]string{"Content-Type": "text/plain"}, http.StatusForbidden, "X-Transmirror-Request"},
			{"header with a foreign Origin", "POST", "/-/reload", map[string]string{"X-Transmirror-Request": "1", "Origin": "http://evil.example"}, http.StatusForbidden, "cross-site"},
			{"rebinding Host, reload", "POST", "/-/reload", map[string]string{"X-Transmirror-Request": "1", "Host": "evil.example"}, http.StatusMisdirectedRequest, "DNS rebinding"},
			{"rebinding Host, groups", "GET", "/v1/groups", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest, "Host evil.example is not this admin listener's"},
			{"rebinding Host, dashboard data", "GET", "/v1/dashboard", map[string]string{"Host": "evil.example:80"}, http.StatusMisdirectedRequest, "DNS rebinding"},
			{"rebinding Host, dashboard page", "GET", "/", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest, "DNS rebinding"},
		}
		for _, tt := range refused {
			t.Run(tt.name, func(t *testing.T) {
				code, body := adminDo(t, tt.method, d.Admin, tt.path, tt.header, "a=b")
				if code != tt.code || !strings.Contains(body, tt.body) {
					t.Errorf("%d %s, want %d with %q", code, body, tt.code, tt.body)
				}
			})
		}
		if r := d.Dig(t, "browser.example.test", "A"); r.Status != "NXDOMAIN" {
			t.Fatalf("a refused reload reloaded the zone:\n%s", r.Raw)
		}
		if m := scrape(t, d.Admin); metricSum(m, "transmirror_dnsd_config_reloads_total") != 0 {
			t.Errorf("a refused request counted as a reload")
		}
		t.Run("loopback Host and localhost still work", func(t *testing.T) {
			_, port, _ := strings.Cut(d.Admin, ":")
			for _, host := range []string{d.Admin, "localhost:" + port} {
				if code, body := adminDo(t, "GET", d.Admin, "/v1/groups", map[string]string{"Host": host}, ""); code != http.StatusOK {
					t.Errorf("Host %s: %d %s", host, code, body)
				}
			}
		})
		t.Run("groupctl", func(t *testing.T) {
			if out, err := groupctl(t, d.Admin, "e2e-secret", "status", "www.example.test"); err != nil {
				t.Errorf("groupctl status: %v\n%s", err, out)
			}
			if out, err := groupctl(t, d.Admin, "e2e-secret", "drain", "www.example.test", "fra1"); err != nil {
				t.Errorf("groupctl drain (a signed POST): %v\n%s", err, out)
			}
		})
		t.Run("curl with the header", func(t *testing.T) {
			if out := curlReload(t, d.Admin); !strings.Contains(out, "reloaded") {
				t.Fatalf("curl reload: %s", out)
			}
			if r := d.Dig(t, "browser.example.test", "A"); r.Status != "NOERROR" || len(r.Answer) != 1 {
				t.Errorf("after curl's reload:\n%s", r.Raw)
			}
		})
	})

	t.Run("mirror", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "root"), "hello.txt", "hello\n")
		cfg := writeFile(t, dir, "mirror.yaml", fmt.Sprintf(mirrorReloadYAML, "capacity: 1000\n"))
		m := runMirror(t, cfg, "mirror")
		capacity := func() float64 {
			code, body := adminDo(t, "GET", m.Admin, "/v1/load", nil, "")
			var r struct{ Capacity float64 }
			if code != http.StatusOK || json.Unmarshal([]byte(body), &r) != nil {
				t.Fatalf("GET /v1/load: %d %s", code, body)
			}
			return r.Capacity
		}
		writeFile(t, dir, "mirror.yaml", fmt.Sprintf(mirrorReloadYAML, "capacity: 2000\n"))
		refused := []struct {
			name, method, path string
			header             map[string]string
			code               int
			body               string
		}{
			{"cross-site form post", "POST", "/-/reload", browserForm, http.StatusForbidden, "cross-site request refused"},
			{"form post without Origin", "POST", "/-/reload", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusForbidden, "X-Transmirror-Request: 1"},
			{"rebinding Host, load", "GET", "/v1/load", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest, "DNS rebinding"},
			{"rebinding Host, status", "GET", "/v1/status", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest, "DNS rebinding"},
			{"rebinding Host, metrics", "GET", "/metrics", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest, "DNS rebinding"},
			{"rebinding Host, site report", "GET", "/v1/site", map[string]string{"Host": "evil.example"}, http.StatusMisdirectedRequest, "DNS rebinding"},
		}
		for _, tt := range refused {
			t.Run(tt.name, func(t *testing.T) {
				code, body := adminDo(t, tt.method, m.Admin, tt.path, tt.header, "a=b")
				if code != tt.code || !strings.Contains(body, tt.body) {
					t.Errorf("%d %s, want %d with %q", code, body, tt.code, tt.body)
				}
			})
		}
		if c := capacity(); c != 1000 {
			t.Fatalf("capacity %v after refused reloads, want 1000 (not reloaded)", c)
		}
		if out := curlReload(t, m.Admin); !strings.Contains(out, "reloaded") {
			t.Fatalf("curl reload: %s", out)
		}
		if c := capacity(); c != 2000 {
			t.Errorf("capacity %v after curl's reload, want 2000", c)
		}
	})
}

// TestReloadHidesIncludedText: with allow_include, a zone that includes a
// secret-looking file fails to reload with the file's name and line and
// the kind of error, never its text, in the reply and the log; the public
// dashboard feed says only that a reload failed; an include outside the
// zone file's directory is refused.
func TestReloadHidesIncludedText(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "etc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const secret = "root:$6$S3cr3tHashOfRoot:19000:0:99999:7:::"
	writeFile(t, dir, "shadow", secret+"\n")
	writeFile(t, base, "shadow", secret+"\n")
	for _, f := range []string{"dnsd.yaml", "example.test.zone"} {
		data, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		if f == "dnsd.yaml" {
			text = strings.Replace(text, "    file: example.test.zone\n", "    file: example.test.zone\n    allow_include: true\n", 1)
		}
		writeFile(t, dir, f, text)
	}
	d := startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))
	orig, err := os.ReadFile(filepath.Join(dir, "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, include string
		want          string
	}{
		{"a secret file beside the zone", "shadow", filepath.Join(dir, "shadow") + ":1: "},
		{"a file outside the zone's directory", "../shadow", "$INCLUDE outside the zone file's directory"},
		{"an absolute path elsewhere", filepath.Join(base, "shadow"), "$INCLUDE outside the zone file's directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeFile(t, dir, "example.test.zone", string(orig)+"$INCLUDE "+tt.include+"\n")
			code, body := adminDo(t, "POST", d.Admin, "/-/reload", map[string]string{"X-Transmirror-Request": "1"}, "")
			if code != http.StatusBadRequest || !strings.Contains(body, tt.want) {
				t.Errorf("reload: %d %s, want 400 with %q", code, body, tt.want)
			}
			t.Logf("reload's reply: %s", strings.TrimSpace(body))
			_, dash := adminDo(t, "GET", d.Admin, "/v1/dashboard", nil, "")
			if !strings.Contains(dash, "reload failed") {
				t.Errorf("the dashboard's events do not say the reload failed:\n%.2000s", dash)
			}
			for what, text := range map[string]string{"reply": body, "log": d.Logs(), "dashboard": dash} {
				for _, leak := range []string{"root:", "S3cr3t"} {
					if strings.Contains(text, leak) {
						t.Errorf("the %s quotes the included file (%q)", what, leak)
					}
				}
			}
			if strings.Contains(dash, "example.test.zone") {
				t.Errorf("the public dashboard carries the reload's error")
			}
		})
	}
	if r := d.Dig(t, "www.example.test", "A"); r.Status != "NOERROR" {
		t.Errorf("after refused reloads the old zone must keep answering:\n%s", r.Raw)
	}
}

// TestZonelessConfig: an empty config fails dnsd -check with a clear
// message; a reload to a config without zones is refused and the old
// zones keep answering.
func TestZonelessConfig(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.yaml", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin("dnsd"), "-check", "-config", empty).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "empty.yaml:1:1: no zones") || !strings.Contains(string(out), "allow_no_zones: true") {
		t.Errorf("dnsd -check on an empty file: %v\n%s\nwant exit 1 with empty.yaml:1:1: no zones … allow_no_zones: true", err, out)
	}

	d, ddir := startE2EDNSD(t)
	cfg, err := os.ReadFile(filepath.Join(ddir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(string(cfg), "zones:")
	writeFile(t, ddir, "dnsd.yaml", head+"zones: []\n")
	code, body := adminDo(t, "POST", d.Admin, "/-/reload", map[string]string{"X-Transmirror-Request": "1"}, "")
	if code != http.StatusBadRequest || !strings.Contains(body, "no zones") {
		t.Errorf("reload to a zoneless config: %d %s, want 400 saying no zones", code, body)
	}
	for _, q := range []string{"ns1.example.test", "www.example.test"} {
		if r := d.Dig(t, q, "A"); r.Status != "NOERROR" || len(r.Answer) == 0 {
			t.Errorf("%s after the refused reload:\n%s", q, r.Raw)
		}
	}
	writeFile(t, ddir, "dnsd.yaml", head+"allow_no_zones: true\nzones: []\n")
	if code, body := adminDo(t, "POST", d.Admin, "/-/reload", map[string]string{"X-Transmirror-Request": "1"}, ""); code != http.StatusOK {
		t.Errorf("reload with allow_no_zones: %d %s, want 200", code, body)
	}
	if r := d.Dig(t, "ns1.example.test", "A"); r.Status != "REFUSED" {
		t.Errorf("with allow_no_zones and no zones, want REFUSED:\n%s", r.Raw)
	}
}
