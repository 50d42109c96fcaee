package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/zones"
)

// TestConfigsValidate: every file the demo writes is accepted by the
// daemons' own config loaders, and says what the demo promises.
func TestConfigsValidate(t *testing.T) {
	lay := newLayout(t.TempDir())
	sites := demoSites()
	total, err := writeStatic(lay, sites)
	if err != nil {
		t.Fatal(err)
	}
	set, err := zones.Load(filepath.Join(lay.Etc, "dnsd.yaml"))
	if err != nil {
		t.Fatalf("dnsd.yaml: %v", err)
	}
	if len(set.Zones) != 1 || len(set.Groups) != 1 {
		t.Errorf("dnsd.yaml: %d zones, %d groups, want 1 and 1", len(set.Zones), len(set.Groups))
	}
	if got := set.Config.Listen; len(got) != 1 || got[0] != dnsAddr || set.Config.Admin != adminAddr {
		t.Errorf("dnsd listens on %v, admin %s; want %s and %s", got, set.Config.Admin, dnsAddr, adminAddr)
	}
	zone, err := os.ReadFile(filepath.Join(lay.Etc, "example.test.zone"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sites {
		if !strings.Contains(string(zone), s.Host+". IN A "+s.IP) {
			t.Errorf("zone has no A record %s -> %s", s.Host, s.IP)
		}
		var urls []string
		for j, ip := range s.Backends {
			cfg, err := mirror.LoadConfig(filepath.Join(lay.Etc, s.backendName(j)+".yaml"))
			if err != nil {
				t.Fatalf("back end %s: %v", s.backendName(j), err)
			}
			if cfg.Root != lay.Root || cfg.Admin != "" || cfg.Redirect.Enabled {
				t.Errorf("back end %s: root %s, admin %q, redirect %t", s.backendName(j), cfg.Root, cfg.Admin, cfg.Redirect.Enabled)
			}
			urls = append(urls, "http://"+net.JoinHostPort(ip, "40000"))
		}
		p := filepath.Join(lay.Etc, s.Name+".yaml")
		if err := os.WriteFile(p, []byte(frontendConfig(s, urls, lay.Secret)), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := mirror.LoadConfig(p)
		if err != nil {
			t.Fatalf("front end %s: %v", s.Name, err)
		}
		if len(cfg.TLS.Listen) != 1 || cfg.TLS.Listen[0] != net.JoinHostPort(s.IP, httpsPort) || len(cfg.TLS.Certificates) != 1 {
			t.Errorf("front end %s: tls %+v, want one listener on %s and one certificate", s.Name, cfg.TLS, httpsPort)
		}
		if cfg.Listen[0] != net.JoinHostPort(s.IP, httpPort) || cfg.Site.Policy.Name != "lard" || len(cfg.Backends) != 2 ||
			!cfg.Redirect.Enabled || cfg.DNSD.Secret == "" || cfg.Capacity != capacity {
			t.Errorf("front end %s: %+v", s.Name, cfg)
		}
	}
	if total < 10<<20 || total > 40<<20 {
		t.Errorf("content is %d bytes, want a few tens of MiB", total)
	}
	fi, err := os.Stat(filepath.Join(lay.Root, "pub", "file-0001.bin"))
	if err != nil || fi.Size() != fileSize(1) {
		t.Errorf("file-0001.bin: %v, size want %d", err, fileSize(1))
	}
}

func TestFileSizes(t *testing.T) {
	for i := 1; i <= nFiles; i++ {
		n := fileSize(i)
		if n < 4096 || n > 1<<20 || n != fileSize(i) {
			t.Fatalf("fileSize(%d) = %d: want 4 KiB .. 1 MiB, the same every time", i, n)
		}
	}
	if fileSize(20) != 1<<20 {
		t.Errorf("every 20th file is 1 MiB")
	}
}

func TestCheckPortsNamesTakenAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	err = checkPorts([]portUse{{"tcp", ln.Addr().String(), "dnsd admin"}})
	if err == nil || !strings.Contains(err.Error(), "tcp "+ln.Addr().String()+" (dnsd admin) is not available") {
		t.Fatalf("checkPorts on a taken port: %v", err)
	}
	ln.Close()
	if err := checkPorts([]portUse{{"tcp", ln.Addr().String(), "x"}}); err != nil {
		t.Errorf("checkPorts on a free port: %v", err)
	}
}

func TestFindBinariesMissing(t *testing.T) {
	_, err := findBinaries(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "give -bin DIR") {
		t.Fatalf("findBinaries on an empty directory: %v", err)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"bin/groupctl":         "bin/groupctl",
		"/a b/groupctl":        "'/a b/groupctl'",
		"it's/groupctl":        `'it'\''s/groupctl'`,
		"/srv/demo/etc/secret": "/srv/demo/etc/secret",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
