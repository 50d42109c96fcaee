package geo

import (
	"github.com/transmirror/transmirror/scheduler"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// FromConfig builds the Locator that a config file's geo block describes:
// dnsd's and the mirror's geo key, checked with yamlconf.Geo.Check. g.MMDB
// is read as it is, so it must be the path that Check resolved against
// the config file's directory. The database is opened and parsed here:
// an error names the file (say "geo: /etc/transmirror/city.mmdb: invalid
// MaxMind DB file"), so that a config check that builds the Locator
// refuses a corrupt database before it is served.
func FromConfig(g yamlconf.Geo) (*Locator, error) {
	opts := Options{MMDB: g.MMDB, Default: LocationOf(g.Default)}
	for _, n := range g.Networks {
		opts.Static = append(opts.Static, Row{Network: n.Prefix, Loc: LocationOf(n.Location)})
	}
	return NewLocator(opts)
}

// LocationOf converts a location of a config file to the scheduler's.
func LocationOf(l yamlconf.Location) scheduler.Location {
	s := scheduler.Location{Country: l.Country, Continent: l.Continent}
	if l.Lat != nil && l.Lon != nil {
		s.Lat, s.Lon, s.HasCoords = *l.Lat, *l.Lon, true
	}
	return s
}
