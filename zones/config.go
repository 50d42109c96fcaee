package zones

import (
	"net/netip"
	"time"

	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Config is the dnsd configuration file, decoded strictly (unknown keys are
// errors), defaulted and validated by Load. It is immutable once loaded.
type Config struct {
	// Listen are the DNS listen addresses; each serves UDP and TCP.
	Listen []string `yaml:"listen"`
	// Admin is the admin HTTP listen address (API, dashboard, /metrics).
	// Empty disables the admin server. A bare port (":8053") listens on
	// 127.0.0.1 only; write the host ("0.0.0.0:8053", "[::]:8053",
	// "192.0.2.53:8053") to listen elsewhere.
	Admin string `yaml:"admin"`
	// AdminTLS serves the admin listener over TLS (1.2 or later) with
	// this certificate and key, relative to the config file's directory;
	// absent is plain HTTP. A reload reads both files again: a pair that
	// does not load fails the reload and the old one keeps serving.
	AdminTLS TLSFiles `yaml:"admin_tls"`
	// AdminLimits bound what one client may hold of the admin listener,
	// dnsd's one HTTP listener: the key is limits, as in mirror.yaml
	// (DNS over TCP has server.max_tcp_connections_per_client).
	AdminLimits HTTPLimits `yaml:"limits"`
	// AdminHosts are host names that the admin listener answers in a
	// request's Host, besides IP addresses, localhost and admin's own
	// host: the names that mirrors, groupctl or Prometheus reach a plain
	// HTTP admin listener by (every other Host is refused against DNS
	// rebinding; over TLS any Host is answered). A restart applies it.
	AdminHosts []string `yaml:"admin_hosts"`
	// Server holds protocol settings of the DNS edge.
	Server ServerConfig `yaml:"server"`
	// Zones are the authoritative zones served. At least one is required
	// unless AllowNoZones says otherwise.
	Zones []ZoneConfig `yaml:"zones"`
	// AllowNoZones accepts a config without zones (a dnsd that answers
	// every query REFUSED, say while zones are being moved in). Without
	// it a config, or a reload, with no zones fails: an empty or
	// truncated file must not take every zone down.
	AllowNoZones bool `yaml:"allow_no_zones"`
	// Groups are the mirror groups answered from members, not zone files.
	Groups []GroupConfig `yaml:"groups"`
	// Geo says where clients are, for the proximity-aware policies.
	Geo GeoConfig `yaml:"geo"`
	// Health is how members' load reports are pulled and judged.
	Health HealthConfig `yaml:"health"`
	// Cluster makes dnsd a node of an NS set that shares its run-time
	// state through etcd; absent, the state file keeps it.
	Cluster ClusterConfig `yaml:"cluster"`
	// StateFile keeps run-time state (members added through the admin API,
	// drained members) across restarts, relative to the config file's
	// directory; "" keeps it in memory only. Beside it dnsd keeps the
	// per-scope request rate estimates of the groups (dnsd-state.json →
	// dnsd-state.scopes.json), written every 30 s and at shutdown.
	StateFile string `yaml:"state_file"`
	// AdminToken lets an operator drain and undrain members through the
	// admin API and the dashboard with "Authorization: Bearer TOKEN", as an
	// alternative to a request signed with the group's secret; "" allows
	// signed requests only. Build sets it from AdminTokenSource when the
	// file has admin_token (a Config built in Go may set it directly).
	AdminToken string `yaml:"-"`
	// AdminTokenSource is admin_token as written: the token, or
	// {file: PATH} relative to the config file's directory.
	AdminTokenSource yamlconf.Secret `yaml:"admin_token"`

	// File is the path the config was read from ("" for flag-built configs).
	File string `yaml:"-"`

	pos yamlconf.Positions // where each object was written (Parse), for errors
}

// ServerConfig holds protocol settings of the DNS edge.
type ServerConfig struct {
	// Identity answers CH TXT id.server. and hostname.bind.; "" disables.
	Identity string `yaml:"identity"`
	// Version answers CH TXT version.bind. and version.server.; "" disables.
	// When the key is absent it defaults to "transmirror".
	Version string `yaml:"version"`
	// NSID is returned in the EDNS NSID option (RFC 5001) when asked; "" disables.
	NSID string `yaml:"nsid"`
	// MaxUDPSize caps UDP answers whatever the client advertises (default 1232).
	MaxUDPSize int `yaml:"max_udp_size"`
	// UDPSockets is how many UDP sockets each listen address gets
	// (SO_REUSEPORT; the kernel spreads the clients over them), each with a
	// read loop of its own (1..256). Left out it stays 0, which means one
	// per CPU the process may use; a written 0 is an error.
	UDPSockets int `yaml:"udp_sockets"`
	// TCPIdleTimeout closes TCP connections idle this long (default 10s).
	TCPIdleTimeout Duration `yaml:"tcp_idle_timeout"`
	// TCPReadTimeout bounds the wait for a query's bytes once a TCP
	// connection is accepted (default 2s).
	TCPReadTimeout Duration `yaml:"tcp_read_timeout"`
	// MaxTCPConnections caps concurrent TCP connections (default 1000).
	MaxTCPConnections int `yaml:"max_tcp_connections"`
	// MaxTCPConnectionsPerClient caps the concurrent TCP connections of
	// one client, an IPv4 address or an IPv6 /64 (default 16).
	MaxTCPConnectionsPerClient int `yaml:"max_tcp_connections_per_client"`
	// MaxTCPQueries bounds the queries on one TCP connection; the server
	// closes it after that many (default 1000).
	MaxTCPQueries int `yaml:"max_tcp_queries"`
	// TSIG keys known to the server (name → base64 secret), for signed
	// requests such as AXFR; requests signed with any other key get NOTAUTH.
	TSIG []TSIGKey `yaml:"tsig"`
	// RRL is response rate limiting of UDP answers (off unless enabled).
	RRL RRLConfig `yaml:"rrl"`
}

// RRLConfig is response rate limiting (see dnsd/rrl): per client prefix,
// response kind and name, a token bucket of Rate responses per second that
// saves up at most Rate × Window; past it UDP responses are dropped, every
// Slip-th sent truncated so that real clients retry over TCP (never
// limited). Keys left out take the defaults, which are safe on the
// internet; a written 0 is an error except for slip.
type RRLConfig struct {
	// Enabled turns it on.
	Enabled bool `yaml:"enabled"`
	// Rate is responses per second per bucket (default 20).
	Rate float64 `yaml:"rate"`
	// Window is how long a bucket saves up (default 5s, at most 1m).
	Window Duration `yaml:"window"`
	// Slip: every Slip-th limited response goes out truncated (default 2;
	// 1 all, 0 none, at most 10). After Build none is -1, as dnsd/rrl
	// takes it (a -1 written by an older config loads as none, with a
	// warning).
	Slip int `yaml:"slip"`
	// IPv4Prefix and IPv6Prefix group clients (default 24 and 56).
	IPv4Prefix int `yaml:"ipv4_prefix"`
	IPv6Prefix int `yaml:"ipv6_prefix"`
	// Exempt clients are never limited.
	Exempt []netip.Prefix `yaml:"exempt"`
	// LogOnly counts what it would limit and sends everything.
	LogOnly bool `yaml:"log_only"`
	// TableSize is the number of buckets (default 65536, 64..16777216).
	TableSize int `yaml:"table_size"`
}

// TSIGKey is a shared secret for TSIG (RFC 8945).
type TSIGKey struct {
	// Name is the key name (a domain name).
	Name string `yaml:"name"`
	// Algorithm is hmac-sha256 (default), hmac-sha512 or hmac-sha1; Build
	// turns it into miekg/dns's name (dns.HmacSHA256, ...).
	Algorithm string `yaml:"algorithm"`
	// Secret is the base64 key material.
	Secret string `yaml:"secret"`
}

// ZoneConfig names one authoritative zone and its RFC 1035 file.
type ZoneConfig struct {
	// Origin is the zone apex, e.g. "example.org.".
	Origin string `yaml:"origin"`
	// File is the zone file, relative to the config file's directory.
	File string `yaml:"file"`
	// AllowTransfer lists the client prefixes allowed to AXFR this zone.
	AllowTransfer []netip.Prefix `yaml:"allow_transfer"`
	// AllowInclude permits $INCLUDE in the zone file (off by default).
	AllowInclude bool `yaml:"allow_include"`
	// DNSSEC signs the zone's answers online.
	DNSSEC DNSSECConfig `yaml:"dnssec"`
}

// DNSSECConfig is a zone's online signing: with keys, every answer to a
// query with the DO bit is signed as it is sent, and the apex publishes
// the keys' DNSKEY records.
type DNSSECConfig struct {
	// Keys are the zone's key pairs, each as the path (relative to the
	// config file's directory) of the files BIND's dnssec-keygen or
	// ldns-keygen wrote, with or without .key: NAME.key and NAME.private.
	// A key with the SEP flag (257) is a KSK and signs the DNSKEY RRset;
	// the others (ZSKs) sign the rest. Keys of one kind only sign
	// everything (CSKs). BIND's timing (Publish, Activate, Inactive,
	// Delete) is applied when the config is loaded or reloaded.
	Keys []string `yaml:"keys"`
}

// GroupConfig is one mirror group: a name inside a served zone answered
// with the addresses of its members.
type GroupConfig struct {
	// Name is the group's fully qualified name, e.g. "www.example.org.".
	Name string `yaml:"name"`
	// TTL bounds the adaptive TTL of group answers.
	TTL TTLBounds `yaml:"ttl"`
	// Policy chooses members for each answer.
	Policy PolicyConfig `yaml:"policy"`
	// Answers is how many addresses of each family an answer carries
	// at most (default 2): one of each member picked, in the order
	// picked, then a second of each, and so on.
	Answers int `yaml:"answers"`
	// Secret authenticates writes (pushes, membership changes) for the
	// group. Build sets it from SecretSource when the file has secret (a
	// GroupConfig built in Go may set it directly).
	Secret string `yaml:"-"`
	// SecretSource is secret as written: the secret, or {file: PATH}
	// relative to the config file's directory.
	SecretSource yamlconf.Secret `yaml:"secret"`
	// PreviousSecret is the secret being rotated out: signatures made with
	// it are accepted as well as Secret's until PreviousSecretUntil, so
	// that signers can move to the new secret one by one. Build sets it
	// from PreviousSecretSource as Secret from SecretSource.
	PreviousSecret string `yaml:"-"`
	// PreviousSecretSource is previous_secret as written, in either form
	// of SecretSource.
	PreviousSecretSource yamlconf.Secret `yaml:"previous_secret"`
	// PreviousSecretUntil is when PreviousSecret stops being accepted, an
	// RFC 3339 time ("2025-03-01T12:00:00Z"); required with a previous
	// secret. Build parses it into PreviousSecretExpiry.
	PreviousSecretUntil string `yaml:"previous_secret_until"`
	// PreviousSecretExpiry is PreviousSecretUntil parsed (set by Build).
	PreviousSecretExpiry time.Time `yaml:"-"`
	// AllowPrivate lets run-time members (GROUP-ADD) have addresses that
	// are not globally reachable: loopback, private, link-local, shared
	// (RFC 6598), documentation, benchmarking and reserved ranges, and
	// probe URLs on such addresses or localhost. Unspecified, multicast
	// and broadcast addresses are refused always. Members of the config
	// file are not restricted by it.
	AllowPrivate bool `yaml:"allow_private"`
	// WhenAllDrained is what dnsd answers when every member that has an
	// address of the asked family is drained: WhenAllDrainedAnswer (the
	// default: fail open, the drained members, as when every member is
	// down) or WhenAllDrainedNoData (NODATA: no address, the SOA in the
	// authority section).
	WhenAllDrained string `yaml:"when_all_drained"`
	// MaxRuntimeMembers caps the members added at run time to the group
	// (default DefaultMaxRuntimeMembers, or what MaxGroupMembers leaves
	// beside the file's members when that is fewer; 0 when written:
	// GROUP-ADD is refused). The file's members plus MaxRuntimeMembers
	// may be at most MaxGroupMembers.
	MaxRuntimeMembers int `yaml:"max_runtime_members"`
	// MaxLag is how far a member's generation (the time of its last
	// complete sync, from its trace file, in its load reports) may be
	// behind the group's newest and still be answered, in
	// MinMaxLag..MaxMaxLag; absent: off (every member is answered
	// whatever its generation). A member further behind leaves the
	// answers as "lagging" and comes back when a report shows it caught
	// up; members without a generation never lag; when every member that
	// would be answered lags, the freshest of them are (fail open). A
	// written 0 is an error.
	MaxLag Duration `yaml:"max_lag"`
	// Master is the URL (http or https) of the master's trace file, whose
	// first line is the newest generation under max_lag (the formats of
	// a mirror's content.trace); fetched every 30 s, its last good answer
	// kept while it fails. Absent: the newest is the freshest member's.
	// It needs max_lag.
	Master string `yaml:"master"`
	// Members are the static members of the group.
	Members []MemberConfig `yaml:"members"`
}

// PublicOnly reports whether dnsd reaches m, a member of g, on public
// addresses only (its probes, its content index): a run-time member of a
// group without allow_private; a nil g (a group that is gone) counts as
// one without.
func (g *GroupConfig) PublicOnly(m MemberConfig) bool {
	return m.Runtime && (g == nil || !g.AllowPrivate)
}

// Secrets returns the secrets that signed writes for the group may be
// made with at now: Secret, then PreviousSecret while now is before
// PreviousSecretExpiry. Empty secrets are left out.
func (g *GroupConfig) Secrets(now time.Time) [][]byte {
	var out [][]byte
	if g.Secret != "" {
		out = append(out, []byte(g.Secret))
	}
	if g.PreviousSecret != "" && now.Before(g.PreviousSecretExpiry) {
		out = append(out, []byte(g.PreviousSecret))
	}
	return out
}

// TTLBounds are the inclusive bounds, in seconds, of a group answer's TTL.
type TTLBounds struct {
	// Min is the shortest TTL a group answer gets (default 20, >= 1).
	Min uint32 `yaml:"min"`
	// Max is the longest TTL a group answer gets (default 300, at most 86400).
	Max uint32 `yaml:"max"`
	// Unseen is the TTL of an answer to a client scope (resolver or ECS
	// subnet) never seen before, whose request rate is not known yet
	// (default Min; within [Min, Max]).
	Unseen uint32 `yaml:"unseen"`
}

// PolicyConfig names a global answer policy and its parameters.
type PolicyConfig struct {
	// Name is weighted, least-load, nearest, hash or geo-load (default).
	Name string `yaml:"name"`
	// LowWatermark is the utilization (load/capacity) where a member's
	// share starts to shrink (default 0.7).
	LowWatermark float64 `yaml:"low_watermark"`
	// HighWatermark is the utilization above which a member is skipped
	// while others have room (default 0.9).
	HighWatermark float64 `yaml:"high_watermark"`
}

// MemberConfig is one mirror of a group.
type MemberConfig struct {
	// Name is the member's short name, unique in the group, e.g. "fra1".
	Name string `yaml:"name"`
	// Host is the member's own host name, used for redirects.
	Host string `yaml:"host"`
	// Addresses are the member's IPv4 and IPv6 addresses.
	Addresses []netip.Addr `yaml:"addresses"`
	// Location is where the member is.
	Location Location `yaml:"location"`
	// Capacity is what the member can carry, in load units (> 0).
	Capacity float64 `yaml:"capacity"`
	// Bandwidth is what the member's uplink carries, in bytes per second,
	// written with its unit (1Gbit/s, 100MB/s); 0 or absent is no limit.
	// With a bandwidth the member's utilization is the larger of its load
	// over Capacity and its reported bytes per second over Bandwidth.
	Bandwidth Bandwidth `yaml:"bandwidth"`
	// Weight is the member's static weight (default 1, > 0).
	Weight float64 `yaml:"weight"`
	// Probe is the URL of the member's load report (GET /v1/load).
	Probe string `yaml:"probe"`
	// Runtime marks a member added through the admin API (GROUP-ADD)
	// rather than written in the config file.
	Runtime bool `yaml:"-"`
	// Joined marks a run-time member that added itself (a mirror with
	// join on, api.MemberInfo.Joined); it changes nothing in the answers.
	Joined bool `yaml:"-"`
}

// HealthConfig is how dnsd watches members: it pulls each member's load
// report (GET /v1/load at the member's probe URL) every Interval, a
// pushed report counts as a successful probe, and Rise successes in a row
// bring a member up, Fall failures in a row take it down.
type HealthConfig struct {
	// Interval between pulls (default 5s); pushed reports go stale after
	// two intervals.
	Interval Duration `yaml:"interval"`
	// Timeout of one pull (default 2s, at most Interval).
	Timeout Duration `yaml:"timeout"`
	// Jitter is the most a pull is delayed at random (default Interval/10).
	Jitter Duration `yaml:"jitter"`
	// Rise is the successes that bring a member up (default 2).
	Rise int `yaml:"rise"`
	// Fall is the failures that take a member down (default 3).
	Fall int `yaml:"fall"`
	// SignatureWindow is how far a signed request's time may be from
	// dnsd's clock (default 30s).
	SignatureWindow Duration `yaml:"signature_window"`
	// ReportMaxSkew is how far ahead of dnsd's clock a load report's time
	// may be (default 30s), ReportMaxAge how far behind (default 60s): a
	// pushed report outside is refused, a pulled one is timed by dnsd.
	ReportMaxSkew Duration `yaml:"report_max_skew"`
	ReportMaxAge  Duration `yaml:"report_max_age"`
	// CAFile holds PEM CA certificates that the certificates of https
	// probe URLs may chain to, besides the system's roots (a private CA
	// of the mirrors' admin_tls); relative to the config file. It is
	// read at start: a change of its path or its contents needs a
	// restart.
	CAFile string `yaml:"ca_file"`

	caPEM []byte // CAFile's contents, read by Build
}

// CAPEM returns the PEM certificates of CAFile as Build read them (nil
// without one).
func (h HealthConfig) CAPEM() []byte { return h.caPEM }

// GeoConfig says where DNS clients are: the geo block that dnsd and the
// mirror share (see yamlconf.Geo).
type GeoConfig = yamlconf.Geo

// NetworkConfig is one row of the static networks table.
type NetworkConfig = yamlconf.Network

// Location is a place: coordinates and/or country and continent codes.
type Location = yamlconf.Location

// TLSFiles is a TLS certificate and key (see yamlconf.TLSFiles).
type TLSFiles = yamlconf.TLSFiles

// HTTPLimits bound one client's share of an HTTP listener (see
// yamlconf.HTTPLimits).
type HTTPLimits = yamlconf.HTTPLimits

// Duration is a time.Duration written as "10s", "1m30s" in YAML.
type Duration = yamlconf.Duration

// Bandwidth is a rate in bytes per second written as 1Gbit/s, 100Mbps or
// 12.5MB/s in YAML (see yamlconf.Bandwidth).
type Bandwidth = yamlconf.Bandwidth
