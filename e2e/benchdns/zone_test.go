package benchdns

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/transmirror/transmirror/scheduler/geo"
)

// The zone both servers serve: a static name and the group www, whose
// members are in three regions, two of them in eu, weighted 3:1. Both
// configurations are written from these tables, so that they cannot
// drift apart.
const (
	origin     = "example.test."
	staticName = "static." + origin
	staticAddr = "127.0.0.80"
	groupName  = "www." + origin
	groupTTL   = 60
)

// member is one address pair of the group.
type member struct {
	name, region string
	v4, v6       string
	weight       int
	lat, lon     float64
	country      string
	continent    string
}

var members = []member{
	{"fra1", "eu", "127.0.1.1", "fd00:1::1", 3, 50.11, 8.68, "DE", "EU"},
	{"ams1", "eu", "127.0.1.2", "fd00:1::2", 1, 52.37, 4.90, "NL", "EU"},
	{"nyc1", "na", "127.0.2.1", "fd00:2::1", 1, 40.71, -74.01, "US", "NA"},
	{"sin1", "as", "127.0.3.1", "fd00:3::1", 1, 1.35, 103.82, "SG", "AS"},
}

// region is where clients are: its continent in the test GeoIP database
// and one ECS network of each family that the database puts there.
type region struct {
	name, continent string
	ecs4, ecs6      string
}

var regions = []region{
	{"eu", "EU", "198.51.100.0/24", "2001:db8:1::/48"},
	{"na", "NA", "203.0.113.0/24", "2001:db8:2::/48"},
	{"as", "AS", "192.0.2.0/24", "2001:db8:3::/48"},
}

// defaultRegion is where a client that the database does not know is
// sent (loopback, the resolver of queries without ECS).
const defaultRegion = "na"

// zoneBody is the static part of the zone, in both servers' syntax.
const zoneBody = `$TTL 300
@       SOA ns1 hostmaster 1 3600 600 604800 300
        NS  ns1
        NS  ns2
ns1     A   127.0.0.1
ns2     A   127.0.0.2
static  A   ` + staticAddr + "\n"

// regionMembers returns the members of region r.
func regionMembers(r string) []member {
	var out []member
	for _, m := range members {
		if m.region == r {
			out = append(out, m)
		}
	}
	return out
}

// failover is region r's datacenter order for gdnsd: r first, then the
// others in table order.
func failover(r string) []string {
	out := []string{r}
	for _, x := range regions {
		if x.name != r {
			out = append(out, x.name)
		}
	}
	return out
}

// The group big: bigMembers members spread evenly over the globe (a
// Fibonacci lattice, about 1,000 km apart), each with its own address
// pair, so that a geo-load tier holds about ten of them. Only dnsd serves
// it: mix g compares its cost per answer with the 4-member www's.
const (
	bigName    = "big." + origin
	bigMembers = 512
)

// bigGroup returns big's members.
func bigGroup() []member {
	out := make([]member, bigMembers)
	for i := range out {
		out[i] = member{
			name: fmt.Sprintf("b%03d", i), region: "big", weight: 1,
			v4:  fmt.Sprintf("127.4.%d.%d", i/250, i%250+1),
			v6:  fmt.Sprintf("fd00:4::%x", i+1),
			lat: math.Asin(1-2*(float64(i)+0.5)/bigMembers) * 180 / math.Pi,
			lon: math.Mod(float64(i)*137.50776405, 360) - 180,
		}
	}
	return out
}

