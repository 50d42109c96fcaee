package zones

import (
	"cmp"
	"crypto/hmac"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Defaults that Build applies to settings left empty (zero).
const (
	// DefaultListen is the DNS listen address when none is configured.
	DefaultListen = ":53"
	// DefaultMaxUDPSize is the cap on UDP answers (the DNS flag day 2020 size).
	DefaultMaxUDPSize = 1232
	// DefaultTCPIdleTimeout closes idle TCP connections.
	DefaultTCPIdleTimeout = 10 * time.Second
	// DefaultTCPReadTimeout bounds the wait for the first query on a new
	// TCP connection.
	DefaultTCPReadTimeout = 2 * time.Second
	// MaxUDPSockets bounds udp_sockets.
	MaxUDPSockets = 256
	// DefaultMaxTCPConnections caps concurrent TCP connections.
	DefaultMaxTCPConnections = 1000
	// DefaultMaxTCPConnectionsPerClient caps one client's TCP connections
	// (an IPv4 address, an IPv6 /64).
	DefaultMaxTCPConnectionsPerClient = 16
	// DefaultMaxTCPQueries bounds the queries on one TCP connection.
	DefaultMaxTCPQueries = 1000
	// DefaultVersion answers version.bind when the config has no version key.
	DefaultVersion = "transmirror"
	// DefaultAnswers is how many addresses per family a group answer carries.
	DefaultAnswers = 2
	// DefaultTTLMin is the shortest TTL of a group answer.
	DefaultTTLMin = 20
	// DefaultTTLMax is the longest TTL of a group answer.
	DefaultTTLMax = 300
	// DefaultPolicy is the global answer policy of a group.
	DefaultPolicy = "geo-load"
	// DefaultLowWatermark is the utilization where a member's share starts to shrink.
	DefaultLowWatermark = 0.7
	// DefaultHighWatermark is the utilization above which a member is skipped.
	DefaultHighWatermark = 0.9
	// DefaultWeight is a member's static weight.
	DefaultWeight = 1
	// DefaultMaxRuntimeMembers caps the run-time members of a group
	// (fewer when the config file's members leave less room under
	// MaxGroupMembers).
	DefaultMaxRuntimeMembers = 64
	// MaxRuntimeMembersLimit bounds max_runtime_members.
	MaxRuntimeMembersLimit = MaxGroupMembers
)

// Caps on a group's members, static and run-time alike. They bound what
// every reader of a group pays for it: the group view (GET
// /v1/groups/{group}) that each mirror refreshes, whose worst case (every
// cap reached, every field at its longest) must stay well inside the
// mirrors' view limit, api.MaxViewBytes; dnsd/members checks that at
// compile time and its tests encode that worst view. Raise one and that
// check says whether another must come down.
const (
	// MaxGroupMembers caps the members of a group: the config file's
	// plus max_runtime_members. A mirror group is a few dozen to a few
	// hundred mirrors (Debian's and CPAN's lists hold about 300);
	// 512 leaves room for that.
	MaxGroupMembers = 512
	// MaxMemberAddresses caps a member's addresses. A mirror has a
	// handful (an IPv4 and an IPv6 address, a few more when multi-homed);
	// 16 is plenty, and a member with thousands would blow up the group
	// view and every answer that names it.
	MaxMemberAddresses = 16
	// MaxMemberNameLen caps a member's name (a DNS label's length).
	MaxMemberNameLen = 63
	// MaxProbeLen caps a member's probe URL, in bytes.
	MaxProbeLen = 512
)

// What a group answers when every member is drained (when_all_drained).
const (
	// WhenAllDrainedAnswer fails open: the answer names drained members,
	// as it names down ones when every member is down (the default).
	WhenAllDrainedAnswer = "answer"
	// WhenAllDrainedNoData answers NODATA: no address, the zone's SOA in
	// the authority section.
	WhenAllDrainedNoData = "nodata"
)

// policies are the names a group's policy may have.
var policies = []string{"weighted", "least-load", "nearest", "hash", "geo-load"}

var tsigAlgorithms = map[string]string{
	"hmac-sha1":   dns.HmacSHA1,
	"hmac-sha256": dns.HmacSHA256,
	"hmac-sha512": dns.HmacSHA512,
}

// Build is the one place that applies defaults to cfg and validates it;
// it then reads every zone file and returns the Set to serve. cfg itself
// is not modified: the Set holds a defaulted copy. All problems are
// returned joined, each naming file:line:col of the object in the config
// file (when cfg came from one) and the object itself. Build accepts its
// own output (Set.Config) again.
func Build(cfg *Config) (*Set, error) {
	if cfg == nil {
		return nil, errors.New("zones: nil config")
	}
	b := &builder{c: cloneConfig(cfg), zones: make(map[string]*Zone), errs: yamlconf.NewErrors(cfg.File, cfg.pos, "zones"), now: time.Now()}
	if cfg.File != "" {
		b.dir = filepath.Dir(cfg.File)
	}
	b.server()
	b.listen()
	b.tsig()
	b.zoneFiles()
	b.groups()
	b.mmdb = b.c.Geo.Check(b.errs, "geo", b.dir)
	b.health()
	b.adminToken()
	b.cluster()
	if b.c.StateFile != "" {
		b.stateFile = b.resolve(b.c.StateFile)
	}
	if err := b.errs.Err(); err != nil {
		return nil, err
	}
	s := &Set{Config: b.c, Groups: make(map[string]*GroupConfig, len(b.c.Groups)), MMDB: b.mmdb, StateFile: b.stateFile,
		Warnings: b.errs.Warnings()}
	for _, zc := range b.c.Zones {
		s.Zones = append(s.Zones, b.zones[zc.Origin])
	}
	slices.SortFunc(s.Zones, func(a, b *Zone) int {
		if c := cmp.Compare(dns.CountLabel(b.Origin), dns.CountLabel(a.Origin)); c != 0 {
			return c
		}
		return cmp.Compare(a.Origin, b.Origin)
	})
	for i := range b.c.Groups {
		g := &b.c.Groups[i]
		s.Groups[g.Name] = g
	}
	return s, nil
}

// FromFlags builds the Config of "dnsd -listen ADDR -zone ORIGIN=FILE"
// (both repeatable): the zones are served as given, with AXFR allowed from
// loopback. Pass the result to Build, which applies the defaults.
func FromFlags(listen []string, zoneSpecs []string) (*Config, error) {
	cfg := &Config{Listen: slices.Clone(listen)}
	var errs []error
	for _, spec := range zoneSpecs {
		origin, file, ok := strings.Cut(spec, "=")
		origin, file = strings.TrimSpace(origin), strings.TrimSpace(file)
		if !ok || origin == "" || file == "" {
			errs = append(errs, fmt.Errorf("zones: -zone %q: want ORIGIN=FILE", spec))
			continue
		}
		cfg.Zones = append(cfg.Zones, ZoneConfig{
			Origin: origin,
			File:   file,
			AllowTransfer: []netip.Prefix{
				netip.MustParsePrefix("127.0.0.0/8"),
				netip.MustParsePrefix("::1/128"),
			},
		})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// builder defaults and validates one Config copy and collects its errors.
type builder struct {
	c         *Config
	dir       string           // directory of the config file, for relative paths
	zones     map[string]*Zone // parsed zones by canonical origin
	mmdb      string           // geo.mmdb resolved against dir
	stateFile string           // state_file resolved against dir
	errs      *yamlconf.Errors // every problem, each naming file:line:col and its object
	now       time.Time        // when the config is loaded: the keys' timing
}

// errorf records an error about the object at path (a YAML path such as
// "groups[0].members[1].capacity"), prefixed with where it was written;
// the message names the object.
func (b *builder) errorf(path, format string, args ...any) {
	b.errs.Errorf(path, format, args...)
}

// written reports whether the config file has the key at path.
func (b *builder) written(path string) bool { return b.c.pos.Has(path) }

// where returns "LINE:COL" of path in the config file, or "".
func (b *builder) where(path string) string {
	if p, ok := b.c.pos.Of(path); ok && b.c.File != "" {
		return p.String()
	}
	return ""
}

// resolve returns name relative to the config file's directory.
func (b *builder) resolve(name string) string { return yamlconf.Resolve(b.dir, name) }

func cloneConfig(cfg *Config) *Config {
	c := *cfg
	c.Listen = slices.Clone(cfg.Listen)
	c.Server.TSIG = slices.Clone(cfg.Server.TSIG)
	c.Zones = slices.Clone(cfg.Zones)
	c.AdminHosts = slices.Clone(cfg.AdminHosts)
	for i := range c.Zones {
		c.Zones[i].AllowTransfer = slices.Clone(c.Zones[i].AllowTransfer)
	}
	c.Geo = cfg.Geo.Clone()
	c.Cluster.Etcd.Endpoints = slices.Clone(cfg.Cluster.Etcd.Endpoints)
	c.Groups = slices.Clone(cfg.Groups)
	for i := range c.Groups {
		g := &c.Groups[i]
		g.Members = slices.Clone(g.Members)
		for j := range g.Members {
			m := &g.Members[j]
			m.Addresses = slices.Clone(m.Addresses)
			m.Location = m.Location.Clone()
		}
	}
	return &c
}

// server defaults and checks the server block. A key left out takes its
// default; a written 0 is an error: none of these has an "off".
func (b *builder) server() {
	s, pos := &b.c.Server, b.c.pos
	yamlconf.Default(pos, "server.max_udp_size", &s.MaxUDPSize, DefaultMaxUDPSize)
	if s.MaxUDPSize < 512 || s.MaxUDPSize > 4096 {
		b.errorf("server.max_udp_size", "server: max_udp_size %d must be in 512..4096", s.MaxUDPSize)
	}
	yamlconf.Default(pos, "server.tcp_idle_timeout", &s.TCPIdleTimeout, Duration(DefaultTCPIdleTimeout))
	if s.TCPIdleTimeout <= 0 {
		b.errorf("server.tcp_idle_timeout", "server: tcp_idle_timeout %s must be > 0", s.TCPIdleTimeout.D())
	}
	yamlconf.Default(pos, "server.tcp_read_timeout", &s.TCPReadTimeout, Duration(DefaultTCPReadTimeout))
	if s.TCPReadTimeout <= 0 {
		b.errorf("server.tcp_read_timeout", "server: tcp_read_timeout %s must be > 0", s.TCPReadTimeout.D())
	}
	// UDPSockets stays 0 when left out: one per CPU, counted at start.
	if s.UDPSockets < 0 || s.UDPSockets > MaxUDPSockets || s.UDPSockets == 0 && b.written("server.udp_sockets") {
		b.errorf("server.udp_sockets", "server: udp_sockets %d must be in 1..%d (leave it out for one per CPU)", s.UDPSockets, MaxUDPSockets)
	}
	for _, n := range []struct {
		key string
		v   *int
		def int
	}{
		{"max_tcp_connections", &s.MaxTCPConnections, DefaultMaxTCPConnections},
		{"max_tcp_connections_per_client", &s.MaxTCPConnectionsPerClient, DefaultMaxTCPConnectionsPerClient},
		{"max_tcp_queries", &s.MaxTCPQueries, DefaultMaxTCPQueries},
	} {
		yamlconf.Default(pos, "server."+n.key, n.v, n.def)
		if *n.v <= 0 {
			b.errorf("server."+n.key, "server: %s %d must be > 0", n.key, *n.v)
		}
	}
	if s.Version == "" && !b.written("server.version") {
		s.Version = DefaultVersion
	}
	if len(s.NSID) > 512 {
		b.errorf("server.nsid", "server: nsid is longer than 512 bytes")
	}
	b.rrl(&s.RRL)
}

// Defaults of server.rrl.
const (
	DefaultRRLRate       = 20
	DefaultRRLWindow     = 5 * time.Second
	DefaultRRLSlip       = 2
	DefaultRRLIPv4Prefix = 24
	DefaultRRLIPv6Prefix = 56
	DefaultRRLTableSize  = 1 << 16
)

// rrl defaults and checks server.rrl, with the ranges dnsd/rrl accepts.
// A written 0 is an error except for slip, where it means none.
func (b *builder) rrl(r *RRLConfig) {
	pos := b.c.pos
	yamlconf.Default(pos, "server.rrl.rate", &r.Rate, DefaultRRLRate)
	yamlconf.Default(pos, "server.rrl.window", &r.Window, Duration(DefaultRRLWindow))
	yamlconf.Default(pos, "server.rrl.ipv4_prefix", &r.IPv4Prefix, DefaultRRLIPv4Prefix)
	yamlconf.Default(pos, "server.rrl.ipv6_prefix", &r.IPv6Prefix, DefaultRRLIPv6Prefix)
	yamlconf.Default(pos, "server.rrl.table_size", &r.TableSize, DefaultRRLTableSize)
	b.rrlSlip(r)
	if !(r.Rate > 0) || r.Rate > 1e6 {
		b.errorf("server.rrl.rate", "server: rrl: rate %g must be in (0, 1000000] responses/s", r.Rate)
	}
	if r.Window <= 0 || r.Window.D() > time.Minute || r.Rate*r.Window.D().Seconds() < 1 {
		b.errorf("server.rrl.window", "server: rrl: window %s must be in (0, 1m] with rate × window >= 1", r.Window.D())
	}
	if r.IPv4Prefix < 8 || r.IPv4Prefix > 32 {
		b.errorf("server.rrl.ipv4_prefix", "server: rrl: ipv4_prefix %d must be in 8..32", r.IPv4Prefix)
	}
	if r.IPv6Prefix < 16 || r.IPv6Prefix > 128 {
		b.errorf("server.rrl.ipv6_prefix", "server: rrl: ipv6_prefix %d must be in 16..128", r.IPv6Prefix)
	}
	if r.TableSize < 64 || r.TableSize > 1<<24 {
		b.errorf("server.rrl.table_size", "server: rrl: table_size %d must be in 64..16777216", r.TableSize)
	}
	for i, p := range r.Exempt {
		r.Exempt[i] = p.Masked()
	}
}

// rrlSlip defaults and checks server.rrl.slip. It is the one key whose
// written 0 changed meaning: 0 was the default (2) and -1 none; now 0 is
// none, as everywhere else, and -1 still loads as none. RRLConfig.Slip
// keeps dnsd/rrl's form, -1 for none: a written 0 is turned into it, and
// both old forms get a warning.
func (b *builder) rrlSlip(r *RRLConfig) {
	const key = "server.rrl.slip"
	switch {
	case !b.written(key):
		yamlconf.Default(b.c.pos, key, &r.Slip, DefaultRRLSlip)
	case r.Slip == 0:
		r.Slip = -1
		b.errs.Warnf(key, "server: rrl: slip 0 meant the default (every 2nd limited response truncated) before this release and means none now: write 2 for the old behaviour, or leave it out")
	case r.Slip == -1:
		b.errs.Warnf(key, "server: rrl: slip -1 is the old way to write none: write 0")
	}
	if r.Slip < -1 || r.Slip > 10 {
		b.errorf(key, "server: rrl: slip %d must be in 0..10 (0: none)", r.Slip)
	}
}

func (b *builder) listen() {
	if len(b.c.Listen) == 0 {
		b.c.Listen = []string{DefaultListen}
	}
	seen := make(map[string]bool)
	for i, addr := range b.c.Listen {
		path := fmt.Sprintf("listen[%d]", i)
		if err := yamlconf.CheckHostPort(addr); err != nil {
			b.errorf(path, "listen %q: %v", addr, err)
			continue
		}
		if seen[addr] {
			b.errorf(path, "listen %q: listed twice", addr)
		}
		seen[addr] = true
	}
	if b.c.Admin != "" {
		if err := yamlconf.CheckHostPort(b.c.Admin); err != nil {
			b.errorf("admin", "admin %q: %v", b.c.Admin, err)
		}
	} else if b.c.AdminTLS.Enabled() {
		b.errorf("admin_tls", "admin_tls: needs admin (the admin listen address)")
	}
	b.c.AdminTLS.Check(b.errs, "admin_tls", b.dir)
	b.c.AdminLimits.Check(b.errs, b.c.pos, "limits")
	yamlconf.CheckAdminHosts(b.errs, "admin_hosts", b.c.AdminHosts)
}

// AdminTLSFiles returns admin_tls with its files resolved against the
// config file's directory (both "" without TLS).
func (c *Config) AdminTLSFiles() TLSFiles {
	dir := ""
	if c.File != "" {
		dir = filepath.Dir(c.File)
	}
	return c.AdminTLS.Resolve(dir)
}

func (b *builder) tsig() {
	seen := make(map[string]bool)
	for i := range b.c.Server.TSIG {
		k := &b.c.Server.TSIG[i]
		path := fmt.Sprintf("server.tsig[%d]", i)
		if _, ok := dns.IsDomainName(k.Name); !ok || k.Name == "" {
			b.errorf(path+".name", "tsig key %q: name must be a domain name", k.Name)
			continue
		}
		k.Name = dns.CanonicalName(k.Name)
		obj := fmt.Sprintf("tsig key %q", k.Name)
		if seen[k.Name] {
			b.errorf(path+".name", "%s: defined twice", obj)
		}
		seen[k.Name] = true
		alg := strings.TrimSuffix(strings.ToLower(k.Algorithm), ".")
		if alg == "" {
			alg = "hmac-sha256"
		}
		if a, ok := tsigAlgorithms[alg]; ok {
			k.Algorithm = a
		} else {
			b.errorf(path+".algorithm", "%s: algorithm %q: want hmac-sha256, hmac-sha512 or hmac-sha1", obj, k.Algorithm)
		}
		if k.Secret == "" {
			b.errorf(path+".secret", "%s: secret is required", obj)
		} else if _, err := base64.StdEncoding.DecodeString(k.Secret); err != nil {
			b.errorf(path+".secret", "%s: secret is not valid base64", obj)
		}
	}
}

func (b *builder) zoneFiles() {
	if len(b.c.Zones) == 0 && !b.c.AllowNoZones {
		b.errorf("zones", "no zones: dnsd would answer every query REFUSED; list zones, or set allow_no_zones: true if that is meant")
	}
	first := make(map[string]int)
	for i := range b.c.Zones {
		zc := &b.c.Zones[i]
		path := fmt.Sprintf("zones[%d]", i)
		if _, ok := dns.IsDomainName(zc.Origin); !ok || zc.Origin == "" {
			b.errorf(path+".origin", "zone %q: origin must be a domain name", zc.Origin)
			continue
		}
		zc.Origin = dns.CanonicalName(zc.Origin)
		obj := fmt.Sprintf("zone %q", zc.Origin)
		if j, dup := first[zc.Origin]; dup {
			b.errorf(path+".origin", "%s: served twice (see zones[%d])", obj, j)
			continue
		}
		first[zc.Origin] = i
		b.zones[zc.Origin] = nil // configured; set below once it loads
		for j, p := range zc.AllowTransfer {
			if !p.IsValid() {
				b.errorf(fmt.Sprintf("%s.allow_transfer[%d]", path, j), "%s: allow_transfer: invalid prefix", obj)
				continue
			}
			zc.AllowTransfer[j] = p.Masked()
		}
		if zc.File == "" {
			b.errorf(path+".file", "%s: file is required", obj)
			continue
		}
		file := b.resolve(zc.File)
		f, err := os.Open(file)
		if err != nil {
			b.errorf(path+".file", "%s: %v", obj, err)
			continue
		}
		z, err := ParseZone(zc.Origin, file, f, zc.AllowInclude)
		f.Close()
		if err != nil {
			b.errs.Add(err) // each line names the zone file and line
			continue
		}
		b.zones[zc.Origin] = b.keys(path+".dnssec.keys", obj, z, zc.DNSSEC.Keys)
	}
}

// keys reads the zone's signing keys and publishes the DNSKEY records of
// those published now.
func (b *builder) keys(path, obj string, z *Zone, files []string) *Zone {
	if len(files) == 0 {
		return z
	}
	var dnskeys []dns.RR
	tags := make(map[uint16]string)
	for i, f := range files {
		kpath := fmt.Sprintf("%s[%d]", path, i)
		k, warning, err := ReadKey(z.Origin, b.resolve(f))
		if warning != "" {
			b.errs.Warnf(kpath, "%s: key %q: %s", obj, f, warning)
		}
		if err != nil {
			b.errorf(kpath, "%s: key %q: %v", obj, f, err)
			continue
		}
		tag := k.DNSKEY.KeyTag()
		if other, dup := tags[tag]; dup {
			b.errorf(kpath, "%s: key %q: key tag %d is %s's too", obj, f, tag, other)
			continue
		}
		tags[tag] = f
		z.Keys = append(z.Keys, k)
		if k.Published(b.now) {
			dnskeys = append(dnskeys, k.DNSKEY)
		}
	}
	if len(dnskeys) == 0 {
		return z
	}
	return z.withRecords(append(dnskeys, childDS(z.Keys, b.now)...))
}

// childDS are the CDS (SHA-256) and CDNSKEY records (RFC 7344) of the
// keys published at now that sign the DNSKEY RRset (the KSKs, else all):
// the DS set the parent should hold, for parents that read it.
func childDS(keys []*SigningKey, now time.Time) []dns.RR {
	ksk := slices.ContainsFunc(keys, (*SigningKey).KSK)
	var rrs []dns.RR
	for _, k := range keys {
		if k.KSK() != ksk || !k.Published(now) {
			continue
		}
		ds := k.DNSKEY.ToDS(dns.SHA256)
		if ds == nil {
			continue
		}
		rrs = append(rrs, ds.ToCDS(), k.DNSKEY.ToCDNSKEY())
	}
	return rrs
}

// zoneFor returns the origin of the configured zone that contains name
// (longest origin), and the parsed zone (nil when it failed to load).
func (b *builder) zoneFor(name string) (string, *Zone) {
	best := ""
	for origin := range b.zones {
		if dns.IsSubDomain(origin, name) && (best == "" || dns.CountLabel(origin) > dns.CountLabel(best)) {
			best = origin
		}
	}
	if best == "" {
		return "", nil
	}
	return best, b.zones[best]
}

func (b *builder) groups() {
	first := make(map[string]string)
	for i := range b.c.Groups {
		g := &b.c.Groups[i]
		path := fmt.Sprintf("groups[%d]", i)
		if _, ok := dns.IsDomainName(g.Name); !ok || g.Name == "" {
			b.errorf(path+".name", "group %q: name must be a domain name", g.Name)
			continue
		}
		g.Name = dns.CanonicalName(g.Name)
		obj := fmt.Sprintf("group %q", g.Name)
		if at, dup := first[g.Name]; dup {
			if at != "" {
				b.errorf(path+".name", "%s: defined twice (first at %s)", obj, at)
			} else {
				b.errorf(path+".name", "%s: defined twice", obj)
			}
		} else {
			first[g.Name] = b.where(path + ".name")
		}
		b.groupZone(path, obj, g.Name)
		b.group(path, obj, g)
		names := make(map[string]bool)
		for j := range g.Members {
			m := &g.Members[j]
			mpath := fmt.Sprintf("%s.members[%d]", path, j)
			b.member(mpath, obj, m)
			b.loop(mpath, obj, g, m)
			if m.Name != "" && names[m.Name] {
				b.errorf(mpath+".name", "%s: member %q: defined twice", obj, m.Name)
			}
			names[m.Name] = true
		}
	}
}

// groupZone checks that a group name lies in a served zone, above any
// delegation, and owns no static address or alias records there.
func (b *builder) groupZone(path, obj, name string) {
	origin, z := b.zoneFor(name)
	if origin == "" {
		b.errorf(path+".name", "%s: not inside any served zone", obj)
		return
	}
	if z == nil {
		return // the zone file's own errors say why
	}
	if cut := z.Cut(name); cut != "" {
		b.errorf(path+".name", "%s: at or below the delegation %q of zone %q", obj, cut, origin)
		return
	}
	for _, t := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeCNAME} {
		for _, rr := range z.RRset(name, t) {
			b.errorf(path+".name", "%s: %s:%d has a static %s record for the group's name",
				obj, z.File, z.line(rr), dns.TypeToString[t])
		}
	}
}

func (b *builder) group(path, obj string, g *GroupConfig) {
	pos := b.c.pos
	yamlconf.Default(pos, path+".answers", &g.Answers, DefaultAnswers)
	if g.Answers < 1 {
		b.errorf(path+".answers", "%s: answers %d must be >= 1", obj, g.Answers)
	}
	yamlconf.Default(pos, path+".ttl.min", &g.TTL.Min, DefaultTTLMin)
	yamlconf.Default(pos, path+".ttl.max", &g.TTL.Max, DefaultTTLMax)
	if g.TTL.Max < 1 || g.TTL.Max > 86400 {
		b.errorf(path+".ttl.max", "%s: ttl max %d must be in 1..86400", obj, g.TTL.Max)
	}
	if g.TTL.Min < 1 {
		b.errorf(path+".ttl.min", "%s: ttl min %d must be >= 1", obj, g.TTL.Min)
	}
	if g.TTL.Min > g.TTL.Max {
		b.errorf(path+".ttl", "%s: ttl min %d must be <= max %d", obj, g.TTL.Min, g.TTL.Max)
	}
	yamlconf.Default(pos, path+".ttl.unseen", &g.TTL.Unseen, g.TTL.Min)
	if g.TTL.Min <= g.TTL.Max && (g.TTL.Unseen < g.TTL.Min || g.TTL.Unseen > g.TTL.Max) {
		b.errorf(path+".ttl.unseen", "%s: ttl unseen %d must be within [min %d, max %d]", obj, g.TTL.Unseen, g.TTL.Min, g.TTL.Max)
	}
	p := &g.Policy
	if p.Name == "" {
		p.Name = DefaultPolicy
	}
	if !slices.Contains(policies, p.Name) {
		b.errorf(path+".policy.name", "%s: policy %q: want one of %s", obj, p.Name, strings.Join(policies, ", "))
	}
	yamlconf.Default(pos, path+".policy.low_watermark", &p.LowWatermark, DefaultLowWatermark)
	yamlconf.Default(pos, path+".policy.high_watermark", &p.HighWatermark, DefaultHighWatermark)
	if !(p.LowWatermark > 0 && p.LowWatermark <= p.HighWatermark && p.HighWatermark <= 1.5) {
		b.errorf(path+".policy", "%s: watermarks: want 0 < low_watermark (%g) <= high_watermark (%g) <= 1.5",
			obj, p.LowWatermark, p.HighWatermark)
	}
	switch g.WhenAllDrained {
	case "":
		g.WhenAllDrained = WhenAllDrainedAnswer
	case WhenAllDrainedAnswer, WhenAllDrainedNoData:
	default:
		b.errorf(path+".when_all_drained", "%s: when_all_drained %q: want %s or %s", obj, g.WhenAllDrained, WhenAllDrainedAnswer, WhenAllDrainedNoData)
	}
	static := 0
	for _, m := range g.Members {
		if !m.Runtime {
			static++
		}
	}
	if static > MaxGroupMembers {
		b.errorf(path+".members", "%s: %d members, at most %d", obj, static, MaxGroupMembers)
	}
	if g.MaxRuntimeMembers == 0 && !b.written(path+".max_runtime_members") {
		g.MaxRuntimeMembers = max(0, min(DefaultMaxRuntimeMembers, MaxGroupMembers-static))
	}
	switch {
	case g.MaxRuntimeMembers < 0 || g.MaxRuntimeMembers > MaxRuntimeMembersLimit:
		b.errorf(path+".max_runtime_members", "%s: max_runtime_members %d must be in 0..%d (0: no GROUP-ADD)", obj, g.MaxRuntimeMembers, MaxRuntimeMembersLimit)
	case static <= MaxGroupMembers && static+g.MaxRuntimeMembers > MaxGroupMembers:
		b.errorf(path+".max_runtime_members", "%s: max_runtime_members %d and %d members in the file are more than %d, the most a group may have", obj, g.MaxRuntimeMembers, static, MaxGroupMembers)
	}
	b.maxLag(path, obj, g)
	b.master(path, obj, g)
	b.secret(path+".secret", obj+": secret", g.SecretSource, &g.Secret)
	b.secret(path+".previous_secret", obj+": previous_secret", g.PreviousSecretSource, &g.PreviousSecret)
	b.previousSecret(path, obj, g)
}

// The bounds of a group's max_lag.
const (
	// MinMaxLag is the shortest max_lag: a sync of a mirror's tree takes
	// minutes, and its generation moves only when one is complete.
	MinMaxLag = time.Minute
	// MaxMaxLag is the longest max_lag, a year.
	MaxMaxLag = 365 * 24 * time.Hour
)

// maxLag checks the group's max_lag: absent is off, written it is in
// MinMaxLag..MaxMaxLag.
func (b *builder) maxLag(path, obj string, g *GroupConfig) {
	if !b.written(path+".max_lag") && g.MaxLag == 0 {
		return
	}
	if d := g.MaxLag.D(); d < MinMaxLag || d > MaxMaxLag {
		b.errorf(path+".max_lag", "%s: max_lag %s must be in %s..%s (leave it out for off)", obj, d, MinMaxLag, MaxMaxLag)
	}
}

// hasUserInfo reports whether the URL v carries user information.
func hasUserInfo(v string) bool {
	u, err := url.Parse(v)
	return err == nil && u.User != nil
}

// master checks the group's master: absent, or an http or https URL of
// a trace file, which only means something with max_lag.
func (b *builder) master(path, obj string, g *GroupConfig) {
	switch {
	case g.Master == "" && b.written(path+".master"):
		b.errorf(path+".master", "%s: master must not be empty (leave it out for the freshest member)", obj)
	case g.Master == "":
	case g.MaxLag == 0:
		b.errorf(path+".master", "%s: master needs max_lag", obj)
	case hasUserInfo(g.Master):
		b.errorf(path+".master", "%s: master: the URL must not carry user information (it is logged)", obj)
	default:
		b.httpURL(path, obj, "master", g.Master)
	}
}

// secret sets *secret from src when the file has the key at path (a
// config built in Go sets *secret itself): the secret written, or the
// contents of its file, whose mode may give a warning. what names the
// key in errors ("group \"www.\": secret").
func (b *builder) secret(path, what string, src yamlconf.Secret, secret *string) {
	if src.IsZero() {
		return
	}
	data, warning, err := src.Read(b.dir)
	if warning != "" {
		b.errs.Warnf(path, "%s: %s", what, warning)
	}
	if err != nil {
		b.errorf(path, "%s: %v", what, err)
		return
	}
	*secret = data
}

// previousSecret checks a secret rotation: a previous secret needs the
// secret that replaces it, differs from it and has a stated end,
// previous_secret_until (RFC 3339), which is meaningless without one.
// An end in the past is not an error (a restart after the rotation must
// not fail): the previous secret is then simply no longer accepted.
func (b *builder) previousSecret(path, obj string, g *GroupConfig) {
	const key = "previous_secret"
	g.PreviousSecretExpiry = time.Time{}
	if g.PreviousSecretUntil != "" {
		t, err := time.Parse(time.RFC3339, g.PreviousSecretUntil)
		if err != nil {
			b.errorf(path+".previous_secret_until", "%s: previous_secret_until %q: want an RFC 3339 time such as 2025-03-01T12:00:00Z", obj, g.PreviousSecretUntil)
		}
		g.PreviousSecretExpiry = t
	}
	switch {
	case g.PreviousSecret == "" && g.PreviousSecretUntil != "" && g.PreviousSecretSource.IsZero():
		b.errorf(path+".previous_secret_until", "%s: previous_secret_until without a previous_secret", obj)
	case g.PreviousSecret == "":
	case g.Secret == "":
		b.errorf(path+"."+key, "%s: %s without a secret: give the new secret in secret", obj, key)
	case hmac.Equal([]byte(g.PreviousSecret), []byte(g.Secret)):
		b.errorf(path+"."+key, "%s: %s is the same as the secret", obj, key)
	case g.PreviousSecretUntil == "":
		b.errorf(path+"."+key, "%s: %s needs previous_secret_until, when it stops being accepted (RFC 3339)", obj, key)
	}
}

func (b *builder) member(path, gobj string, m *MemberConfig) {
	obj := fmt.Sprintf("%s: member %q", gobj, m.Name)
	if !yamlconf.IsMemberName(m.Name) {
		b.errorf(path+".name", "%s: name must match [a-z0-9-]+", obj)
	} else if len(m.Name) > MaxMemberNameLen {
		b.errorf(path+".name", "%s: name is %d bytes long, at most %d", obj, len(m.Name), MaxMemberNameLen)
	}
	if m.Host == "" {
		b.errorf(path+".host", "%s: host is required", obj)
	} else if _, ok := dns.IsDomainName(m.Host); !ok || strings.ContainsAny(m.Host, " \\") {
		b.errorf(path+".host", "%s: host %q is not a domain name", obj, m.Host)
	}
	addrs := m.Addresses
	switch {
	case len(m.Addresses) == 0:
		b.errorf(path+".addresses", "%s: at least one address is required", obj)
	case len(m.Addresses) > MaxMemberAddresses:
		b.errorf(path+".addresses", "%s: addresses: %d, at most %d per member", obj, len(m.Addresses), MaxMemberAddresses)
		addrs = nil // one error for them, not one per address
	}
	for i, a := range addrs {
		apath := fmt.Sprintf("%s.addresses[%d]", path, i)
		aobj := obj
		if m.Runtime { // no position in a file says which address
			aobj = fmt.Sprintf("%s: addresses[%d]", obj, i)
		}
		a = a.Unmap()
		switch {
		case !a.IsValid():
			b.errorf(apath, "%s: invalid address", aobj)
			continue
		case a.Zone() != "":
			b.errorf(apath, "%s: address %s has a zone", aobj, a)
			continue
		case a.IsUnspecified() || a.IsMulticast() || a == broadcast:
			b.errorf(apath, "%s: address %s is not a unicast address", aobj, a)
			continue
		}
		m.Addresses[i] = a
		if slices.Contains(m.Addresses[:i], m.Addresses[i]) {
			b.errorf(apath, "%s: address %s listed twice", aobj, m.Addresses[i])
		}
	}
	m.Location.Check(b.errs, path+".location", obj)
	if !(m.Capacity > 0) || math.IsInf(m.Capacity, 1) {
		b.errorf(path+".capacity", "%s: capacity must be > 0", obj)
	}
	if err := m.Bandwidth.Check(); err != nil {
		b.errorf(path+".bandwidth", "%s: bandwidth %v", obj, err)
	}
	yamlconf.Default(b.c.pos, path+".weight", &m.Weight, DefaultWeight)
	if !(m.Weight > 0) || math.IsInf(m.Weight, 1) {
		b.errorf(path+".weight", "%s: weight %g must be > 0", obj, m.Weight)
	}
	if m.Probe != "" {
		b.httpURL(path, obj, "probe", m.Probe)
	}
}

// httpURL checks the value v of key, an http or https URL: at most
// MaxProbeLen bytes, of the characters of RFC 3986, with a host.
func (b *builder) httpURL(path, obj, key, v string) {
	u, err := url.Parse(v)
	switch {
	case len(v) > MaxProbeLen:
		b.errorf(path+"."+key, "%s: %s is %d bytes long, at most %d", obj, key, len(v), MaxProbeLen)
	case strings.IndexFunc(v, notURLChar) >= 0:
		b.errorf(path+"."+key, "%s: %s %q: want the characters of RFC 3986 (escape the others with %%XX)", obj, key, v)
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		b.errorf(path+"."+key, "%s: %s %q: want an http or https URL", obj, key, v)
	}
}

// notURLChar reports whether r is not one of the characters of a URI
// (RFC 3986: unreserved, reserved and "%"): none needs escaping in JSON.
func notURLChar(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return false
	}
	return !strings.ContainsRune("-._~:/?#[]@!$&'()*+,;=%", r)
}

// Defaults of the health section.
const (
	DefaultHealthInterval  = 5 * time.Second
	DefaultHealthTimeout   = 2 * time.Second
	DefaultRise            = 2
	DefaultFall            = 3
	DefaultSignatureWindow = 30 * time.Second
	DefaultReportMaxSkew   = 30 * time.Second
	DefaultReportMaxAge    = 60 * time.Second
)

// health defaults and validates the health section.
func (b *builder) health() {
	h, pos := &b.c.Health, b.c.pos
	yamlconf.Default(pos, "health.interval", &h.Interval, Duration(DefaultHealthInterval))
	if h.Interval.D() < 10*time.Millisecond {
		b.errorf("health.interval", "health: interval %s must be at least 10ms", h.Interval.D())
	}
	yamlconf.Default(pos, "health.timeout", &h.Timeout, Duration(min(DefaultHealthTimeout, h.Interval.D())))
	if h.Timeout <= 0 || h.Timeout > h.Interval {
		b.errorf("health.timeout", "health: timeout %s must be > 0 and at most the interval %s", h.Timeout.D(), h.Interval.D())
	}
	yamlconf.Default(pos, "health.jitter", &h.Jitter, h.Interval/10) // a written 0: no jitter
	if h.Jitter < 0 || h.Jitter > h.Interval {
		b.errorf("health.jitter", "health: jitter %s must be between 0 and the interval %s", h.Jitter.D(), h.Interval.D())
	}
	yamlconf.Default(pos, "health.rise", &h.Rise, DefaultRise)
	yamlconf.Default(pos, "health.fall", &h.Fall, DefaultFall)
	if h.Rise < 1 || h.Rise > 100 {
		b.errorf("health.rise", "health: rise %d must be in 1..100", h.Rise)
	}
	if h.Fall < 1 || h.Fall > 100 {
		b.errorf("health.fall", "health: fall %d must be in 1..100", h.Fall)
	}
	yamlconf.Default(pos, "health.signature_window", &h.SignatureWindow, Duration(DefaultSignatureWindow))
	if h.SignatureWindow.D() < time.Second || h.SignatureWindow.D() > time.Hour {
		b.errorf("health.signature_window", "health: signature_window %s must be in 1s..1h", h.SignatureWindow.D())
	}
	yamlconf.Default(pos, "health.report_max_skew", &h.ReportMaxSkew, Duration(DefaultReportMaxSkew))
	if h.ReportMaxSkew.D() < time.Second || h.ReportMaxSkew.D() > time.Hour {
		b.errorf("health.report_max_skew", "health: report_max_skew %s must be in 1s..1h", h.ReportMaxSkew.D())
	}
	yamlconf.Default(pos, "health.report_max_age", &h.ReportMaxAge, Duration(DefaultReportMaxAge))
	if h.ReportMaxAge.D() < time.Second || h.ReportMaxAge.D() > time.Hour {
		b.errorf("health.report_max_age", "health: report_max_age %s must be in 1s..1h", h.ReportMaxAge.D())
	}
	if h.CAFile != "" {
		pem, err := os.ReadFile(b.resolve(h.CAFile))
		switch {
		case err != nil:
			b.errorf("health.ca_file", "health: ca_file: %v", err)
		case !x509.NewCertPool().AppendCertsFromPEM(pem):
			b.errorf("health.ca_file", "health: ca_file %s: no PEM certificate in it", h.CAFile)
		default:
			h.caPEM = pem
		}
	}
}

// MinAdminTokenLen is the shortest admin_token Build accepts.
const MinAdminTokenLen = 16

// adminToken reads admin_token and checks the token: long enough to
// resist guessing and free of white space (it travels in a header).
func (b *builder) adminToken() {
	c := b.c
	const key = "admin_token"
	b.secret(key, key, c.AdminTokenSource, &c.AdminToken)
	switch {
	case c.AdminToken == "":
	case len(c.AdminToken) < MinAdminTokenLen:
		b.errorf(key, "admin_token must be at least %d characters", MinAdminTokenLen)
	case strings.IndexFunc(c.AdminToken, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		b.errorf(key, "admin_token must not contain white space or control characters")
	}
}
