package mirror

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/group"
)

// TestConfigGlobal covers the keys of the mirror's global role: dnsd's
// view interval, the dispatcher role and the geo settings.
func TestConfigGlobal(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "not.mmdb"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	head := "listen: ['127.0.0.1:0', '127.0.0.1:0']\nadmin: 127.0.0.1:0\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\n"
	dnsd := "dnsd: {url: 'http://127.0.0.1:9053', secret: x}\n"
	tests := []struct {
		name  string
		yaml  string
		want  string // "" means valid
		check func(t *testing.T, c *Config)
	}{
		{"defaults", head + "root: .\n" + dnsd, "", func(t *testing.T, c *Config) {
			if c.DNSD.ViewInterval.D() != 2*time.Second || c.DNSD.PushInterval.D() != 2*time.Second {
				t.Errorf("intervals %s %s", c.DNSD.ViewInterval.D(), c.DNSD.PushInterval.D())
			}
			if c.Dispatcher || c.Geo.MMDB != "" || len(c.Geo.Networks) != 0 {
				t.Errorf("%+v %+v", c.Dispatcher, c.Geo)
			}
		}},
		{"defaults without dnsd", head + "root: .\n", "", func(t *testing.T, c *Config) {
			if c.DNSD.ViewInterval.D() != group.DefaultViewInterval {
				t.Errorf("view_interval %s", c.DNSD.ViewInterval.D())
			}
		}},
		{"view_interval", head + "root: .\ndnsd: {url: 'http://a', secret: x, view_interval: 2s}\n", "", func(t *testing.T, c *Config) {
			if c.DNSD.ViewInterval.D() != 2*time.Second {
				t.Errorf("view_interval %s", c.DNSD.ViewInterval.D())
			}
		}},
		{"view_interval zero", head + "root: .\ndnsd: {url: 'http://a', secret: x, view_interval: 0s}\n", "dnsd.view_interval: must be > 0", nil},
		{"dispatcher", head + "dispatcher: true\n" + dnsd, "", func(t *testing.T, c *Config) {
			if !c.Dispatcher || c.Root != "" || !c.Redirect.Enabled {
				t.Errorf("dispatcher %v root %q enabled %v", c.Dispatcher, c.Root, c.Redirect.Enabled)
			}
		}},
		{"dispatcher with root", head + "dispatcher: true\nroot: .\n" + dnsd, "root: a dispatcher serves no content", nil},
		{"dispatcher with backends", head + "dispatcher: true\nbackends: [{name: b1, url: 'http://a'}]\n" + dnsd, "backends: a dispatcher serves no content", nil},
		{"dispatcher without dnsd", head + "dispatcher: true\n", "dispatcher: needs dnsd", nil},
		{"dispatcher with redirects off", head + "dispatcher: true\nredirect: {enabled: false}\n" + dnsd, "redirect.enabled: a dispatcher only redirects", nil},
		{"neither root, backends nor dispatcher", head, "root: one of root and backends is required (or dispatcher: true)", nil},
		{"geo networks", head + "root: .\ngeo:\n  networks:\n    - {prefix: 192.0.2.0/24, location: {country: de}}\n    - {prefix: '::ffff:198.51.100.0/120', location: {continent: na}}\n  default: {continent: eu}\n", "", func(t *testing.T, c *Config) {
			if got := c.Geo.Networks[1].Prefix; got != netip.MustParsePrefix("198.51.100.0/24") {
				t.Errorf("mapped prefix normalised to %s", got)
			}
			if c.Geo.Networks[0].Location.Country != "DE" || c.Geo.Default.Continent != "EU" {
				t.Errorf("codes not upper-cased: %+v", c.Geo)
			}
		}},
		{"geo prefix twice", head + "root: .\ngeo: {networks: [{prefix: 192.0.2.0/24, location: {country: de}}, {prefix: 192.0.2.0/24, location: {country: fr}}]}\n", "geo: network 192.0.2.0/24: listed twice", nil},
		{"geo prefix missing", head + "root: .\ngeo: {networks: [{location: {country: de}}]}\n", "geo: networks[0]: prefix is required", nil},
		{"geo location empty", head + "root: .\ngeo: {networks: [{prefix: 192.0.2.0/24}]}\n", "geo: network 192.0.2.0/24: location must say something", nil},
		{"geo bad prefix", head + "root: .\ngeo: {networks: [{prefix: 192.0.2.0/33, location: {country: de}}]}\n", `mirror.yaml:7:27: geo.networks[0].prefix: invalid prefix "192.0.2.0/33": want e.g. 192.0.2.0/24 or 2001:db8::/32`, nil},
		{"geo default out of range", head + "root: .\ngeo: {default: {lat: 91, lon: 0}}\n", "geo: default: location: lat 91 must be in -90..90", nil},
		{"geo mmdb missing", head + "root: .\ngeo: {mmdb: nope.mmdb}\n", `geo: mmdb: cannot use "nope.mmdb": no such file or directory`, nil},
		{"geo mmdb resolved", head + "root: .\ngeo: {mmdb: not.mmdb}\n", "", func(t *testing.T, c *Config) {
			if c.Geo.MMDB != filepath.Join(dir, "not.mmdb") {
				t.Errorf("mmdb %q", c.Geo.MMDB)
			}
		}},
		{"same fixed port twice", "listen: ['127.0.0.1:80', '127.0.0.1:80']\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\nroot: .\n", `listen[1]: "127.0.0.1:80" is listed twice`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(tt.yaml))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "":
				if tt.check != nil {
					tt.check(t, c)
				}
			case err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("error\n%v\ndoes not contain\n%s", err, tt.want)
			}
		})
	}
}
