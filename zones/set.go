package zones

import (
	"github.com/miekg/dns"
)

// Set is everything dnsd serves from one configuration: the config with
// defaults applied, the parsed zones and the groups. A Set is immutable;
// a reload builds a new one and swaps it in whole.
type Set struct {
	// Config is the validated configuration with defaults applied.
	Config *Config
	// Zones are the served zones, longest origin first.
	Zones []*Zone
	// Groups are the configured groups by canonical name.
	Groups map[string]*GroupConfig
	// MMDB is the path of the GeoIP2 database (geo.mmdb resolved against
	// the config file's directory), "" for none.
	MMDB string
	// StateFile is state_file resolved against the config file's
	// directory, "" for none.
	StateFile string
	// Warnings are what loads but should be fixed (a secret or token file
	// readable by group or others), each "FILE:LINE:COL: what"; the
	// daemon logs them at Warn, at start, on -check and on each reload.
	Warnings []string
}

// Find returns the zone that is authoritative for qname (the one with the
// longest matching origin), or nil when no served zone contains it.
func (s *Set) Find(qname string) *Zone {
	qname = dns.CanonicalName(qname)
	for _, z := range s.Zones { // longest origin first
		if dns.IsSubDomain(z.Origin, qname) {
			return z
		}
	}
	return nil
}

// Zone returns the zone whose origin is exactly origin, or nil.
func (s *Set) Zone(origin string) *Zone {
	origin = dns.CanonicalName(origin)
	for _, z := range s.Zones {
		if z.Origin == origin {
			return z
		}
	}
	return nil
}

// Group returns the group named name (any case), or nil.
func (s *Set) Group(name string) *GroupConfig { return s.Groups[dns.CanonicalName(name)] }
