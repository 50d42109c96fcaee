package geo

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/oschwald/geoip2-golang/v2"
	"github.com/oschwald/maxminddb-golang/v2"

	"github.com/transmirror/transmirror/scheduler"
)

// Sources of a [Result]: which part of a [Locator] answered. They are
// few and fixed, so they are fit for a metric label.
const (
	// SourceStatic means the static networks table answered.
	SourceStatic = "static"
	// SourceMMDB means the GeoIP2/GeoLite2 database answered.
	SourceMMDB = "mmdb"
	// SourceDefault means nothing knew the client: the default answered.
	SourceDefault = "default"
)

// The longest client prefixes this package ever uses or announces as a
// scope: the privacy limits that RFC 7871 recommends for ECS.
const (
	// MaxPrefixV4 is the longest IPv4 client prefix: /24.
	MaxPrefixV4 = 24
	// MaxPrefixV6 is the longest IPv6 client prefix: /56.
	MaxPrefixV6 = 56
)

// Sentinel errors of this package.
var (
	// ErrDatabaseType is returned for an mmdb whose database type is
	// neither a GeoIP2/GeoLite2 City nor a Country database.
	ErrDatabaseType = errors.New("geo: unsupported database type")
)

// Row is one network with its location: an entry of a [Locator]'s static
// table, a line of a CSV networks table ([ReadRows]), a record of a test
// database ([WriteMMDB]).
type Row struct {
	Network netip.Prefix
	Loc     scheduler.Location
}

// Options are what a [Locator] is built from. The zero Options make a
// Locator that answers Default (the unknown location) for everyone.
type Options struct {
	// MMDB is the path of a GeoIP2 or GeoLite2 City or Country database;
	// empty for none. The type is read from the database's metadata: a
	// City database gives coordinates, country and continent, a Country
	// database country and continent only.
	MMDB string
	// Static is a networks table that wins over the database; the longest
	// prefix containing the client wins. Networks must be canonical
	// (no host bits set), unique, and each location must say something.
	Static []Row
	// Default is the answer for clients that neither Static nor MMDB knows.
	Default scheduler.Location
	// CacheSize is the number of entries of the lookup cache (default
	// DefaultCacheSize; negative: no cache). The cache is a fixed table
	// of results per /24 (IPv4) and /48 (IPv6), kept only for networks
	// whose answer is the same for every address in them.
	CacheSize int
}

// DefaultCacheSize is the default number of entries of a Locator's cache.
const DefaultCacheSize = 1 << 14

// Cache granularity: a result is cached for the /24 or /48 around the
// client when the answer depended on no more bits than that.
const (
	cacheBitsV4 = 24
	cacheBitsV6 = 48
)

// Result is where a client is, as far as a [Locator] can tell.
type Result struct {
	// Loc is the client's location (Default when unknown).
	Loc scheduler.Location
	// Scope is the prefix length the answer depended on, for the SCOPE
	// PREFIX-LENGTH of an ECS reply (see [Locator.Locate] and [ReplyScope]).
	Scope int
	// Source is SourceStatic, SourceMMDB or SourceDefault.
	Source string
}

type dbKind int

const (
	kindNone dbKind = iota
	kindCity
	kindCountry
)

// kindOf maps a database type from mmdb metadata to what we can read from
// it: City-like databases (GeoIP2-City, GeoLite2-City, the regional and
// Enterprise variants, DB-IP's compatible ones) and Country databases.
func kindOf(dbType string) dbKind {
	switch {
	case strings.Contains(dbType, "City"), strings.Contains(dbType, "Enterprise"),
		strings.HasPrefix(dbType, "DBIP-Location"):
		return kindCity
	case strings.Contains(dbType, "Country"):
		return kindCountry
	}
	return kindNone
}

// cell is one network of a flattened static table: a location, or a
// hole where the table says nothing.
type cell struct {
	net netip.Prefix
	loc scheduler.Location
	ok  bool
}

// table is the static table of one address family, flattened at build
// time into disjoint networks that cover the whole family, sorted by
// address: each cell is the largest network in which the longest-prefix
// answer is the same everywhere, so its length is a truthful scope.
type table []cell

// lookup returns the cell holding a.
func (t table) lookup(a netip.Addr) cell {
	i, found := slices.BinarySearchFunc(t, a, func(c cell, a netip.Addr) int { return c.net.Addr().Compare(a) })
	if !found {
		i--
	}
	return t[i]
}

