// Package globalsim simulates a mirror group as a whole, in virtual time:
// resolvers that cache dnsd's answers for the TTL they were given (or a
// minimum of their own) and send all their clients to the mirror they
// got, dnsd nodes that answer them with the very dispatcher dnsd runs
// (dnsd/dispatch: the policy, the pending load, scope calibration, the
// adaptive TTL, ECS scopes; an NS set's nodes exchanging what they
// booked), and mirrors that are the very correction chain a mirror runs
// (probe.Reporter → mirror/group.Redirector → content) on load reports
// every push interval and group views every view interval, built by the
// control plane dnsd runs (dnsd/members). Nothing is a copy of a policy:
// the simulator only stands in for the network, the clock and the
// resolvers. The same Config and workload give the same Result.
package globalsim

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/zones"
)

// Region is a place clients, resolvers and mirrors are in.
type Region struct {
	Name     string
	Lat, Lon float64
}

// Mirror is one member of the group.
type Mirror struct {
	Name string
	// Region indexes Config.Regions: where the mirror is.
	Region int
	// Capacity is in load units (10 a request per second, as a mirror
	// reports them); Bandwidth, in bytes per second, is the other
	// capacity dnsd weighs (0: none).
	Capacity, Bandwidth float64
	// Missing is the share of the objects the mirror lacks (0: it holds
	// them all); see holds.
	Missing float64
}

// Config describes the group and how it is run.
type Config struct {
	Regions []Region
	Mirrors []Mirror
	// Policy is dnsd's global policy (default geo-load), Low and High its
	// watermarks (0: the scheduler's defaults), TTL its bounds in seconds
	// (0: dnsd's defaults, 20 to 300 s) and Answers the members per
	// answer (default 1, so that a resolver's clients all go to one).
	Policy    string
	Low, High float64
	TTL       zones.TTLBounds
	Answers   int
	// Nodes is the dnsd nodes of the NS set (default 1): resolver r asks
	// node r mod Nodes, every mirror reports to every node, mirror i takes
	// its view from node i mod Nodes, and after every push interval each
	// node tells the others what it booked and what its scopes explain,
	// as the cluster store does.
	Nodes int
	// ECS: the resolvers send each client's /24 as EDNS Client Subnet and
	// cache the answer for the scope dnsd returns; without it they cache
	// one answer for all their clients.
	ECS bool
	// MinTTL is the resolvers' minimum TTL: an answer is kept at least
	// this long whatever its TTL (0: the TTL as given).
	MinTTL time.Duration
	// Correct turns the mirrors' 302 correction on; Law (default
	// fair_share) and MaxShare (default group.DefaultMaxShare) are its
	// rules, the watermarks the group's.
	Correct  bool
	Law      string
	MaxShare float64
	// ContentIndex: the mirrors keep content indexes (content.index) and
	// read each other's, so that a request for a file a mirror lacks (see
	// Mirror.Missing) is rescued to a sibling that holds it; without, it
	// is a 404, as with the mirror's default.
	ContentIndex bool
	// PushInterval and ViewInterval are the mirrors' (defaults
	// group.DefaultPushInterval and group.DefaultViewInterval).
	PushInterval, ViewInterval time.Duration
	// Warmup is how long after the first request nothing is counted; Bin
	// the width of the result's bins (0: one bin).
	Warmup, Bin time.Duration
	// Seed seeds dnsd's and the mirrors' randomness.
	Seed uint64
}

// The simulated group's names.
const (
	zoneName  = "sim.test."
	groupName = "www.sim.test."
)

// withDefaults fills in c's defaults and checks it.
func (c Config) withDefaults() (Config, error) {
	if c.Policy == "" {
		c.Policy = "geo-load"
	}
	if c.Answers == 0 {
		c.Answers = 1
	}
	if c.Nodes == 0 {
		c.Nodes = 1
	}
	if c.MaxShare == 0 {
		c.MaxShare = group.DefaultMaxShare
	}
	if c.PushInterval == 0 {
		c.PushInterval = group.DefaultPushInterval
	}
	if c.ViewInterval == 0 {
		c.ViewInterval = group.DefaultViewInterval
	}
	var errs []error
	if len(c.Regions) == 0 || len(c.Regions) > maxRegions {
		errs = append(errs, fmt.Errorf("globalsim: %d regions, want 1 to %d", len(c.Regions), maxRegions))
	}
	if len(c.Mirrors) == 0 || len(c.Mirrors) > 250 {
		errs = append(errs, fmt.Errorf("globalsim: %d mirrors, want 1 to 250", len(c.Mirrors)))
	}
	for i, m := range c.Mirrors {
		if !(m.Missing >= 0 && m.Missing < 1) {
			errs = append(errs, fmt.Errorf("globalsim: mirror %d (%s): missing %g, want 0 to below 1", i, m.Name, m.Missing))
		}
		if m.Region < 0 || m.Region >= len(c.Regions) {
			errs = append(errs, fmt.Errorf("globalsim: mirror %d (%s): region %d of %d", i, m.Name, m.Region, len(c.Regions)))
		}
	}
	if c.Nodes < 1 || c.Nodes > 16 || c.MinTTL < 0 || c.Warmup < 0 || c.Bin < 0 || c.PushInterval < 0 || c.ViewInterval < 0 {
		errs = append(errs, errors.New("globalsim: want 1 to 16 nodes and no negative duration"))
	}
	return c, errors.Join(errs...)
}

