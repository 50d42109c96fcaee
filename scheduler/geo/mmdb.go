package geo

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/transmirror/transmirror/scheduler"
)

// Database types that [WriteMMDB] writes most often.
const (
	// TypeCity is the database type of GeoIP2 City: coordinates, country
	// and continent.
	TypeCity = "GeoIP2-City"
	// TypeCountry is the database type of GeoIP2 Country: country and
	// continent only.
	TypeCountry = "GeoIP2-Country"
)

// TableHeader is the header line of a CSV networks table (see [ReadRows]).
const TableHeader = "network,country,continent,lat,lon"

// buildEpoch is the build time written into every database, so that the
// same rows always make the same bytes (2025-01-01T00:00:00Z).
const buildEpoch = 1735689600

// WriteMMDB writes rows as a MaxMind DB of type dbType (a City type such
// as [TypeCity] or a Country type such as [TypeCountry]) in the GeoIP2
// layout that GeoIP2 readers expect: country.iso_code, continent.code and,
// for City types only, location.latitude and location.longitude. Rows may
// nest; the longest network wins whatever the order of rows. Networks are
// written as given, without the IPv4 aliases of real databases (such as
// ::ffff:0:0/96 or 2002::/16), so that any IPv6 network can be written;
// look IPv4-mapped addresses up unmapped, as [Locator.Locate] does. The output is
// a function of its arguments alone (the build time is fixed), so a
// committed fixture can be checked against its source.
func WriteMMDB(w io.Writer, dbType string, rows []Row) error {
	kind := kindOf(dbType)
	if kind == kindNone {
		return fmt.Errorf("%w %q: want a City or Country type", ErrDatabaseType, dbType)
	}
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		BuildEpoch:              buildEpoch,
		DatabaseType:            dbType,
		Description:             map[string]string{"en": "transmirror test database"},
		DisableIPv4Aliasing:     true, // so any IPv6 network can be written; lookups unmap first
		IncludeReservedNetworks: true, // the documentation ranges are reserved
		IPVersion:               6,
		Languages:               []string{"en"},
		RecordSize:              24,
	})
	if err != nil {
		return fmt.Errorf("geo: new mmdb tree: %w", err)
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b Row) int { return a.Network.Bits() - b.Network.Bits() })
	for _, r := range sorted {
		p := r.Network
		if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() {
			return fmt.Errorf("geo: mmdb network %s: want a canonical IPv4 or IPv6 network", p)
		}
		if err := tree.Insert(prefixToIPNet(p), record(kind, r.Loc)); err != nil {
			return fmt.Errorf("geo: mmdb network %s: %w", p, err)
		}
	}
	if _, err := tree.WriteTo(w); err != nil {
		return fmt.Errorf("geo: write mmdb: %w", err)
	}
	return nil
}

// prefixToIPNet converts p for mmdbwriter, which predates net/netip.
func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// record is the GeoIP2 record for loc.
func record(kind dbKind, loc scheduler.Location) mmdbtype.Map {
	m := mmdbtype.Map{}
	if loc.Country != "" {
		c := mmdbtype.Map{"iso_code": mmdbtype.String(loc.Country)}
		m["country"] = c
		m["registered_country"] = c
	}
	if loc.Continent != "" {
		m["continent"] = mmdbtype.Map{"code": mmdbtype.String(loc.Continent)}
	}
	if kind == kindCity && loc.HasCoords {
		m["location"] = mmdbtype.Map{
			"latitude":  mmdbtype.Float64(loc.Lat),
			"longitude": mmdbtype.Float64(loc.Lon),
		}
	}
	return m
}

// LineError is a problem with one line of a CSV networks table.
type LineError struct {
	Line int // 1-based
	Err  error
}

// Error reports the line and the problem.
func (e *LineError) Error() string { return fmt.Sprintf("geo: line %d: %v", e.Line, e.Err) }

// Unwrap returns the problem.
func (e *LineError) Unwrap() error { return e.Err }

// continentCodes are the continent codes of GeoIP2 databases.
const continentCodes = "AF AN AS EU NA OC SA"

