package geo

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/scheduler"
)

var update = flag.Bool("update", false, "rewrite testdata/regions.mmdb from testdata/regions.csv")

const fixtureCSV = "testdata/regions.csv"

// TestFixture checks that the committed regions.mmdb is exactly what
// WriteMMDB makes from regions.csv, and that it answers every row.
func TestFixture(t *testing.T) {
	f, err := os.Open(fixtureCSV)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := ReadRows(f)
	if err != nil {
		t.Fatalf("ReadRows(%s): %v", fixtureCSV, err)
	}
	var buf bytes.Buffer
	if err := WriteMMDB(&buf, TypeCity, rows); err != nil {
		t.Fatalf("WriteMMDB: %v", err)
	}
	if *update {
		if err := os.WriteFile(fixtureMMDB, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("committed bytes match the generator", func(t *testing.T) {
		committed, err := os.ReadFile(fixtureMMDB)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(committed, buf.Bytes()) {
			t.Errorf("%s differs from what %s makes (%d vs %d bytes): run go generate ./scheduler/geo or go test ./scheduler/geo -run TestFixture -update",
				fixtureMMDB, fixtureCSV, len(committed), buf.Len())
		}
	})

	l := newTestLocator(t, Options{MMDB: fixtureMMDB})
	if got := l.DatabaseType(); got != TypeCity {
		t.Errorf("DatabaseType() = %q, want %q", got, TypeCity)
	}
	for _, r := range rows {
		t.Run(r.Network.String(), func(t *testing.T) {
			got := l.Locate(r.Network)
			if got.Loc != r.Loc || got.Source != SourceMMDB {
				t.Errorf("Locate(%s) = %+v, want %+v from the database", r.Network, got, r.Loc)
			}
		})
	}
}

func TestReadRows(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name string
		in   string
		want []Row
	}{
		{"header only", "network,country,continent,lat,lon\n", nil},
		{"one row", "network,country,continent,lat,lon\n198.51.100.0/25,DE,EU,50.11,8.68\n",
			[]Row{{pfx("198.51.100.0/25"), frankfurt}}},
		{"comments spaces and CRLF", "# regions\r\n network , country,continent, lat,lon \r\n# eu\r\n 198.51.100.0/25 , DE , EU , 50.11 , 8.68 \r\n",
			[]Row{{pfx("198.51.100.0/25"), frankfurt}}},
		{"header in capitals", "NETWORK,Country,continent,lat,lon\n192.0.2.0/25,SG,AS,1.35,103.82\n",
			[]Row{{pfx("192.0.2.0/25"), singapore}}},
		{"no trailing newline", "network,country,continent,lat,lon\n2001:db8:3::/48,SG,AS,1.35,103.82",
			[]Row{{pfx("2001:db8:3::/48"), singapore}}},
		{"country only", "network,country,continent,lat,lon\n2001:db8:4::/48,JP,AS,,\n",
			[]Row{{pfx("2001:db8:4::/48"), japan}}},
		{"continent only", "network,country,continent,lat,lon\n10.0.0.0/8,,EU,,\n",
			[]Row{{pfx("10.0.0.0/8"), fallback}}},
		{"coordinates only", "network,country,continent,lat,lon\n10.0.0.0/8,,,-90,180\n",
			[]Row{{pfx("10.0.0.0/8"), scheduler.Location{Lat: -90, Lon: 180, HasCoords: true}}}},
		{"quoted field", "network,country,continent,lat,lon\n\"203.0.113.0/25\",US,NA,40.71,-74.01\n",
			[]Row{{pfx("203.0.113.0/25"), newYork}}},
		{"nested networks", "network,country,continent,lat,lon\n2001:db8:1::/48,DE,EU,50.11,8.68\n2001:db8:1:ff00::/56,GB,EU,51.51,-0.13\n",
			[]Row{{pfx("2001:db8:1::/48"), frankfurt}, {pfx("2001:db8:1:ff00::/56"), london}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadRows(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("ReadRows: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ReadRows = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestReadRowsErrors(t *testing.T) {
	const h = "network,country,continent,lat,lon\n"
	tests := []struct {
		name      string
		in        string
		wantLines []int  // lines of the *LineErrors, in order
		wantSub   string // in the whole message
	}{
		{"empty", "", []int{1}, "empty table"},
		{"comments only", "# nothing\n", []int{1}, "empty table"},
		{"wrong header", "net,cc\n10.0.0.0/8,DE\n", []int{1}, `header "net,cc"`},
		{"header after comment", "# c\nnet\n", []int{2}, "line 2: header"},
		{"bad network", h + "10.0.0/8,DE,EU,,\n", []int{2}, `line 2: network "10.0.0/8"`},
		{"host bits", h + "198.51.100.1/24,DE,EU,,\n", []int{2}, "host bits set: want 198.51.100.0/24"},
		{"mapped network", h + "::ffff:10.0.0.0/104,DE,EU,,\n", []int{2}, "IPv4-mapped"},
		{"address without length", h + "198.51.100.1,DE,EU,,\n", []int{2}, "no '/'"},
		{"lower-case country", h + "10.0.0.0/8,de,EU,,\n", []int{2}, `country "de"`},
		{"long country", h + "10.0.0.0/8,DEU,EU,,\n", []int{2}, `country "DEU"`},
		{"bad continent", h + "10.0.0.0/8,DE,XX,,\n", []int{2}, `continent "XX": want one of AF AN AS EU NA OC SA`},
		{"lat without lon", h + "10.0.0.0/8,DE,EU,50,\n", []int{2}, "give both or neither"},
		{"lat not a number", h + "10.0.0.0/8,DE,EU,north,8\n", []int{2}, `lat "north": not a number`},
		{"lat out of range", h + "10.0.0.0/8,DE,EU,90.5,8\n", []int{2}, `lat "90.5": want -90 to 90`},
		{"lon out of range", h + "10.0.0.0/8,DE,EU,50,-180.1\n", []int{2}, `lon "-180.1"`},
		{"NaN", h + "10.0.0.0/8,DE,EU,NaN,8\n", []int{2}, `lat "NaN"`},
		{"says nothing", h + "10.0.0.0/8,,,,\n", []int{2}, "no country, continent or coordinates"},
		{"too few fields", h + "10.0.0.0/8,DE\n", []int{2}, "2 fields: want 5"},
		{"too many fields", h + "10.0.0.0/8,DE,EU,1,2,3\n", []int{2}, "6 fields: want 5"},
		{"duplicate", h + "10.0.0.0/8,DE,EU,,\n# x\n10.0.0.0/8,FR,EU,,\n", []int{4}, "line 4: network 10.0.0.0/8: duplicate of line 2"},
		{"bad quote", h + "10.0.0.0/8,DE,EU,,\n\"10.1.0.0/16,DE,EU,,\n", []int{3}, "line 3: extraneous or missing"},
		{"line numbers after comments and blanks", "# a\n\n" + h + "\n10.0.0.0/8,DE,EU,,\n# b\n11.0.0.0/8,xx,EU,,\n", []int{7}, "line 7: country"},
		{"all errors together", h + "10.0.0.0/8,de,EU,,\n11.0.0.0/8,DE,EU,,\n12.0.0.1/8,DE,EU,,\n", []int{2, 4}, "line 4: network 12.0.0.1/8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := ReadRows(strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("ReadRows = %+v, want an error", rows)
			}
			if rows != nil {
				t.Errorf("ReadRows returned rows %+v with an error", rows)
			}
			if !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("error %q does not contain %q", err, tt.wantSub)
			}
			if got := lineNumbers(err); !reflect.DeepEqual(got, tt.wantLines) {
				t.Errorf("error lines = %v, want %v (%q)", got, tt.wantLines, err)
			}
		})
	}
}

// lineNumbers lists the lines of the *LineErrors in err, in order.
func lineNumbers(err error) []int {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var lines []int
	for _, e := range errs {
		var le *LineError
		if errors.As(e, &le) {
			lines = append(lines, le.Line)
		}
	}
	return lines
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestReadRowsReaderError(t *testing.T) {
	_, err := ReadRows(io.MultiReader(strings.NewReader("network,country,continent,lat,lon\n"), failingReader{}))
	if err == nil || !strings.Contains(err.Error(), "geo: read table: disk on fire") {
		t.Errorf("ReadRows error = %v, want the reader's error", err)
	}
}

func TestWriteMMDB(t *testing.T) {
	pfx := netip.MustParsePrefix
	rows := []Row{
		// More specific first: the longest network must still win.
		{pfx("198.51.100.0/25"), london},
		{pfx("198.51.100.0/24"), frankfurt},
		{pfx("198.51.0.0/16"), paris},
	}
	l := newTestLocator(t, Options{MMDB: writeDB(t, TypeCity, rows)})
	tests := []struct {
		name string
		p    string
		want Result
	}{
		{"longest wins over earlier rows", "198.51.100.0/24", Result{london, 24, SourceMMDB}},
		{"middle network", "198.51.100.128/32", Result{frankfurt, 24, SourceMMDB}},
		{"outer network scope", "198.51.7.0/24", Result{paris, 18, SourceMMDB}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := l.Locate(pfx(tt.p)); got != tt.want {
				t.Errorf("Locate(%s) = %+v, want %+v", tt.p, got, tt.want)
			}
		})
	}
}

func TestWriteMMDBErrors(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name    string
		dbType  string
		rows    []Row
		wantIs  error
		wantSub string
	}{
		{"ASN type", "GeoLite2-ASN", nil, ErrDatabaseType, `"GeoLite2-ASN"`},
		{"empty type", "", nil, ErrDatabaseType, `""`},
		{"invalid network", TypeCity, []Row{{Loc: paris}}, nil, "geo: mmdb network invalid Prefix"},
		{"host bits", TypeCity, []Row{{pfx("10.0.0.1/8"), paris}}, nil, "geo: mmdb network 10.0.0.1/8"},
		{"mapped", TypeCity, []Row{{pfx("::ffff:10.0.0.0/104"), paris}}, nil, "want a canonical"},
		{"IPv4 alias", TypeCity, []Row{{pfx("::ffff:0:0/96"), paris}}, nil, "geo: mmdb network"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := WriteMMDB(io.Discard, tt.dbType, tt.rows)
			if err == nil {
				t.Fatal("WriteMMDB: no error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q is not %v", err, tt.wantIs)
			}
			if !strings.Contains(err.Error(), tt.wantSub) {
				t.Errorf("error %q does not contain %q", err, tt.wantSub)
			}
		})
	}
}

// FuzzReadRows checks that ReadRows never panics, that every error names
// a line, and that whatever it accepts is valid and makes a database. The
// seed corpus is in testdata/fuzz/FuzzReadRows.
func FuzzReadRows(f *testing.F) {
	f.Add("network,country,continent,lat,lon\n198.51.100.0/25,DE,EU,50.11,8.68\n2001:db8:4::/48,JP,AS,,\n")
	f.Add("# c\nnetwork,country,continent,lat,lon\n10.0.0.1/8,de,XX,91,\n\"x\n")
	f.Fuzz(func(t *testing.T, in string) {
		rows, err := ReadRows(strings.NewReader(in))
		if err != nil {
			if len(lineNumbers(err)) == 0 {
				t.Fatalf("error without a line: %v", err)
			}
			for _, n := range lineNumbers(err) {
				if n < 1 {
					t.Fatalf("line %d < 1: %v", n, err)
				}
			}
			return
		}
		for _, r := range rows {
			if !r.Network.IsValid() || r.Network != r.Network.Masked() || !r.Loc.Known() {
				t.Fatalf("accepted an invalid row %+v", r)
			}
		}
		if err := WriteMMDB(io.Discard, TypeCity, rows); err != nil {
			t.Fatalf("WriteMMDB of accepted rows: %v", err)
		}
	})
}