// Addresses. Region k's clients are in 11.4k.0.0/14 and its resolvers in
// 12.4k.0.0/14, so that two rows of dnsd's static networks table locate
// them; the addresses are global unicast, as dnsd trusts ECS only for
// those. A client's /24 is one of its region's 1,024, spread by its
// index; a resolver has a /24 of its own (a scope of its own to dnsd)
// while its region has at most 1,024 of them. Mirror i is 198.18.i.1.
const maxRegions = 64

// regionPrefixes are region k's networks: its clients' and its
// resolvers'.
func regionPrefixes(k int) [2]netip.Prefix {
	return [2]netip.Prefix{
		netip.PrefixFrom(netip.AddrFrom4([4]byte{11, byte(4 * k), 0, 0}), 14),
		netip.PrefixFrom(netip.AddrFrom4([4]byte{12, byte(4 * k), 0, 0}), 14),
	}
}

// clientAddr is client c's address in region k.
func clientAddr(k int, c uint32) netip.Addr {
	h := c * 0x9e3779b1
	return netip.AddrFrom4([4]byte{11, byte(4*k) | byte(h>>30), byte(h >> 22), 1 + byte(h>>14)%254})
}

// resolverAddr is resolver r's address in region k.
func resolverAddr(k int, r uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{12, byte(4*k) | byte(r>>8)&3, byte(r), 1 + byte(r>>10)%254})
}

// mirrorAddr is mirror i's address.
func mirrorAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{198, 18, byte(i), 1}) }

// mirrorHost is mirror i's own host name.
func mirrorHost(m Mirror) string { return m.Name + "." + zoneName }

// buildSet makes dnsd's config of c in dir (the zone file is read from
// there) and builds it, as dnsd would.
func buildSet(c Config, dir string) (*zones.Set, error) {
	zone := "$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 604800 60\n@ IN NS ns1\nns1 IN A 198.18.255.53\n"
	file := filepath.Join(dir, "sim.zone")
	if err := os.WriteFile(file, []byte(zone), 0o600); err != nil {
		return nil, fmt.Errorf("globalsim: %w", err)
	}
	cfg := &zones.Config{
		Listen: []string{"127.0.0.1:0"},
		Zones:  []zones.ZoneConfig{{Origin: zoneName, File: file}},
		Groups: []zones.GroupConfig{{
			Name: groupName, TTL: c.TTL, Answers: c.Answers,
			Policy: zones.PolicyConfig{Name: c.Policy, LowWatermark: c.Low, HighWatermark: c.High},
		}},
	}
	for k, r := range c.Regions {
		for _, p := range regionPrefixes(k) {
			cfg.Geo.Networks = append(cfg.Geo.Networks, zones.NetworkConfig{Prefix: p, Location: location(r)})
		}
	}
	cfg.Geo.Default = location(c.Regions[0])
	for i, m := range c.Mirrors {
		cfg.Groups[0].Members = append(cfg.Groups[0].Members, zones.MemberConfig{
			Name: m.Name, Host: mirrorHost(m), Addresses: []netip.Addr{mirrorAddr(i)},
			Location: location(c.Regions[m.Region]), Capacity: m.Capacity, Bandwidth: zones.Bandwidth(m.Bandwidth),
		})
	}
	set, err := zones.Build(cfg)
	if err != nil {
		return nil, fmt.Errorf("globalsim: %w", err)
	}
	return set, nil
}

// location is r as a config location.
func location(r Region) zones.Location {
	lat, lon := r.Lat, r.Lon
	return zones.Location{Lat: &lat, Lon: &lon}
}

// ttl is TTL bounds of min to max seconds.
func ttl(lo, hi uint32) zones.TTLBounds { return zones.TTLBounds{Min: lo, Max: hi} }
