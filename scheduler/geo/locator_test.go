package geo

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"

	"github.com/transmirror/transmirror/scheduler"
)

const fixtureMMDB = "testdata/regions.mmdb"

var (
	frankfurt = scheduler.Location{Lat: 50.11, Lon: 8.68, HasCoords: true, Country: "DE", Continent: "EU"}
	london    = scheduler.Location{Lat: 51.51, Lon: -0.13, HasCoords: true, Country: "GB", Continent: "EU"}
	newYork   = scheduler.Location{Lat: 40.71, Lon: -74.01, HasCoords: true, Country: "US", Continent: "NA"}
	singapore = scheduler.Location{Lat: 1.35, Lon: 103.82, HasCoords: true, Country: "SG", Continent: "AS"}
	japan     = scheduler.Location{Country: "JP", Continent: "AS"}
	toronto   = scheduler.Location{Lat: 43.65, Lon: -79.38, HasCoords: true, Country: "CA", Continent: "NA"}
	paris     = scheduler.Location{Lat: 48.86, Lon: 2.35, HasCoords: true, Country: "FR", Continent: "EU"}
	fallback  = scheduler.Location{Continent: "EU"}
)

// staticTable overlaps the fixture on purpose: 203.0.113.0/24 and
// 2001:db8:2::/48 are in the database too.
func staticTable() []Row {
	return []Row{
		{Network: netip.MustParsePrefix("203.0.113.0/24"), Loc: toronto},
		{Network: netip.MustParsePrefix("10.0.0.0/8"), Loc: paris},
		{Network: netip.MustParsePrefix("10.1.0.0/16"), Loc: singapore},
		{Network: netip.MustParsePrefix("10.1.2.0/24"), Loc: japan},
		{Network: netip.MustParsePrefix("2001:db8:2::/48"), Loc: toronto},
		{Network: netip.MustParsePrefix("fd00::/8"), Loc: paris},
		{Network: netip.MustParsePrefix("fd00:1::/32"), Loc: london},
	}
}

