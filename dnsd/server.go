package dnsd

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/dnsd/dnssec"
	"github.com/transmirror/transmirror/dnsd/rrl"
	"github.com/transmirror/transmirror/zones"
)

// Defaults for zero values in zones.ServerConfig.
const (
	defaultMaxUDPSize      = 1232
	defaultTCPIdleTimeout  = 10 * time.Second
	defaultMaxTCPConns     = 1000
	defaultShutdownTimeout = 5 * time.Second
	tsigFudge              = 300
)

// Options configure a Server.
type Options struct {
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
	// Registry is where the server's metrics are registered; nil keeps
	// them in a private registry.
	Registry prometheus.Registerer
	// Groups answers group names; nil uses StaticGroups of each snapshot.
	Groups GroupAnswerer
	// Challenges serves the live ACME DNS-01 challenge values; nil
	// serves none (a challenge name is answered as the zone says).
	Challenges Challenges
	// ShutdownTimeout bounds how long Serve* wait for in-flight queries
	// after their context is done (default 5s).
	ShutdownTimeout time.Duration

	// wrap, when set (tests only), wraps the handler chain of every snapshot.
	wrap func(Handler) Handler
	// now, when set (tests only), is the rate limiter's clock.
	now func() time.Time
	// slowOnly (tests only) turns the UDP fast path off.
	slowOnly bool
}

// Server is the authoritative DNS server. It serves any number of UDP and
// TCP sockets from the snapshot last given to Load.
type Server struct {
	log      *slog.Logger
	groups   GroupAnswerer
	acme     Challenges
	m        *metrics
	wrap     func(Handler) Handler
	now      func() time.Time
	slowOnly bool
	shutdown time.Duration
	cookie   []byte // server cookie secret

	signerMu sync.Mutex
	signers  map[string]*dnssec.Signer // by signerKey: kept across reloads with the same keys

	snap       atomic.Pointer[snapshot]
	tcpConns   atomic.Int64
	tcpClients clientConns
}

// snapshot is everything one *zones.Set needs at query time, built once.
type snapshot struct {
	set      *zones.Set
	chain    Handler
	maxUDP   int
	idle     time.Duration
	tcpRead  time.Duration
	maxTCP   int
	perTCP   int // connections per client address
	tcpQs    int // queries per connection
	nsidHex  string
	keys     map[string]tsigKey
	negSOA   map[*zones.Zone]*dns.SOA
	signers  map[*zones.Zone]*dnssec.Signer // the zones with active keys
	transfer map[string][]netip.Prefix      // canonical origin → allowed clients
	rrlCfg   zones.RRLConfig
	rrl      *rrl.Limiter // nil: UDP responses are not rate limited
	groups   GroupAnswerer
	nsid     []byte
	fast     *fastTable // nil: every UDP query takes the slow path
}

// New returns a Server with its metrics registered. It serves REFUSED until
// the first Load.
func New(opts Options) (*Server, error) {
	s := &Server{
		log:      opts.Logger,
		groups:   opts.Groups,
		acme:     opts.Challenges,
		wrap:     opts.wrap,
		now:      opts.now,
		slowOnly: opts.slowOnly,
		shutdown: opts.ShutdownTimeout,
		cookie:   make([]byte, 16),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.shutdown <= 0 {
		s.shutdown = defaultShutdownTimeout
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("dnsd: register metrics: %w", err)
	}
	s.m = m
	if err := reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "transmirror", Subsystem: "dnsd", Name: "dnssec_signature_expiry_timestamp_seconds",
		Help: "When the first cached signature runs out (Unix time; 0 when nothing is signed). Signatures are made again a day after they are made and last a week.",
	}, s.nearestExpiry)); err != nil {
		return nil, fmt.Errorf("dnsd: register metrics: %w", err)
	}
	if _, err := rand.Read(s.cookie); err != nil {
		return nil, fmt.Errorf("dnsd: cookie secret: %w", err)
	}
	return s, nil
}

// Load builds the handler chain and query-time indexes for set and swaps
// them in atomically; queries in flight finish on the old snapshot. On
// error the previous snapshot keeps serving.
func (s *Server) Load(set *zones.Set) error {
	commit, err := s.Prepare(set)
	if err != nil {
		return err
	}
	commit()
	return nil
}

// Prepare builds the handler chain and query-time indexes for set; the
// returned commit swaps them in and can not fail. Nothing changes until
// commit is called.
func (s *Server) Prepare(set *zones.Set) (commit func(), err error) {
	snap, err := s.build(set)
	if err != nil {
		return nil, err
	}
	return func() {
		s.snap.Store(snap)
		s.log.Debug("dnsd: snapshot loaded", "zones", len(set.Zones), "groups", len(set.Groups))
	}, nil
}

// limiter returns the rate limiter for c: the one in service when c has
// not changed (its buckets carry over a reload), a new one when it has, nil
// when RRL is off.
func (s *Server) limiter(c zones.RRLConfig) (*rrl.Limiter, error) {
	if !c.Enabled {
		return nil, nil
	}
	if cur := s.snap.Load(); cur != nil && cur.rrl != nil && reflect.DeepEqual(cur.rrlCfg, c) {
		return cur.rrl, nil
	}
	l, err := rrl.New(rrl.Config{Rate: c.Rate, Window: c.Window.D(), Slip: c.Slip, IPv4Prefix: c.IPv4Prefix,
		IPv6Prefix: c.IPv6Prefix, Exempt: c.Exempt, LogOnly: c.LogOnly, TableSize: c.TableSize})
	if err != nil {
		return nil, fmt.Errorf("dnsd: %w", err)
	}
	return l, nil
}