// writeMMDB makes the test GeoIP database from the committed regions
// table with the project's generator (as cmd/mkmmdb does).
func writeMMDB(csvPath, out string) error {
	f, err := os.Open(csvPath)
	if err != nil {
		return err
	}
	rows, err := geo.ReadRows(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", csvPath, err)
	}
	var buf bytes.Buffer
	if err := geo.WriteMMDB(&buf, geo.TypeCity, rows); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// writeDNSDConfig writes dir/dnsd.yaml and its zone file: the group with
// policy geo-load, one answer, capacities so large that the load dnsd
// books for its answers never moves a share, so the picks are the
// weights within the nearest tier (fra1 and ams1 are 360 km apart, within
// one tier; the regions are thousands of km apart).
// With procs > 0 it has that many UDP sockets.
func writeDNSDConfig(dir, mmdb string, procs int) (string, error) {
	keys, err := writeSigningKeys(dir)
	if err != nil {
		return "", err
	}
	var s strings.Builder
	s.WriteString(`listen: ["127.0.0.1:0"]` + "\nadmin: 127.0.0.1:0\n")
	if procs > 0 {
		fmt.Fprintf(&s, "server: {udp_sockets: %d}\n", procs)
	}
	fmt.Fprintf(&s, `zones:
  - origin: %s
    file: %szone
    dnssec: {keys: [%s]}
geo:
  mmdb: %s
  default: %s
groups:
  - name: %s
    ttl: {min: %d, max: %d}
    answers: 1
    policy: {name: geo-load}
    members:
`, origin, origin, strings.Join(keys, ", "), strconv.Quote(mmdb), location(regionMembers(defaultRegion)[0]), groupName, groupTTL, groupTTL)
	for _, m := range members {
		fmt.Fprintf(&s, "      - {name: %s, host: %s.%s, addresses: [%s, %q], capacity: 1000000000, weight: %d, location: %s}\n",
			m.name, m.name, origin, m.v4, m.v6, m.weight, location(m))
	}
	fmt.Fprintf(&s, "  - name: %s\n    ttl: {min: %d, max: %d}\n    answers: 1\n    policy: {name: geo-load}\n    members:\n", bigName, groupTTL, groupTTL)
	for _, m := range bigGroup() {
		fmt.Fprintf(&s, "      - {name: %s, host: %s.%s, addresses: [%s, %q], capacity: 1000000000, location: {lat: %.4f, lon: %.4f}}\n",
			m.name, m.name, origin, m.v4, m.v6, m.lat, m.lon)
	}
	cfg := filepath.Join(dir, "dnsd.yaml")
	if err := os.WriteFile(cfg, []byte(s.String()), 0o644); err != nil {
		return "", err
	}
	return cfg, os.WriteFile(filepath.Join(dir, origin+"zone"), []byte("$ORIGIN "+origin+"\n"+zoneBody), 0o644)
}

func location(m member) string {
	return fmt.Sprintf("{lat: %g, lon: %g, country: %s, continent: %s}", m.lat, m.lon, m.country, m.continent)
}

// writeGdnsdConfig writes gdnsd's configuration directory dir (config,
// zones/) listening on addr: plugin geoip with a map by continent over
// the test database, edns_client_subnet on, and each region's members a
// nested weighted resource (one address per answer, multi = false).
func writeGdnsdConfig(dir, addr, mmdb string) error {
	var w, dcmap, m strings.Builder
	for _, r := range regions {
		fmt.Fprintf(&w, "    www_%s => {\n", r.name)
		for _, fam := range []string{"v4", "v6"} {
			fmt.Fprintf(&w, "      addrs_%s => {", fam)
			for _, x := range regionMembers(r.name) {
				a := x.v4
				if fam == "v6" {
					a = x.v6
				}
				fmt.Fprintf(&w, " %s => [ %q, %d ]", x.name, a, x.weight)
			}
			w.WriteString(" }\n")
		}
		w.WriteString("    }\n")
		fmt.Fprintf(&dcmap, "          %s => %%weighted!www_%s\n", r.name, r.name)
		fmt.Fprintf(&m, "          %s => [ %s ]\n", r.continent, strings.Join(failover(r.name), ", "))
	}
	var dcs []string
	for _, r := range regions {
		dcs = append(dcs, r.name)
	}
	cfg := fmt.Sprintf(`options => {
  listen => [ %s ]
  edns_client_subnet => true
  run_dir => %q
  state_dir => %q
}
plugins => {
  weighted => {
%s  }
  geoip => {
    maps => {
      regions => {
        geoip2_db => %q
        datacenters => [ %s ]
        map => {
          default => [ %s ]
%s        }
      }
    }
    resources => {
      www => {
        map => regions
        dcmap => {
%s        }
      }
    }
  }
}
`, addr, filepath.Join(dir, "run"), filepath.Join(dir, "state"), w.String(), mmdb,
		strings.Join(dcs, ", "), strings.Join(failover(defaultRegion), ", "), m.String(), dcmap.String())
	if err := os.MkdirAll(filepath.Join(dir, "zones"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(cfg), 0o644); err != nil {
		return err
	}
	zone := zoneBody + fmt.Sprintf("www %d DYNA geoip!www\n", groupTTL)
	return os.WriteFile(filepath.Join(dir, "zones", strings.TrimSuffix(origin, ".")), []byte(zone), 0o644)
}