func newTestLocator(t testing.TB, opts Options) *Locator {
	t.Helper()
	l, err := NewLocator(opts)
	if err != nil {
		t.Fatalf("NewLocator: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// writeDB writes rows as a database of type dbType in a temporary folder
// and returns its path.
func writeDB(t testing.TB, dbType string, rows []Row) string {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteMMDB(&buf, dbType, rows); err != nil {
		t.Fatalf("WriteMMDB: %v", err)
	}
	path := filepath.Join(t.TempDir(), "test.mmdb")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLocate(t *testing.T) {
	both := newTestLocator(t, Options{MMDB: fixtureMMDB, Static: staticTable(), Default: fallback})
	dbOnly := newTestLocator(t, Options{MMDB: fixtureMMDB, Default: fallback})
	staticOnly := newTestLocator(t, Options{Static: staticTable(), Default: fallback})
	none := newTestLocator(t, Options{})

	tests := []struct {
		name string
		l    *Locator
		p    string
		want Result
	}{
		// The static table wins over the database.
		{"static wins over mmdb v4", both, "203.0.113.0/24", Result{toronto, 24, SourceStatic}},
		{"same prefix from mmdb alone", dbOnly, "203.0.113.0/24", Result{newYork, 24, SourceMMDB}},
		{"static wins over mmdb v6", both, "2001:db8:2::/56", Result{toronto, 48, SourceStatic}},
		{"mmdb where static has nothing", both, "198.51.100.0/24", Result{frankfurt, 24, SourceMMDB}},

		// Longest static prefix wins.
		{"longest static /24", staticOnly, "10.1.2.0/24", Result{japan, 24, SourceStatic}},
		{"longest static /16", staticOnly, "10.1.3.0/24", Result{singapore, 24, SourceStatic}},
		{"longest static /8 leaves out 10.1/16", staticOnly, "10.2.0.0/24", Result{paris, 15, SourceStatic}},
		{"longest static address", staticOnly, "10.1.2.3/32", Result{japan, 24, SourceStatic}},
		{"longest static v6 /32", staticOnly, "fd00:1:2::/56", Result{london, 32, SourceStatic}},
		{"longest static v6 /8 leaves out /32", staticOnly, "fd00:2::/56", Result{paris, 31, SourceStatic}},
		{"static miss is default", staticOnly, "11.0.0.0/24", Result{fallback, 8, SourceDefault}},

		// Database hits: coordinates, country, continent, scope.
		{"mmdb city /25 capped to /24", dbOnly, "198.51.100.0/24", Result{frankfurt, 24, SourceMMDB}},
		{"mmdb city address", dbOnly, "198.51.100.7/32", Result{frankfurt, 24, SourceMMDB}},
		{"mmdb city shorter source", dbOnly, "192.0.2.0/23", Result{singapore, 24, SourceMMDB}},
		{"mmdb city v6 /48", dbOnly, "2001:db8:3:abcd::/64", Result{singapore, 48, SourceMMDB}},
		{"mmdb city v6 address", dbOnly, "2001:db8:3::1/128", Result{singapore, 48, SourceMMDB}},
		{"mmdb nested v6 /56", dbOnly, "2001:db8:1:ff00::/56", Result{london, 56, SourceMMDB}},
		{"mmdb around nested /56", dbOnly, "2001:db8:1::/56", Result{frankfurt, 49, SourceMMDB}},
		{"mmdb country only", dbOnly, "2001:db8:4::/56", Result{japan, 48, SourceMMDB}},
		{"mmdb IPv4-mapped", dbOnly, "::ffff:198.51.100.0/120", Result{frankfurt, 24, SourceMMDB}},
		{"mmdb IPv4-mapped address", dbOnly, "::ffff:192.0.2.9/128", Result{singapore, 24, SourceMMDB}},

		// Unknown clients get the default, scoped to their own prefix.
		{"unknown v4", both, "100.64.0.0/24", Result{fallback, 2, SourceDefault}},
		{"unknown v4 address", both, "100.64.0.1/32", Result{fallback, 2, SourceDefault}},
		{"unknown short prefix", both, "100.64.0.0/10", Result{fallback, 2, SourceDefault}},
		{"unknown upper half of a /25", dbOnly, "198.51.100.200/32", Result{fallback, 24, SourceDefault}},
		{"unknown v6", both, "2001:db8:99::/48", Result{fallback, 41, SourceDefault}},
		{"unknown v6 address", both, "2001:db8:99::1/128", Result{fallback, 41, SourceDefault}},
		{"loopback unknown to mmdb", dbOnly, "127.0.0.1/32", Result{fallback, 1, SourceDefault}},
		{"no database no table", none, "198.51.100.0/24", Result{scheduler.Location{}, 0, SourceDefault}},
		{"all of IPv4", both, "0.0.0.0/0", Result{fallback, 5, SourceDefault}},
		{"invalid prefix", both, "", Result{fallback, 0, SourceDefault}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p netip.Prefix
			if tt.p != "" {
				p = netip.MustParsePrefix(tt.p)
			}
			if got := tt.l.Locate(p); got != tt.want {
				t.Errorf("Locate(%s) = %+v, want %+v", tt.p, got, tt.want)
			}
		})
	}
}

func TestLocatorDatabaseTypes(t *testing.T) {
	rows := []Row{{Network: netip.MustParsePrefix("198.51.100.0/24"), Loc: frankfurt}}
	p := netip.MustParsePrefix("198.51.100.0/24")
	tests := []struct {
		name   string
		dbType string
		want   scheduler.Location
	}{
		{"GeoIP2 City", "GeoIP2-City", frankfurt},
		{"GeoLite2 City", "GeoLite2-City", frankfurt},
		{"GeoIP2 Country drops coordinates", "GeoIP2-Country", scheduler.Location{Country: "DE", Continent: "EU"}},
		{"GeoLite2 Country", "GeoLite2-Country", scheduler.Location{Country: "DE", Continent: "EU"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLocator(t, Options{MMDB: writeDB(t, tt.dbType, rows)})
			if got := l.DatabaseType(); got != tt.dbType {
				t.Errorf("DatabaseType() = %q, want %q", got, tt.dbType)
			}
			want := Result{Loc: tt.want, Scope: 24, Source: SourceMMDB}
			if got := l.Locate(p); got != want {
				t.Errorf("Locate(%s) = %+v, want %+v", p, got, want)
			}
		})
	}
}

func TestNewLocatorErrors(t *testing.T) {
	dir := t.TempDir()
	notMMDB := filepath.Join(dir, "not.mmdb")
	if err := os.WriteFile(notMMDB, []byte("network,country\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	asn := filepath.Join(dir, "asn.mmdb")
	writeRawDB(t, asn, "GeoLite2-ASN")
	odd := filepath.Join(dir, "odd.mmdb")
	writeRawDB(t, odd, "Transmirror-Odd")
	// regions.mmdb with its data section inverted: the metadata and the
	// search tree are intact, every record fails to decode.
	good, err := os.ReadFile(filepath.Join("testdata", "regions.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	meta := bytes.LastIndex(good, []byte("\xab\xcd\xefMaxMind.com"))
	data := bytes.Index(good, make([]byte, 16)) + 16
	if meta < 0 || data < 16 || data >= meta {
		t.Fatalf("regions.mmdb: metadata at %d, data section at %d", meta, data)
	}
	for i := data; i < meta; i++ {
		good[i] ^= 0xff
	}
	badData := filepath.Join(dir, "bad-data.mmdb")
	if err := os.WriteFile(badData, good, 0o644); err != nil {
		t.Fatal(err)
	}

	pfx := netip.MustParsePrefix
	tests := []struct {
		name    string
		opts    Options
		wantIs  error
		wantSub []string
	}{
		{"missing database", Options{MMDB: filepath.Join(dir, "missing.mmdb")}, os.ErrNotExist, []string{"geo: ", "missing.mmdb"}},
		{"not a database", Options{MMDB: notMMDB}, nil, []string{"geo: ", "not.mmdb"}},
		{"ASN database", Options{MMDB: asn}, ErrDatabaseType, []string{`"GeoLite2-ASN"`, "want a City or Country database"}},
		{"unknown database type", Options{MMDB: odd}, ErrDatabaseType, []string{`"Transmirror-Odd"`}},
		{"corrupt data section", Options{MMDB: badData}, nil, []string{"bad-data.mmdb: corrupt database"}},
		{"static host bits", Options{Static: []Row{{Network: pfx("10.1.2.3/8"), Loc: paris}}}, nil,
			[]string{"static network 1 (10.1.2.3/8): host bits set: want 10.0.0.0/8"}},
		{"static invalid", Options{Static: []Row{{Loc: paris}}}, nil, []string{"static network 1 (invalid Prefix): not a valid prefix"}},
		{"static mapped", Options{Static: []Row{{Network: pfx("::ffff:10.0.0.0/104"), Loc: paris}}}, nil, []string{"IPv4-mapped"}},
		{"static says nothing", Options{Static: []Row{{Network: pfx("10.0.0.0/8")}}}, nil, []string{"location says nothing"}},
		{"static duplicate", Options{Static: []Row{
			{Network: pfx("10.0.0.0/8"), Loc: paris},
			{Network: pfx("10.0.0.0/8"), Loc: london},
		}}, nil, []string{"static network 2 (10.0.0.0/8): duplicate of static network 1"}},
		{"all static errors together", Options{Static: []Row{
			{Network: pfx("10.1.2.3/8"), Loc: paris},
			{Network: pfx("fd00::/8")},
		}}, nil, []string{"static network 1 ", "static network 2 "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := NewLocator(tt.opts)
			if err == nil {
				l.Close()
				t.Fatal("NewLocator: no error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %q is not %v", err, tt.wantIs)
			}
			for _, s := range tt.wantSub {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// writeRawDB writes a one-record database of any type, which WriteMMDB
// refuses to do.
func writeRawDB(t *testing.T, path, dbType string) {
	t.Helper()
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: dbType, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix("198.51.100.0/24")
	if err := tree.Insert(prefixToIPNet(p), mmdbtype.Map{"autonomous_system_number": mmdbtype.Uint32(64496)}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := tree.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLocateConcurrentClose runs lookups while the Locator is closed, as a
// reload does with the Locator it swapped out; run it with -race.
func TestLocateConcurrentClose(t *testing.T) {
	l, err := NewLocator(Options{MMDB: fixtureMMDB, Static: staticTable(), Default: fallback})
	if err != nil {
		t.Fatal(err)
	}
	prefixes := []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/24"),
		netip.MustParsePrefix("10.1.2.0/24"),
		netip.MustParsePrefix("2001:db8:3::/56"),
		netip.MustParsePrefix("100.64.0.0/24"),
	}
	want := make([]Result, len(prefixes))
	for i, p := range prefixes {
		want[i] = l.Locate(p)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				k := (g + i) % len(prefixes)
				if got := l.Locate(prefixes[k]); got != want[k] {
					t.Errorf("Locate(%s) = %+v, want %+v", prefixes[k], got, want[k])
					return
				}
			}
		})
	}
	for range 2 {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
	wg.Wait()
}

func BenchmarkLocate(b *testing.B) {
	l := newTestLocator(b, Options{MMDB: fixtureMMDB, Static: staticTable(), Default: fallback})
	benches := []struct {
		name string
		p    netip.Prefix
		src  string
	}{
		{"static_v4", netip.MustParsePrefix("10.1.2.0/24"), SourceStatic},
		{"mmdb_v4", netip.MustParsePrefix("198.51.100.0/24"), SourceMMDB},
		{"mmdb_v6", netip.MustParsePrefix("2001:db8:3::/56"), SourceMMDB},
		{"default_v4", netip.MustParsePrefix("100.64.0.0/24"), SourceDefault},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			if got := l.Locate(bb.p).Source; got != bb.src {
				b.Fatalf("Locate(%s).Source = %q, want %q", bb.p, got, bb.src)
			}
			b.ReportAllocs()
			for b.Loop() {
				l.Locate(bb.p)
			}
		})
	}
	b.Run("client_prefix_and_locate", func(b *testing.B) {
		src := netip.MustParseAddr("192.0.2.53")
		ecs := netip.MustParsePrefix("198.51.100.0/24")
		b.ReportAllocs()
		for b.Loop() {
			r := l.Locate(ClientPrefix(src, ecs, true))
			_ = ReplyScope(ecs, r)
		}
	})
}

// TestScopeIsTruthful checks the promise of Locate's scope: every client
// that ClientPrefix puts in the scope network of an answer gets that same
// answer, so a resolver caching it for the scope hands out no wrong one.
func TestScopeIsTruthful(t *testing.T) {
	static := append(staticTable(),
		Row{Network: netip.MustParsePrefix("198.51.100.64/26"), Loc: japan}, // inside a database /25
		Row{Network: netip.MustParsePrefix("192.0.0.0/16"), Loc: paris},     // around a database /25
		Row{Network: netip.MustParsePrefix("2001:db8:3:8000::/49"), Loc: london},
	)
	l := newTestLocator(t, Options{MMDB: fixtureMMDB, Static: static, Default: fallback})
	rng := rand.New(rand.NewPCG(1, 2))
	starts := []string{
		"10.0.0.0", "10.1.0.0", "10.1.2.0", "10.1.3.0", "10.2.0.0", "10.255.255.0", "11.0.0.0",
		"100.64.0.0", "127.0.0.0", "192.0.2.0", "192.0.3.0", "198.51.100.0", "198.51.101.0",
		"203.0.113.0", "203.0.112.0", "0.0.0.0", "255.255.255.0",
		"2001:db8:1::", "2001:db8:1:ff00::", "2001:db8:1:fe00::", "2001:db8:3::", "2001:db8:3:8000::",
		"2001:db8:4::", "2001:db8:99::", "fd00::", "fd00:1::", "fd00:2::", "::", "ffff::",
	}
	for _, s := range starts {
		t.Run(s, func(t *testing.T) {
			a := netip.MustParseAddr(s)
			want := l.Locate(ClientPrefix(a, netip.Prefix{}, false))
			scope := netip.PrefixFrom(a, want.Scope).Masked()
			for range 200 {
				b := randomIn(rng, scope)
				if got := l.Locate(ClientPrefix(b, netip.Prefix{}, false)); got.Loc != want.Loc || got.Source != want.Source {
					t.Fatalf("%s answers %+v with scope %s, but %s in it gets %+v", a, want, scope, b, got)
				}
			}
		})
	}
}

// randomIn returns a random address in p.
func randomIn(rng *rand.Rand, p netip.Prefix) netip.Addr {
	a := p.Addr().As16()
	skip := p.Bits()
	if p.Addr().Is4() {
		skip += 96
	}
	for i := skip; i < 128; i++ {
		if rng.IntN(2) == 1 {
			a[i/8] |= 0x80 >> (i % 8)
		}
	}
	b := netip.AddrFrom16(a)
	if p.Addr().Is4() {
		b = b.Unmap()
	}
	return b
}

// TestFlatten checks that a flattened table covers its family without
// gaps or overlaps and that each cell carries its longest match.
func TestFlatten(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name    string
		root    string
		entries []string
		want    []string // cells; "=" marks a hole
	}{
		{"empty", "0.0.0.0/0", nil, []string{"=0.0.0.0/0"}},
		{"whole family", "::/0", []string{"::/0"}, []string{"::/0"}},
		{"one network", "0.0.0.0/0", []string{"128.0.0.0/2"}, []string{"=0.0.0.0/1", "128.0.0.0/2", "=192.0.0.0/2"}},
		{"nested", "0.0.0.0/0", []string{"0.0.0.0/1", "64.0.0.0/3"},
			[]string{"0.0.0.0/2", "64.0.0.0/3", "96.0.0.0/3", "=128.0.0.0/1"}},
		{"siblings", "0.0.0.0/0", []string{"0.0.0.0/2", "64.0.0.0/2"},
			[]string{"0.0.0.0/2", "64.0.0.0/2", "=128.0.0.0/1"}},
		{"last address", "0.0.0.0/0", []string{"255.255.255.255/32"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries := map[netip.Prefix]scheduler.Location{}
			for i, e := range tt.entries {
				entries[pfx(e)] = scheduler.Location{Lat: float64(i), HasCoords: true}
			}
			tab := flatten(pfx(tt.root), entries)
			var got []string
			next := pfx(tt.root).Addr()
			for i, c := range tab {
				if c.net.Addr() != next {
					t.Fatalf("cell %d %s starts at %s, want %s", i, c.net, c.net.Addr(), next)
				}
				next = lastAddr(c.net).Next()
				s := c.net.String()
				if !c.ok {
					s = "=" + s
				} else if best := longestMatch(entries, c.net.Addr()); c.loc != entries[best] {
					t.Errorf("cell %s carries %+v, want that of %s", c.net, c.loc, best)
				}
				got = append(got, s)
			}
			if next.IsValid() {
				t.Errorf("cells end before %s", next)
			}
			if tt.want != nil && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cells = %v, want %v", got, tt.want)
			}
		})
	}
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As16()
	skip := p.Bits()
	if p.Addr().Is4() {
		skip += 96
	}
	for i := skip; i < 128; i++ {
		a[i/8] |= 0x80 >> (i % 8)
	}
	b := netip.AddrFrom16(a)
	if p.Addr().Is4() {
		b = b.Unmap()
	}
	return b
}

func longestMatch(entries map[netip.Prefix]scheduler.Location, a netip.Addr) netip.Prefix {
	var best netip.Prefix
	for p := range entries {
		if p.Contains(a) && (!best.IsValid() || p.Bits() > best.Bits()) {
			best = p
		}
	}
	return best
}

// TestLocateCache: the cache answers exactly what the lookups answer, for
// every address of blocks that the database or the static table split
// finer than /24 (and /48), asked twice in a mixed order; a hit allocates
// nothing.
func TestLocateCache(t *testing.T) {
	rows := append(staticTable(),
		Row{Network: netip.MustParsePrefix("10.9.9.128/25"), Loc: london},
		Row{Network: netip.MustParsePrefix("10.9.9.7/32"), Loc: japan},
		Row{Network: netip.MustParsePrefix("fd00:9:9:9::/64"), Loc: japan})
	cached := newTestLocator(t, Options{MMDB: fixtureMMDB, Static: rows, Default: fallback, CacheSize: 64})
	plain := newTestLocator(t, Options{MMDB: fixtureMMDB, Static: rows, Default: fallback, CacheSize: -1})
	var prefixes []netip.Prefix
	for _, block := range []string{"198.51.100.0", "203.0.113.0", "192.0.2.0", "10.9.9.0", "10.1.2.0", "100.64.0.0"} {
		base := netip.MustParseAddr(block).As4()
		for i := range 256 {
			base[3] = byte(i)
			prefixes = append(prefixes, netip.PrefixFrom(netip.AddrFrom4(base), 32))
		}
	}
	for _, p := range []string{"fd00:9:9:9::1/128", "fd00:9:9:8::1/128", "2001:db8:2::1/128", "2001:db8:3::/56", "198.51.100.0/24", "198.51.100.128/25"} {
		prefixes = append(prefixes, netip.MustParsePrefix(p))
	}
	for round := range 2 {
		for i := range prefixes {
			p := prefixes[(i*7919+round)%len(prefixes)] // a mixed order, each once per round
			if got, want := cached.Locate(p), plain.Locate(p); got != want {
				t.Fatalf("round %d: Locate(%s) = %+v with the cache, %+v without", round, p, got, want)
			}
		}
	}
	for _, p := range []netip.Prefix{
		netip.MustParsePrefix("198.51.100.0/24"),      // split into /25s by the database: cached for this prefix
		netip.MustParsePrefix("2001:db8:1:ff00::/56"), // a /56 inside a /48 block
	} {
		cached.Locate(p)
		if n := testing.AllocsPerRun(100, func() { cached.Locate(p) }); n != 0 {
			t.Errorf("Locate(%s) again allocates %v times, want 0 (a cache hit)", p, n)
		}
	}
	p := netip.MustParsePrefix("2001:db8:3::7/128") // an mmdb network of /48: cached
	if cached.Locate(p).Source != SourceMMDB {
		t.Fatal("the test address is not in the database")
	}
	if n := testing.AllocsPerRun(100, func() { cached.Locate(p) }); n != 0 {
		t.Errorf("a cache hit allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(10, func() { plain.Locate(p) }); n == 0 {
		t.Error("an uncached mmdb lookup allocates nothing: the test measures nothing")
	}
}

func BenchmarkLocateCache(b *testing.B) {
	p := netip.MustParsePrefix("2001:db8:3::7/128")
	for _, tc := range []struct {
		name string
		size int
	}{{"cached", 0}, {"uncached", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			l := newTestLocator(b, Options{MMDB: fixtureMMDB, Default: fallback, CacheSize: tc.size})
			b.ReportAllocs()
			for b.Loop() {
				l.Locate(p)
			}
		})
	}
}