// ReadRows reads a CSV networks table: the header line [TableHeader], then
// one network a line, e.g.
//
//	198.51.100.0/25,DE,EU,50.11,8.68
//
// Lines starting with # are comments; spaces around fields are ignored.
// The network must be canonical (no host bits set) and appear once; the
// country is an ISO 3166-1 alpha-2 code in capitals, the continent one of
// AF AN AS EU NA OC SA; either may be empty. Latitude and longitude are
// both given or both empty, within ±90 and ±180. A line must say
// something. All problems with the table are reported together, each as a
// [*LineError]; a failing reader is reported as it is.
func ReadRows(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true

	var (
		rows   []Row
		errs   []error
		header bool
		seen   = map[netip.Prefix]int{}
	)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				errs = append(errs, &LineError{Line: pe.Line, Err: pe.Err})
				break // the reader can not resynchronise after a quoting error
			}
			return nil, fmt.Errorf("geo: read table: %w", err)
		}
		line, _ := cr.FieldPos(0)
		if !header {
			header = true
			if got := strings.Join(trimAll(rec), ","); !strings.EqualFold(got, TableHeader) {
				errs = append(errs, &LineError{Line: line, Err: fmt.Errorf("header %q: want %q", got, TableHeader)})
				break
			}
			continue
		}
		row, err := parseRow(trimAll(rec))
		if err != nil {
			errs = append(errs, &LineError{Line: line, Err: err})
			continue
		}
		if first, dup := seen[row.Network]; dup {
			errs = append(errs, &LineError{Line: line, Err: fmt.Errorf("network %s: duplicate of line %d", row.Network, first)})
			continue
		}
		seen[row.Network] = line
		rows = append(rows, row)
	}
	if !header && len(errs) == 0 {
		errs = append(errs, &LineError{Line: 1, Err: fmt.Errorf("empty table: want header %q", TableHeader)})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return rows, nil
}

func trimAll(rec []string) []string {
	for i := range rec {
		rec[i] = strings.TrimSpace(rec[i])
	}
	return rec
}

func parseRow(f []string) (Row, error) {
	var row Row
	if len(f) != 5 {
		return row, fmt.Errorf("%d fields: want 5 (%s)", len(f), TableHeader)
	}
	p, err := netip.ParsePrefix(f[0])
	if err != nil {
		return row, fmt.Errorf("network %q: %w", f[0], err)
	}
	switch {
	case p.Addr().Is4In6():
		return row, fmt.Errorf("network %s: IPv4-mapped IPv6: write it as IPv4", p)
	case p != p.Masked():
		return row, fmt.Errorf("network %s: host bits set: want %s", p, p.Masked())
	}
	row.Network = p
	if c := f[1]; c != "" {
		if len(c) != 2 || !isUpper(c[0]) || !isUpper(c[1]) {
			return row, fmt.Errorf("country %q: want a two-letter ISO 3166-1 code in capitals", c)
		}
		row.Loc.Country = c
	}
	if c := f[2]; c != "" {
		if !slices.Contains(strings.Fields(continentCodes), c) {
			return row, fmt.Errorf("continent %q: want one of %s", c, continentCodes)
		}
		row.Loc.Continent = c
	}
	switch lat, lon := f[3], f[4]; {
	case lat == "" && lon == "":
	case lat == "" || lon == "":
		return row, errors.New("lat and lon: give both or neither")
	default:
		if row.Loc.Lat, err = parseCoord("lat", lat, 90); err != nil {
			return row, err
		}
		if row.Loc.Lon, err = parseCoord("lon", lon, 180); err != nil {
			return row, err
		}
		row.Loc.HasCoords = true
	}
	if !row.Loc.Known() {
		return row, fmt.Errorf("network %s: no country, continent or coordinates", p)
	}
	return row, nil
}

func parseCoord(name, s string, limit float64) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: not a number", name, s)
	}
	if math.IsNaN(v) || v < -limit || v > limit {
		return 0, fmt.Errorf("%s %q: want -%g to %g", name, s, limit, limit)
	}
	return v, nil
}

func isUpper(b byte) bool { return 'A' <= b && b <= 'Z' }
