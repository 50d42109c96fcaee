package zones

import (
	"bytes"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/zones/yamlconf"
)

// FuzzParseZone checks that no zone file text makes ParseZone panic, and
// that every error it returns is a non-empty text naming the file.
func FuzzParseZone(f *testing.F) {
	f.Add([]byte("$TTL 300\n@ SOA ns1 h 1 2 3 4 5\n@ NS ns1\nns1 A 192.0.2.1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		z, err := ParseZone("example.org.", "fuzz.zone", bytes.NewReader(data), false)
		if err != nil {
			if z != nil {
				t.Fatal("both a zone and an error")
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.zone") || strings.TrimSpace(line) == "" {
					t.Fatalf("error line %q does not name the file", line)
				}
			}
			return
		}
		if z.SOA == nil || z.Origin != "example.org." {
			t.Fatalf("valid zone without SOA: %+v", z)
		}
		for _, rr := range z.Records() {
			_ = z.Exists(rr.Header().Name)
			_ = z.Cut(rr.Header().Name)
		}
	})
}

// FuzzParseConfig checks that no config text makes Parse or Build panic,
// and that their errors are non-empty. Files named in the config are not
// read: the fuzzer must not wander the file system.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("listen: [\":53\"]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz.yaml", data)
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatal("empty error")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("YAML error %q is more than one line", err)
			}
			return
		}
		for i := range cfg.Zones {
			cfg.Zones[i].File = ""
		}
		for i := range cfg.Groups {
			g := &cfg.Groups[i]
			if g.SecretSource.File != "" {
				g.SecretSource = yamlconf.Secret{}
			}
			if g.PreviousSecretSource.File != "" {
				g.PreviousSecretSource = yamlconf.Secret{}
			}
		}
		if cfg.AdminTokenSource.File != "" {
			cfg.AdminTokenSource = yamlconf.Secret{}
		}
		if cfg.Cluster.Etcd.PasswordSource.File != "" {
			cfg.Cluster.Etcd.PasswordSource = yamlconf.Secret{}
		}
		cfg.Geo.MMDB = ""
		if _, err := Build(cfg); err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.TrimSpace(line) == "" {
					t.Fatalf("empty error line in %q", err)
				}
			}
		}
	})
}