// build makes the snapshot that serves set: its limits, TSIG keys, zone
// indexes, rate limiter, handler chain and fast table.
func (s *Server) build(set *zones.Set) (*snapshot, error) {
	if set == nil || set.Config == nil {
		return nil, ErrNoConfig
	}
	sc := set.Config.Server
	snap := newSnapshot(set)
	keys, err := tsigKeys(sc.TSIG)
	if err != nil {
		return nil, err
	}
	snap.keys = keys
	if snap.rrl, err = s.limiter(sc.RRL); err != nil {
		return nil, err
	}
	snap.rrlCfg = sc.RRL
	snap.groups = s.groups
	if snap.groups == nil {
		snap.groups = StaticGroups{Set: set}
	}
	var chain Handler = &auth{set: set, groups: snap.groups, negSOA: snap.negSOA}
	if s.acme != nil {
		chain = &challenge{set: set, src: s.acme, negSOA: snap.negSOA, next: chain}
	}
	if snap.signers = s.signersFor(set); len(snap.signers) > 0 {
		chain = &signing{set: set, signers: snap.signers, negSOA: snap.negSOA, next: chain}
	}
	chain = &transfer{set: set, allow: snap.transfer, next: chain}
	chain = &chaos{identity: sc.Identity, version: sc.Version, next: chain}
	if s.wrap != nil {
		chain = s.wrap(chain)
	}
	snap.chain = chain
	snap.fast = s.buildFast(snap)
	return snap, nil
}

// signersFor returns the signers of set's zones with keys: the previous
// snapshot's for a zone whose active keys are the same (its signatures
// stay cached), new ones for the others.
func (s *Server) signersFor(set *zones.Set) map[*zones.Zone]*dnssec.Signer {
	s.signerMu.Lock()
	defer s.signerMu.Unlock()
	out := make(map[*zones.Zone]*dnssec.Signer)
	kept := make(map[string]*dnssec.Signer)
	now := s.now()
	for _, z := range set.Zones {
		if len(z.Keys) == 0 {
			continue
		}
		key := signerKey(z, now)
		sg := s.signers[key]
		if sg == nil {
			sg = dnssec.New(z.Origin, z.Keys, s.now, s.m.dnssec, 0)
		}
		if sg != nil {
			out[z], kept[key] = sg, sg
		}
	}
	s.signers = kept
	return out
}

// nearestExpiry is the first expiry of the serving snapshot's cached
// signatures, as Unix time (0: none).
func (s *Server) nearestExpiry() float64 {
	snap := s.snap.Load()
	if snap == nil {
		return 0
	}
	var first time.Time
	for _, sg := range snap.signers {
		if t := sg.NearestExpiry(); !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if first.IsZero() {
		return 0
	}
	return float64(first.Unix())
}

// signerKey names a zone's signer by its origin and its keys active at
// now.
func signerKey(z *zones.Zone, now time.Time) string {
	var b strings.Builder
	b.WriteString(z.Origin)
	for _, k := range z.Keys {
		if k.Active(now) {
			fmt.Fprintf(&b, " %d/%d/%d", k.DNSKEY.Algorithm, k.DNSKEY.KeyTag(), k.DNSKEY.Flags)
		}
	}
	return b.String()
}

// newSnapshot returns the snapshot of set with its limits (defaulted) and
// zone indexes: each zone's negative SOA, each origin's transfer clients.
func newSnapshot(set *zones.Set) *snapshot {
	sc := set.Config.Server
	snap := &snapshot{
		set:      set,
		maxUDP:   sc.MaxUDPSize,
		idle:     sc.TCPIdleTimeout.D(),
		tcpRead:  sc.TCPReadTimeout.D(),
		maxTCP:   sc.MaxTCPConnections,
		perTCP:   sc.MaxTCPConnectionsPerClient,
		tcpQs:    sc.MaxTCPQueries,
		nsidHex:  hex.EncodeToString([]byte(sc.NSID)),
		nsid:     []byte(sc.NSID),
		negSOA:   make(map[*zones.Zone]*dns.SOA, len(set.Zones)),
		transfer: make(map[string][]netip.Prefix, len(set.Config.Zones)),
	}
	if snap.maxUDP <= 0 {
		snap.maxUDP = defaultMaxUDPSize
	}
	snap.maxUDP = min(max(snap.maxUDP, dns.MinMsgSize), dns.MaxMsgSize)
	if snap.idle <= 0 {
		snap.idle = defaultTCPIdleTimeout
	}
	if snap.tcpRead <= 0 {
		snap.tcpRead = zones.DefaultTCPReadTimeout
	}
	if snap.maxTCP <= 0 {
		snap.maxTCP = defaultMaxTCPConns
	}
	if snap.perTCP <= 0 {
		snap.perTCP = zones.DefaultMaxTCPConnectionsPerClient
	}
	if snap.tcpQs <= 0 {
		snap.tcpQs = zones.DefaultMaxTCPQueries
	}
	for _, z := range set.Zones {
		if z.SOA == nil {
			continue
		}
		soa := dns.Copy(z.SOA).(*dns.SOA)
		soa.Hdr.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
		snap.negSOA[z] = soa
	}
	for _, zc := range set.Config.Zones {
		o := dns.CanonicalName(zc.Origin)
		snap.transfer[o] = append(snap.transfer[o], zc.AllowTransfer...)
	}
	return snap
}
