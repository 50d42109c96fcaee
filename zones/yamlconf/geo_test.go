package yamlconf

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// geoFile is a config file with a geo block and a location of its own.
type geoFile struct {
	Geo      Geo      `yaml:"geo"`
	Location Location `yaml:"location"`
}

// checkGeo decodes text and checks its geo block and location as the
// daemons do, with the config file in dir.
func checkGeo(t *testing.T, dir, text string) (*geoFile, string, error) {
	t.Helper()
	var f geoFile
	file := filepath.Join(dir, "g.yaml")
	pos, err := Decode(file, []byte(text), &f)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	errs := NewErrors(file, pos, "test")
	mmdb := f.Geo.Check(errs, "geo", dir)
	f.Location.Check(errs, "location", "")
	return &f, mmdb, errs.Err()
}

func TestGeoCheck(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cities.mmdb"), []byte("not parsed here"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		yaml string
		want []string // nil: valid
	}{
		{"empty", "", nil},
		{"full", "geo:\n  mmdb: cities.mmdb\n  networks:\n    - {prefix: 192.0.2.0/24, location: {country: de}}\n  default: {lat: 1, lon: 2}\nlocation: {continent: eu}\n", nil},
		{"mmdb missing", "geo: {mmdb: nope.mmdb}\n", []string{`g.yaml:1:7: geo: mmdb: cannot use "nope.mmdb": no such file or directory`}},
		{"mmdb a directory", "geo: {mmdb: db}\n", []string{`g.yaml:1:7: geo: mmdb: "db" is not a file`}},
		{"prefix missing", "geo:\n  networks:\n    - location: {country: de}\n", []string{`g.yaml:3:7: geo: networks[0]: prefix is required`}},
		{"prefix twice", "geo:\n  networks:\n    - {prefix: 192.0.2.0/24, location: {country: de}}\n    - {prefix: 192.0.2.7/24, location: {country: fr}}\n",
			[]string{`g.yaml:4:8: geo: network 192.0.2.0/24: listed twice`}},
		{"mapped too short", "geo:\n  networks:\n    - {prefix: '::ffff:0:0/80', location: {country: de}}\n",
			[]string{`g.yaml:3:8: geo: network ::ffff:0.0.0.0/80: an IPv4-mapped prefix must be at least /96`}},
		{"location says nothing", "geo:\n  networks:\n    - {prefix: 192.0.2.0/24}\n",
			[]string{`g.yaml:3:8: geo: network 192.0.2.0/24: location must say something (lat/lon, country or continent)`}},
		{"network location", "geo:\n  networks:\n    - {prefix: 192.0.2.0/24, location: {country: DEU}}\n",
			[]string{`g.yaml:3:41: geo: network 192.0.2.0/24: location: country "DEU": want a two-letter code`}},
		{"default", "geo:\n  default: {lat: 95, lon: 0}\n", []string{`g.yaml:2:13: geo: default: location: lat 95 must be in -90..90`}},
		{"lat without lon", "location: {lat: 1}\n", []string{`g.yaml:1:1: location: lat and lon go together`}},
		{"every location error", "location: {lat: -91, lon: 181, country: Germany, continent: XX}\n", []string{
			`g.yaml:1:12: location: lat -91 must be in -90..90`,
			`g.yaml:1:22: location: lon 181 must be in -180..180`,
			`g.yaml:1:32: location: country "Germany": want a two-letter code`,
			`g.yaml:1:50: location: continent "XX": want one of AF AN AS EU NA OC SA`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := checkGeo(t, dir, tt.yaml)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Errorf("%d errors, want %d:\n%v", len(lines), len(tt.want), err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, want)
				}
			}
		})
	}
}

func TestGeoCheckNormalises(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cities.mmdb"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, mmdb, err := checkGeo(t, dir, "geo:\n  mmdb: cities.mmdb\n  networks:\n"+
		"    - {prefix: 192.0.2.77/24, location: {country: de}}\n"+
		"    - {prefix: '::ffff:198.51.100.0/120', location: {continent: na}}\n"+
		"  default: {continent: eu}\nlocation: {country: fr, continent: eu}\n")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"mmdb resolved", mmdb, filepath.Join(dir, "cities.mmdb")},
		{"mmdb kept as written", f.Geo.MMDB, "cities.mmdb"},
		{"masked", f.Geo.Networks[0].Prefix, netip.MustParsePrefix("192.0.2.0/24")},
		{"unmapped", f.Geo.Networks[1].Prefix, netip.MustParsePrefix("198.51.100.0/24")},
		{"country upper case", f.Geo.Networks[0].Location.Country, "DE"},
		{"continent upper case", f.Geo.Networks[1].Location.Continent, "NA"},
		{"default", f.Geo.Default.Continent, "EU"},
		{"location", f.Location.Country + " " + f.Location.Continent, "FR EU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestGeoClone(t *testing.T) {
	lat, lon := 1.0, 2.0
	g := Geo{Networks: []Network{{Location: Location{Lat: &lat, Lon: &lon}}}, Default: Location{Lat: &lat, Lon: &lon}}
	c := g.Clone()
	*c.Networks[0].Location.Lat, *c.Default.Lon = 10, 20
	c.Networks[0].Location.Country = "DE"
	if lat != 1 || lon != 2 || g.Networks[0].Location.Country != "" {
		t.Errorf("the clone shares memory: lat %g lon %g %+v", lat, lon, g.Networks[0])
	}
}