// flatten turns the static entries of one family (root is 0.0.0.0/0 or
// ::/0) into a table. It walks the binary trie of the entries: a network
// with no entry strictly inside it becomes one cell carrying the nearest
// enclosing entry (or a hole), any other is split in two.
func flatten(root netip.Prefix, entries map[netip.Prefix]scheduler.Location) table {
	nets := make([]netip.Prefix, 0, len(entries))
	for p := range entries {
		nets = append(nets, p)
	}
	slices.SortFunc(nets, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var t table
	var walk func(p netip.Prefix, inherited cell, inside []netip.Prefix)
	walk = func(p netip.Prefix, inherited cell, inside []netip.Prefix) {
		if loc, ok := entries[p]; ok {
			inherited = cell{loc: loc, ok: true}
		}
		for len(inside) > 0 && inside[0].Bits() <= p.Bits() { // p itself
			inside = inside[1:]
		}
		if len(inside) == 0 {
			inherited.net = p
			t = append(t, inherited)
			return
		}
		lo, hi := halves(p)
		split, _ := slices.BinarySearchFunc(inside, hi.Addr(), func(q netip.Prefix, a netip.Addr) int { return q.Addr().Compare(a) })
		walk(lo, inherited, inside[:split])
		walk(hi, inherited, inside[split:])
	}
	walk(root, cell{}, nets)
	return t
}

// halves splits p (shorter than a full address) into its two halves.
func halves(p netip.Prefix) (lo, hi netip.Prefix) {
	b, a := p.Bits(), p.Addr()
	var h netip.Addr
	if a.Is4() {
		x := a.As4()
		x[b/8] |= 0x80 >> (b % 8)
		h = netip.AddrFrom4(x)
	} else {
		x := a.As16()
		x[b/8] |= 0x80 >> (b % 8)
		h = netip.AddrFrom16(x)
	}
	return netip.PrefixFrom(a, b+1), netip.PrefixFrom(h, b+1)
}

// Locator tells where clients are. It is immutable once built and safe for
// concurrent use; a reload builds a new Locator and swaps it in.
type Locator struct {
	v4, v6 table
	db     *geoip2.Reader // nil without a database
	kind   dbKind
	dbType string
	def    scheduler.Location
	cache  []atomic.Pointer[cached] // nil: no cache; len a power of two
	seed   maphash.Seed
}

// cached is one cache entry: the result for every address of net when
// wide, else only for addr (the masked address of a prefix asked, whose
// answer depended on more bits than the block's).
type cached struct {
	net  netip.Prefix
	addr netip.Addr
	wide bool
	res  Result
}

// NewLocator builds a Locator from opts. The database, if any, is read
// into memory (not memory-mapped), so that replacing the file on disk can
// never disturb a running server and a Locator that a reload swapped out
// can finish its lookups in flight. All problems with Static are reported
// together.
func NewLocator(opts Options) (*Locator, error) {
	l := &Locator{def: opts.Default, seed: maphash.MakeSeed()}
	if n := opts.CacheSize; n >= 0 {
		if n == 0 {
			n = DefaultCacheSize
		}
		size := 1
		for size < n {
			size <<= 1
		}
		l.cache = make([]atomic.Pointer[cached], size)
	}
	if err := l.buildStatic(opts.Static); err != nil {
		return nil, err
	}
	if opts.MMDB != "" {
		data, err := os.ReadFile(opts.MMDB)
		if err != nil {
			return nil, fmt.Errorf("geo: %w", err)
		}
		if err := l.openDB(data); err != nil {
			return nil, fmt.Errorf("geo: %s: %w", opts.MMDB, err)
		}
	}
	return l, nil
}

func (l *Locator) openDB(data []byte) error {
	db, err := geoip2.OpenBytes(data)
	if err != nil {
		if db != nil {
			_ = db.Close()
		}
		var unknown geoip2.UnknownDatabaseTypeError
		if errors.As(err, &unknown) {
			return fmt.Errorf("%w %q: want a City or Country database", ErrDatabaseType, unknown.DatabaseType)
		}
		return err
	}
	t := db.Metadata().DatabaseType
	k := kindOf(t)
	if k == kindNone {
		_ = db.Close()
		return fmt.Errorf("%w %q: want a City or Country database", ErrDatabaseType, t)
	}
	if err := verifyDB(data); err != nil {
		_ = db.Close()
		return err
	}
	l.db, l.kind, l.dbType = db, k, t
	if err := l.probeDB(db.Metadata().IPVersion); err != nil {
		l.db, l.kind, l.dbType = nil, kindNone, ""
		_ = db.Close()
		return err
	}
	return nil
}

// verifyDB checks the whole database before it is used: metadata, every
// node of the search tree and every record of the data section. A record
// that does not decode would otherwise show only when a client in its
// network asks, and then as Default (no error at query time): the client
// answered from the wrong place with nothing logged. It reads the file
// once, at load, off the query path (a reload keeps the old database
// serving meanwhile).
func verifyDB(data []byte) error {
	r, err := maxminddb.OpenBytes(data)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Verify(); err != nil {
		return fmt.Errorf("corrupt database: %w", err)
	}
	return nil
}

// probeDB looks up one address in each /4 of the address space (and of
// IPv6's, unless the database is IPv4 only). Opening a database reads its
// metadata alone; a search tree or data section that is corrupt shows in
// lookups, and is better refused now, with the file named, than answered
// with Default for every client it hides.
func (l *Locator) probeDB(ipVersion uint) error {
	for i := range 16 {
		probes := []netip.Addr{netip.AddrFrom4([4]byte{byte(i << 4), 1, 2, 3})}
		if ipVersion != 4 {
			probes = append(probes, netip.AddrFrom16([16]byte{0: byte(i << 4), 1: 1, 15: 1}))
		}
		for _, a := range probes {
			if _, _, err := l.lookupDB(a); err != nil {
				return fmt.Errorf("corrupt database: looking up %s: %w", a, err)
			}
		}
	}
	return nil
}

func (l *Locator) buildStatic(rows []Row) error {
	var errs []error
	seen := make(map[netip.Prefix]int, len(rows))
	v4, v6 := map[netip.Prefix]scheduler.Location{}, map[netip.Prefix]scheduler.Location{}
	for i, r := range rows {
		p := r.Network
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("geo: static network %d (%s): "+format, append([]any{i + 1, p}, args...)...))
		}
		switch {
		case !p.IsValid():
			bad("not a valid prefix")
			continue
		case p.Addr().Is4In6():
			bad("IPv4-mapped IPv6 network: write it as IPv4")
			continue
		case p != p.Masked():
			bad("host bits set: want %s", p.Masked())
			continue
		case !r.Loc.Known():
			bad("location says nothing")
			continue
		}
		if j, dup := seen[p]; dup {
			bad("duplicate of static network %d", j)
			continue
		}
		seen[p] = i + 1
		if p.Addr().Is4() {
			v4[p] = r.Loc
		} else {
			v6[p] = r.Loc
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	l.v4 = flatten(netip.MustParsePrefix("0.0.0.0/0"), v4)
	l.v6 = flatten(netip.MustParsePrefix("::/0"), v6)
	return nil
}

// DatabaseType is the database type from the mmdb's metadata (say
// "GeoLite2-City"), or "" when the Locator has no database.
func (l *Locator) DatabaseType() string { return l.dbType }

// Locate tells where the client prefix p is (an address as a /32 or /128,
// or a prefix from [ClientPrefix]). IPv4-mapped IPv6 prefixes are unmapped
// first. It looks up the first address of p: in the static table (longest
// prefix wins), then in the database, and answers Default when neither
// knows it.
//
// Scope is the length of the largest network around that address in which
// every address gets this same answer, so that a resolver caching it for
// the scope never hands it to a client that would have got another:
//   - static hit: the matched network, lengthened just enough to leave out
//     any longer static network nested in it (10.0.0.0/8 holding
//     10.1.0.0/16 answers 10.2.0.0 with scope 15, not 8);
//   - database hit: the longer of the network the database returned (the
//     largest network around the address with the same record) and the
//     static table's gap around the address;
//   - default: likewise, the longer of the database's empty network around
//     the address and the static gap: the answer depended on the absence of
//     any match there. This is often shorter than p (answers for unknown
//     space cache well) and never claims a network that holds a match.
//
// Each is then capped at [MaxPrefixV4] or [MaxPrefixV6], so a reply never
// asks a resolver for more than /24 or /56 of its clients (RFC 7871 lets a
// scope exceed the source prefix length). The cap is truthful for prefixes
// from ClientPrefix, which are never longer: every client that ClientPrefix
// maps into one /24 (or /56) looks up the same first address and gets the
// same answer. For a longer p (a raw address) the capped scope is what a
// reply may carry, not a claim about the rest of the /24. A database
// lookup that fails (a corrupt record) answers Default with the capped
// length, the narrowest claim.
func (l *Locator) Locate(p netip.Prefix) Result {
	if !p.IsValid() {
		return Result{Loc: l.def, Source: SourceDefault}
	}
	p = unmapPrefix(p)
	a := p.Masked().Addr()
	if l.cache == nil {
		res, _ := l.locate(a)
		return res
	}
	bits := cacheBitsV6
	if a.Is4() {
		bits = cacheBitsV4
	}
	block, _ := a.Prefix(bits)
	key := block.Addr().As16()
	slot := &l.cache[maphash.Bytes(l.seed, key[:])&uint64(len(l.cache)-1)]
	if c := slot.Load(); c != nil && c.net == block && (c.wide || c.addr == a) {
		return c.res
	}
	res, depends := l.locate(a)
	// When the answer depended on at most the block's bits it is the
	// answer for every address in the block; else only for a (an ECS /24
	// inside a block the database splits into /25s is asked again and
	// again by the same resolver).
	slot.Store(&cached{net: block, addr: a, wide: depends <= bits, res: res})
	return res
}

// locate is Locate without the cache, for the masked address a; it also
// returns how many bits of a the answer really depended on, before the
// scope is capped at MaxPrefixV4 or MaxPrefixV6.
func (l *Locator) locate(a netip.Addr) (Result, int) {
	limit, t := MaxPrefixV6, l.v6
	if a.Is4() {
		limit, t = MaxPrefixV4, l.v4
	}
	c := t.lookup(a)
	if c.ok {
		return Result{Loc: c.loc, Scope: min(c.net.Bits(), limit), Source: SourceStatic}, c.net.Bits()
	}
	bits := c.net.Bits()
	if l.db != nil {
		loc, dbBits, err := l.lookupDB(a)
		switch {
		case err != nil:
			return Result{Loc: l.def, Scope: limit, Source: SourceDefault}, a.BitLen()
		case loc.Known():
			return Result{Loc: loc, Scope: min(max(bits, dbBits), limit), Source: SourceMMDB}, max(bits, dbBits)
		default:
			bits = max(bits, dbBits)
		}
	}
	return Result{Loc: l.def, Scope: min(bits, limit), Source: SourceDefault}, bits
}

// lookupDB looks a up in the database: the location of its record (not
// Known when there is none, or none that says anything we use) and the
// length of the network around a that the record, or the absence of one,
// covers.
func (l *Locator) lookupDB(a netip.Addr) (scheduler.Location, int, error) {
	var loc scheduler.Location
	var network netip.Prefix
	switch l.kind {
	case kindCity:
		c, err := l.db.City(a)
		if err != nil {
			return loc, 0, err
		}
		loc.Country, loc.Continent = c.Country.ISOCode, c.Continent.Code
		if c.Location.Latitude != nil && c.Location.Longitude != nil {
			loc.Lat, loc.Lon, loc.HasCoords = *c.Location.Latitude, *c.Location.Longitude, true
		}
		network = c.Traits.Network
	case kindCountry:
		c, err := l.db.Country(a)
		if err != nil {
			return loc, 0, err
		}
		loc.Country, loc.Continent = c.Country.ISOCode, c.Continent.Code
		network = c.Traits.Network
	}
	if !network.IsValid() || network.Addr().Is4() != a.Is4() {
		// An IPv4 lookup that ended above the database's IPv4 subtree:
		// the record, or the lack of one, covers ::/n with n <= 96, so
		// every IPv4 address gets the same.
		return loc, 0, nil
	}
	return loc, network.Bits(), nil
}

// Close releases the Locator. The database lives in memory, so Close
// unmaps nothing: it is safe to call while other goroutines still call
// Locate on a Locator that a reload swapped out, and safe to call twice.
// The memory is freed once the last reference is gone.
func (l *Locator) Close() error { return nil }

// unmapPrefix turns an IPv4-mapped IPv6 prefix of at least /96 into the
// IPv4 prefix it stands for; anything else is returned as is.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}
