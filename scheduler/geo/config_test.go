package geo

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/scheduler"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// checkedGeo decodes the geo block of a config file in dir and checks it
// as the daemons do, with its mmdb resolved.
func checkedGeo(t *testing.T, dir, text string) yamlconf.Geo {
	t.Helper()
	var f struct {
		Geo yamlconf.Geo `yaml:"geo"`
	}
	file := filepath.Join(dir, "c.yaml")
	pos, err := yamlconf.Decode(file, []byte(text), &f)
	if err != nil {
		t.Fatal(err)
	}
	errs := yamlconf.NewErrors(file, pos, "test")
	f.Geo.MMDB = f.Geo.Check(errs, "geo", dir)
	if err := errs.Err(); err != nil {
		t.Fatal(err)
	}
	return f.Geo
}

func TestFromConfig(t *testing.T) {
	fixture, err := filepath.Abs(fixtureMMDB)
	if err != nil {
		t.Fatal(err)
	}
	g := checkedGeo(t, t.TempDir(), "geo:\n  mmdb: "+fixture+"\n  networks:\n"+
		"    - {prefix: 192.0.2.0/24, location: {country: de, continent: eu}}\n"+
		"    - {prefix: '::ffff:10.0.0.0/104', location: {lat: 48.86, lon: 2.35, country: FR, continent: EU}}\n"+
		"  default: {continent: oc}\n")
	l, err := FromConfig(g)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tests := []struct {
		name   string
		addr   string
		want   scheduler.Location
		source string
	}{
		{"static wins over the database", "192.0.2.77", scheduler.Location{Country: "DE", Continent: "EU"}, SourceStatic},
		{"static with coordinates, unmapped", "10.9.8.7", paris, SourceStatic},
		{"database", "203.0.113.1", newYork, SourceMMDB},
		{"default", "100.64.0.1", scheduler.Location{Continent: "OC"}, SourceDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := l.Locate(ClientPrefix(netip.MustParseAddr(tt.addr), netip.Prefix{}, false))
			if res.Loc != tt.want || res.Source != tt.source {
				t.Errorf("Locate(%s) = %+v from %s, want %+v from %s", tt.addr, res.Loc, res.Source, tt.want, tt.source)
			}
		})
	}
	if l.DatabaseType() != TypeCity {
		t.Errorf("database type %q", l.DatabaseType())
	}
}

// TestFromConfigBadDatabase checks that a database that passes the
// config check (it is a file) but does not parse is refused by
// FromConfig with an error that names the file.
func TestFromConfigBadDatabase(t *testing.T) {
	good, err := os.ReadFile(fixtureMMDB)
	if err != nil {
		t.Fatal(err)
	}
	smashed := append([]byte(nil), good...)
	for i := range len(smashed) / 2 { // the search tree; the metadata at the end stays
		smashed[i] = 0xff
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"search tree smashed", smashed},
		{"text", []byte("network,country\n10.0.0.0/8,DE\n")},
		{"truncated", good[:len(good)/2]},
		{"metadata only", good[len(good)-200:]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "city.mmdb"), tt.data, 0o644); err != nil {
				t.Fatal(err)
			}
			g := checkedGeo(t, dir, "geo: {mmdb: city.mmdb}\n")
			l, err := FromConfig(g)
			if err == nil {
				l.Close()
				t.Fatal("FromConfig: no error")
			}
			if want := "geo: " + filepath.Join(dir, "city.mmdb") + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not begin with %q", err, want)
			}
		})
	}
}

func TestLocationOf(t *testing.T) {
	lat, lon := 50.11, 8.68
	tests := []struct {
		name string
		in   yamlconf.Location
		want scheduler.Location
	}{
		{"nothing", yamlconf.Location{}, scheduler.Location{}},
		{"codes", yamlconf.Location{Country: "JP", Continent: "AS"}, japan},
		{"coordinates", yamlconf.Location{Lat: &lat, Lon: &lon, Country: "DE", Continent: "EU"}, frankfurt},
		{"lat alone is no coordinates", yamlconf.Location{Lat: &lat, Continent: "EU"}, fallback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LocationOf(tt.in); got != tt.want {
				t.Errorf("LocationOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}
