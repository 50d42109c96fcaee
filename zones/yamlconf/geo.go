package yamlconf

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
)

// Continents are the continent codes a [Location] may have, as in GeoIP2
// databases.
const Continents = "AF AN AS EU NA OC SA"

// Location is a place: coordinates and/or country and continent codes.
type Location struct {
	// Lat is the latitude in degrees, -90..90; given together with Lon.
	Lat *float64 `yaml:"lat"`
	// Lon is the longitude in degrees, -180..180; given together with Lat.
	Lon *float64 `yaml:"lon"`
	// Country is the ISO 3166-1 alpha-2 code, upper case after Check.
	Country string `yaml:"country"`
	// Continent is one of [Continents], upper case after Check.
	Continent string `yaml:"continent"`
}

// Check validates l, written at key path, and normalises its codes to
// upper case. obj names what the location belongs to in errors
// (`group "www": member "fra1"`), "" for a location of the file itself;
// errors read `OBJ: location: lat 95 must be in -90..90`.
func (l *Location) Check(errs *Errors, path, obj string) {
	subject := "location"
	if obj != "" {
		subject = obj + ": location"
	}
	switch {
	case (l.Lat == nil) != (l.Lon == nil):
		errs.Errorf(path, "%s: lat and lon go together", subject)
	case l.Lat != nil:
		if !(*l.Lat >= -90 && *l.Lat <= 90) {
			errs.Errorf(path+".lat", "%s: lat %g must be in -90..90", subject, *l.Lat)
		}
		if !(*l.Lon >= -180 && *l.Lon <= 180) {
			errs.Errorf(path+".lon", "%s: lon %g must be in -180..180", subject, *l.Lon)
		}
	}
	if l.Country != "" {
		if len(l.Country) != 2 || !isLetter(l.Country[0]) || !isLetter(l.Country[1]) {
			errs.Errorf(path+".country", "%s: country %q: want a two-letter code", subject, l.Country)
		}
		l.Country = strings.ToUpper(l.Country)
	}
	if l.Continent != "" {
		if c := strings.ToUpper(l.Continent); slices.Contains(strings.Fields(Continents), c) {
			l.Continent = c
		} else {
			errs.Errorf(path+".continent", "%s: continent %q: want one of %s", subject, l.Continent, Continents)
		}
	}
}

// Empty reports whether l says nothing: no coordinates, country or
// continent.
func (l Location) Empty() bool {
	return l.Lat == nil && l.Lon == nil && l.Country == "" && l.Continent == ""
}

// Clone returns a copy of l that shares no pointers with it.
func (l Location) Clone() Location {
	if l.Lat != nil {
		lat := *l.Lat
		l.Lat = &lat
	}
	if l.Lon != nil {
		lon := *l.Lon
		l.Lon = &lon
	}
	return l
}

// Geo is the geo block of both config files: where clients are. A static
// networks table wins, then a GeoIP2/GeoLite2 City or Country database,
// then a default. scheduler/geo builds the locator from it.
type Geo struct {
	// MMDB is a GeoIP2 or GeoLite2 (or DB-IP) City or Country database,
	// relative to the config file's directory; "" for none.
	MMDB string `yaml:"mmdb"`
	// Networks map client prefixes to locations; the longest prefix wins
	// and the table wins over the MMDB.
	Networks []Network `yaml:"networks"`
	// Default is where clients that nothing locates are.
	Default Location `yaml:"default"`
}

// Network is one row of the static networks table.
type Network struct {
	// Prefix is the client prefix, e.g. 198.51.100.0/24; an IPv4-mapped
	// IPv6 prefix is unmapped and host bits are cleared by Check.
	Prefix netip.Prefix `yaml:"prefix"`
	// Location is where its clients are; it must say something.
	Location Location `yaml:"location"`
}

// Check validates g, the geo block written at key path (say "geo"), and
// normalises it: networks unmapped and masked, codes upper case. It
// returns MMDB resolved against dir, the config file's directory ("" for
// none), after checking that it is a file that can be opened; reading the
// database is the locator's job. Errors name their object by the key:
// `geo: network 198.51.100.0/24: listed twice`.
func (g *Geo) Check(errs *Errors, path, dir string) (mmdb string) {
	if g.MMDB != "" {
		mmdb = Resolve(dir, g.MMDB)
		if msg := checkFile(mmdb, g.MMDB); msg != "" {
			errs.Errorf(path+".mmdb", "%s: mmdb: %s", path, msg)
		}
	}
	seen := make(map[netip.Prefix]bool)
	for i := range g.Networks {
		n := &g.Networks[i]
		npath := fmt.Sprintf("%s.networks[%d]", path, i)
		if !n.Prefix.IsValid() {
			errs.Errorf(npath+".prefix", "%s: networks[%d]: prefix is required", path, i)
			continue
		}
		obj := fmt.Sprintf("%s: network %s", path, n.Prefix)
		a, bits := n.Prefix.Addr(), n.Prefix.Bits()
		if a.Is4In6() {
			if bits < 96 {
				errs.Errorf(npath+".prefix", "%s: an IPv4-mapped prefix must be at least /96", obj)
				continue
			}
			bits -= 96
		}
		n.Prefix = netip.PrefixFrom(a.Unmap(), bits).Masked()
		obj = fmt.Sprintf("%s: network %s", path, n.Prefix)
		if seen[n.Prefix] {
			errs.Errorf(npath+".prefix", "%s: listed twice", obj)
		}
		seen[n.Prefix] = true
		n.Location.Check(errs, npath+".location", obj)
		if n.Location.Empty() {
			errs.Errorf(npath+".location", "%s: location must say something (lat/lon, country or continent)", obj)
		}
	}
	g.Default.Check(errs, path+".default", path+": default")
	return mmdb
}

// Clone returns a copy of g that shares no memory with it.
func (g Geo) Clone() Geo {
	g.Networks = slices.Clone(g.Networks)
	for i := range g.Networks {
		g.Networks[i].Location = g.Networks[i].Location.Clone()
	}
	g.Default = g.Default.Clone()
	return g
}

// checkFile checks that name is a regular file that can be opened, and
// says what is wrong if not, naming the file as written.
func checkFile(name, written string) string {
	fi, err := os.Stat(name) // first, so that a FIFO is never opened
	switch {
	case err != nil:
		return fmt.Sprintf("cannot use %q: %v", written, WithoutPath(err))
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("%q is not a file", written)
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Sprintf("cannot use %q: %v", written, WithoutPath(err))
	}
	f.Close()
	return ""
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
