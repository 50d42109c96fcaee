package mirror

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Defaults of the mirror configuration. A key that is absent from the file
// gets its default; a key that is written is validated as written.
const (
	// DefaultCapacity is capacity, in load units.
	DefaultCapacity = 100
)

// Config is the mirror daemon's configuration file (mirror.yaml), decoded
// strictly (unknown keys are errors), defaulted and validated by
// ParseConfig. It is not modified once returned.
type Config struct {
	// Listen are the public HTTP listen addresses (HOST:PORT, HOST an IP
	// address, localhost or empty; see yamlconf.CheckHostPort); at least one.
	Listen []string `yaml:"listen"`
	// Admin is the admin HTTP listen address (/metrics, /v1/load,
	// /-/healthy); empty disables the admin server. A bare port (":9180")
	// listens on 127.0.0.1 only; write the host ("0.0.0.0:9180",
	// "192.0.2.10:9180") to listen elsewhere.
	Admin string `yaml:"admin"`
	// Pprof is not a key of the file: the -pprof flag, Go's profiles on
	// the admin listener for loopback callers (needs a restart).
	Pprof bool `yaml:"-"`
	// AdminTLS serves the admin listener over TLS (1.2 or later) with
	// this certificate and key; absent is plain HTTP. After ParseConfig
	// both paths are resolved against the config file's directory. A
	// reload reads both files again: a pair that does not load fails the
	// reload and the old one keeps serving.
	AdminTLS yamlconf.TLSFiles `yaml:"admin_tls"`
	// TLS is the public HTTPS listeners and their certificates (see
	// TLSConfig); absent: plain HTTP only.
	TLS TLSConfig `yaml:"tls"`
	// AdminHosts are host names that the admin listener answers in a
	// request's Host, besides IP addresses, localhost and admin's own
	// host: the names that dnsd's probe, a front end or Prometheus reach a
	// plain HTTP admin listener by (every other Host is refused against
	// DNS rebinding; over TLS any Host is answered). A restart applies it.
	AdminHosts []string `yaml:"admin_hosts"`
	// Limits bound what one client may hold of each HTTP listener, the
	// public ones and the admin one.
	Limits yamlconf.HTTPLimits `yaml:"limits"`
	// Group is the group host name that clients use, e.g. www.example.org.
	Group string `yaml:"group"`
	// Member is this mirror's short name in the group, e.g. fra1.
	Member string `yaml:"member"`
	// Host is this mirror's own host name, e.g. fra1.mirrors.example.org.
	Host string `yaml:"host"`
	// DNSD is where load reports are pushed; absent disables pushing.
	DNSD DNSDConfig `yaml:"dnsd"`
	// Join makes the mirror add itself to the group at start (GROUP-ADD)
	// and leave it gracefully on SIGTERM (see JoinConfig); it needs dnsd.
	Join JoinConfig `yaml:"join"`
	// Root is the document root served; relative to the config file's
	// directory. Exactly one of Root, Backends and Dispatcher is given.
	Root string `yaml:"root"`
	// Content says what the mirror knows of the tree under Root (see
	// ContentConfig); it needs root.
	Content ContentConfig `yaml:"content"`
	// Dispatcher makes this mirror a pure 302 dispatcher: it serves no
	// content and answers every request on the group name with a redirect
	// to the best member for the client. It needs dnsd (for the group view)
	// and excludes root and backends.
	Dispatcher bool `yaml:"dispatcher"`
	// Backends are the site's back ends when this mirror is a front end
	// (see frontend.Backend).
	Backends []frontend.Backend `yaml:"backends"`
	// Listing turns on HTML directory listings (off by default).
	Listing bool `yaml:"listing"`
	// MaxRanges is the most byte ranges a request's Range header may ask
	// for (default 16, as nginx's max_ranges; 0 turns ranges off); a
	// request asking for more gets the whole file with 200, as nginx
	// answers it. What is allowed is coalesced first (LimitRanges).
	MaxRanges int `yaml:"max_ranges"`
	// TrustedProxies are the addresses and prefixes (192.0.2.10,
	// 10.0.0.0/8, 2001:db8::/32) of the proxies in front of this mirror
	// (a TLS terminator, a load balancer) whose Forwarded (RFC 7239) and
	// X-Forwarded-For / X-Forwarded-Proto headers are believed: for the
	// scheme of a redirect under redirect.scheme auto, and for the
	// client's address that locates it. Headers from other peers are
	// ignored. Default: none.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// ProxyProtocol are the addresses and prefixes, as in trusted_proxies,
	// of the TCP load balancers and TLS terminators in front of the public
	// listeners that send a PROXY protocol header (v1 or v2) first: a
	// connection from one of them must start with one, whose client
	// address then stands for the connection's (caps, logs, location);
	// one without is closed. A header from any other peer is not believed:
	// it is the start of a bad request. Default: none (no header is read).
	ProxyProtocol []string `yaml:"proxy_protocol"`
	// Timeouts are the public HTTP server's timeouts.
	Timeouts TimeoutsConfig `yaml:"timeouts"`
	// Redirect configures 302 correction to sibling mirrors.
	Redirect RedirectConfig `yaml:"redirect"`
	// Capacity is what this mirror can carry, in load units (default 100, > 0).
	Capacity float64 `yaml:"capacity"`
	// Bandwidth is what this mirror's uplink carries, in bytes per second,
	// written with its unit (1Gbit/s, 100MB/s); 0 or absent is no limit.
	// With a bandwidth the mirror's utilization is the larger of its load
	// over Capacity and its response bytes per second over Bandwidth, and
	// its load reports carry it.
	Bandwidth yamlconf.Bandwidth `yaml:"bandwidth"`
	// LoadWindow is the sliding window the load report's rates are taken
	// over (default 10s, 1s..5m): shorter reacts faster (redirects start
	// and stop sooner), longer is steadier.
	LoadWindow yamlconf.Duration `yaml:"load_window"`
	// RunQueue is where the load report's m comes from: loadavg (the
	// default), in_flight or none (see RunQueueSource).
	RunQueue RunQueueSource `yaml:"run_queue"`
	// Location is where this mirror is.
	Location yamlconf.Location `yaml:"location"`
	// Geo says where clients are, to redirect them to a sibling near
	// them; the same settings as dnsd's geo. Without any of them every
	// client is at the unknown location and the sibling is chosen by load
	// alone. After ParseConfig its MMDB is resolved against the config
	// file's directory.
	Geo yamlconf.Geo `yaml:"geo"`
	// Site configures the site front end and the back-end memory cache
	// (see frontend.Config).
	Site frontend.Config `yaml:"site"`

	// File is the path the config was read from.
	File string `yaml:"-"`
	// Warnings are what loads but should be fixed (a secret file readable
	// by group or others), each "FILE:LINE:COL: what"; the mirror logs
	// them at Warn, at start, on -check and on each reload.
	Warnings []string `yaml:"-"`
}

// TLSConfig is the mirror's public HTTPS: listeners beside the plain
// ones, serving the same requests, and the certificates they present.
type TLSConfig struct {
	// Listen are the public HTTPS listen addresses (as listen's), none
	// of them a plain listen address or admin. It needs certificates or
	// acme. A restart applies it.
	Listen []string `yaml:"listen"`
	// Certificates are the certificate chains and keys served, PEM files
	// relative to the config file (resolved by ParseConfig): the group
	// name's and the host name's, or one for both. A client's SNI name
	// picks the first that covers it; a client without SNI, or with a
	// name that none covers, gets the first. A reload reads them all
	// again: one that does not load fails the reload and the old ones
	// keep serving. It needs listen. With acme the certificate from the
	// CA comes first and these serve the names it does not cover.
	Certificates []yamlconf.TLSFiles `yaml:"certificates"`
	// ACME makes the mirror get its certificate itself, for the group
	// name and the host name by dns-01, for the host name alone by
	// http-01 and tls-alpn-01 (see ACMEConfig); absent: files only.
	ACME ACMEConfig `yaml:"acme"`
}

// ACME challenge types of ACMEConfig.Challenge.
const (
	// ChallengeDNS01 answers the CA through dnsd's admin API (the
	// default; it needs dnsd): the certificate covers the group name and
	// the host name.
	ChallengeDNS01 = "dns-01"
	// ChallengeHTTP01 answers the CA on the plain listeners (port 80 in
	// production). The CA connects to what DNS gives for the name, for
	// the group name any member, so the certificate covers the host name
	// only.
	ChallengeHTTP01 = "http-01"
	// ChallengeTLSALPN01 answers the CA on tls.listen (port 443 in
	// production) with ALPN acme-tls/1; the host name only, as http-01.
	ChallengeTLSALPN01 = "tls-alpn-01"
)

// ACMEConfig is where the mirror gets its certificate from (RFC 8555):
// one certificate, shared by every HTTPS listener, renewed before it
// expires: for the group name and the host name by dns-01, for the host
// name alone by http-01 or tls-alpn-01 (the group name's certificate is
// then a file of tls.certificates). A restart applies it.
type ACMEConfig struct {
	// Directory is the CA's directory URL (https); given, ACME is on.
	Directory string `yaml:"directory"`
	// Email is the account's contact (optional), without "mailto:".
	Email string `yaml:"email"`
	// CAFile holds PEM certificates that the CA's HTTPS certificate may
	// chain to besides the system's roots (a test CA such as Pebble's);
	// relative to the config file, resolved by ParseConfig.
	CAFile string `yaml:"ca_file"`
	// Dir is where the account key and the certificate with its key are
	// kept (0600 files; created 0700 if missing); relative to the config
	// file, resolved by ParseConfig. Required: the mirror has no state
	// directory of its own.
	Dir string `yaml:"dir"`
	// Challenge is how the CA is answered: dns-01 (the default, through
	// dnsd, which publishes _acme-challenge.NAME TXT for the member; not
	// for a dispatcher), http-01 (the plain listeners answer
	// /.well-known/acme-challenge/, on port 80 for a CA) or tls-alpn-01
	// (tls.listen answers ALPN acme-tls/1, on port 443 for a CA); the
	// latter two prove the host name only.
	Challenge string `yaml:"challenge"`
	// TestLifetime is a test knob, not a key of the file: renew as if
	// the certificate lived at most this long (the mirror's
	// -acme-test-lifetime flag; a test CA's certificates live years).
	TestLifetime time.Duration `yaml:"-"`
}

// Enabled reports whether the block is given.
func (a ACMEConfig) Enabled() bool { return a.Directory != "" }

// ContentConfig is what a mirror knows of its tree beyond serving it.
type ContentConfig struct {
	// Index keeps an index of the document root (every regular file's
	// path, size and mtime; see content.Scanner), rescanned every
	// content.DefaultInterval and early on inotify's word where there is
	// inotify, and serves it on the admin listener (api.ContentIndex: the
	// changes since a version, or the whole index). Default off; it needs
	// root. A restart applies it.
	Index bool `yaml:"index"`
	// Trace is the trace file that gives the mirror's generation, the
	// time its last complete sync was taken from the master: a path
	// relative to root (project/trace/master, as Debian's ftpsync writes
	// it), read again for every load report; its first line is the time
	// (probe.ParseTrace: date -u output, RFC 3339 or a Unix timestamp).
	// Absent: the reports carry no generation. A file that can not be
	// read or parsed gives no generation for that report, and is counted
	// and warned of. A restart applies it.
	Trace string `yaml:"trace"`
	// Generation is where the generation comes from: GenerationTrace
	// (the default with trace) or GenerationNewest, the newest mtime of
	// any file in the index (it needs index and excludes trace): for a
	// tree whose master writes no trace file. It moves with the first
	// file a sync lands, so a two-stage sync looks complete before its
	// metadata is; a trace is the better signal.
	Generation string `yaml:"generation"`
	// InPlace are the paths whose files change in place by design, such
	// as a distribution's metadata (dists/*/InRelease, repodata/): any
	// member that holds a copy serves them, whatever its copy's time
	// (a lagging member leaves DNS by max_lag, so what serves is fresh
	// enough), where every other file goes only to members with its
	// newest copy. A pattern that ends in "/" is a prefix of the path
	// below the root; any other is a path.Match pattern of the whole
	// path below the root, where * stays within one segment. Default:
	// none.
	InPlace []string `yaml:"in_place"`
}

// Values of content.generation.
const (
	GenerationTrace  = "trace"
	GenerationNewest = "newest"
)

// TracePath returns the trace file's path, "" without one.
func (c *Config) TracePath() string {
	if c.Content.Trace == "" || c.Root == "" {
		return ""
	}
	return filepath.Join(c.Root, filepath.FromSlash(c.Content.Trace))
}

// Values of dnsd.push.
const (
	// PushAll pushes every report to every dnsd URL.
	PushAll = "all"
	// PushOne pushes every report to one dnsd URL, the last that accepted
	// one, and to the next ones in turn when it fails.
	PushOne = "one"
)

// DNSDConfig says where and how load reports are pushed to dnsd.
type DNSDConfig struct {
	// URL is dnsd's admin base URL, http or https. Exactly one of URL and
	// URLs is given.
	URL string `yaml:"url"`
	// URLs are the admin base URLs of the dnsd of an NS set, in the order
	// they are tried. After ParseConfig it holds the dnsd URLs whichever
	// way they were given (URL alone is a list of one).
	URLs []string `yaml:"urls"`
	// Push says where each load report goes (default all): all pushes it
	// to every URL, which is right whether or not the dnsd share their
	// reports; one pushes it to one URL, the last that accepted one, and
	// to the next in turn when that fails, which is enough when the dnsd
	// share the reports (etcd). Metrics name a URL by its index in URLs.
	Push string `yaml:"push"`
	// CAFile holds PEM certificates that an https URL's certificate may
	// chain to besides the system's roots (a private CA); relative to the
	// config file, resolved by ParseConfig.
	CAFile string `yaml:"ca_file"`
	// Secret is the group's push secret, set by ParseConfig from
	// SecretSource.
	Secret string `yaml:"-"`
	// SecretSource is secret as written: the secret, or {file: PATH}
	// relative to the config file's directory (required with dnsd).
	SecretSource yamlconf.Secret `yaml:"secret"`
	// PushInterval is the time between pushes (default 2s, > 0).
	PushInterval yamlconf.Duration `yaml:"push_interval"`
	// ViewInterval is the time between refreshes of the group view
	// (GET {url}/v1/groups/{group}); a view older than three intervals is
	// stale and not used for redirects (default 2s, > 0).
	ViewInterval yamlconf.Duration `yaml:"view_interval"`
}

// String returns the settings with the secret redacted, so that a
// printed or logged Config does not show it.
func (d DNSDConfig) String() string {
	secret := ""
	if d.Secret != "" {
		secret = "<redacted>"
	}
	return fmt.Sprintf("{URL:%s URLs:%v Push:%s CAFile:%s Secret:%s SecretSource:%s PushInterval:%s ViewInterval:%s}", d.URL, d.URLs, d.Push, d.CAFile, secret, d.SecretSource, d.PushInterval.D(), d.ViewInterval.D())
}

// JoinConfig makes the mirror a member that announces itself. At start it
// sends a signed GROUP-ADD of itself (member, host, capacity, bandwidth,
// location from the top of the config, addresses and probe from here) to
// every dnsd URL, again with backoff while one does not answer; a member
// of its name that is already there with the same settings (a restart) is
// kept as it is. On SIGTERM it leaves: it drains itself on every dnsd (no
// new answer carries its address), keeps serving for LeaveWait so that the
// answers that resolvers cached run out, sends GROUP-EXIT, and only then
// stops its listeners and drains the requests in flight (for up to
// timeouts.shutdown). A supervisor that stops the mirror must allow
// LeaveWait + timeouts.shutdown and a few seconds more before it kills it.
type JoinConfig struct {
	// Enabled turns joining on (default off).
	Enabled bool `yaml:"enabled"`
	// Addresses are the IPv4 and IPv6 addresses dnsd answers for this
	// mirror (required with enabled): where clients reach its public
	// listeners.
	Addresses []string `yaml:"addresses"`
	// Probe is the URL of this mirror's load report (GET /v1/load on its
	// admin listener) that dnsd pulls; absent: dnsd relies on the pushed
	// reports alone.
	Probe string `yaml:"probe"`
	// LeaveWait is how long the mirror keeps serving after its drain
	// (left out, it stays 0: the group's ttl.max from the group view, or
	// group.DefaultLeaveWait when there is no view); at most
	// group.MaxLeaveWait. A
	// written 0 is an error (it meant the default before).
	LeaveWait yamlconf.Duration `yaml:"leave_wait"`
	// CheckInterval is how often the joined mirror asks each dnsd
	// whether it still has the member, and joins again where it does not
	// (removed by an operator, or a dnsd's state lost): default 30s,
	// 1s..1h.
	CheckInterval yamlconf.Duration `yaml:"check_interval"`
}

// TimeoutsConfig are the public HTTP server's timeouts; see http.Server.
type TimeoutsConfig struct {
	// ReadHeader bounds reading the request headers (default 2s, > 0).
	ReadHeader yamlconf.Duration `yaml:"read_header"`
	// Read bounds reading the whole request (default 0: off).
	Read yamlconf.Duration `yaml:"read"`
	// Write bounds writing the response (default 0: off, for large files).
	Write yamlconf.Duration `yaml:"write"`
	// Send bounds each write of a response: a client that takes nothing
	// of it for this long is cut off (default 60s, as nginx's
	// send_timeout; 0: off). A slow but steady download is not.
	Send yamlconf.Duration `yaml:"send"`
	// Idle closes keep-alive connections idle this long (default 120s, > 0).
	Idle yamlconf.Duration `yaml:"idle"`
	// Shutdown is the grace given to in-flight requests on shutdown
	// (default 30s, > 0).
	Shutdown yamlconf.Duration `yaml:"shutdown"`
}

// RedirectConfig configures 302 correction: requests that came in on the
// group name are redirected to a sibling when this mirror is overloaded.
type RedirectConfig struct {
	// Enabled turns redirects on (default true).
	Enabled bool `yaml:"enabled"`
	// Law is how the share to redirect is decided (default fair_share):
	// fair_share redirects what comes in over the mirror's fair share of
	// the group's load, but never below the low watermark (see
	// FairShareRedirect); watermark ramps the share between the low and
	// the high watermark of the mirror's own utilization (RedirectShare).
	// The watermarks are the group's, policy.low_watermark and
	// high_watermark in dnsd.yaml, which the mirror reads from its group
	// view: the mirror has none of its own, for a mirror that sheds load
	// at another utilization than the one where dnsd starts to send it
	// fewer clients would work against dnsd (and a mirror without a view
	// does not redirect).
	Law string `yaml:"law"`
	// TimeConstant is the time constant of the request rates that the
	// fair-share law reads (default 1s, 100ms..10s): shorter follows a
	// resolver that moves sooner, with more noise (√(r/2τ) on a rate r).
	TimeConstant yamlconf.Duration `yaml:"time_constant"`
	// MaxShare is the largest share of requests redirected (default 0.8, in (0, 1]).
	MaxShare float64 `yaml:"max_share"`
	// MinSize is the smallest file redirected (default 0: any).
	MinSize yamlconf.ByteSize `yaml:"min_size"`
	// Never lists request paths never redirected, each starting with "/"
	// (default ["/"]).
	Never []string `yaml:"never"`
	// Scheme is the scheme of the redirects' Location: http, https, or
	// auto (the default): the request's, https when it came over TLS or a
	// trusted proxy (trusted_proxies) says it did. The scheme's default
	// port (:80, :443) is left out of the Location.
	Scheme string `yaml:"scheme"`
}

// TrustedPrefixes returns trusted_proxies as prefixes (a bare address is
// a prefix of its full length); entries that do not parse are left out
// (ParseConfig refuses them).
func (c *Config) TrustedPrefixes() []netip.Prefix { return prefixes(c.TrustedProxies) }

// ProxyProtocolPrefixes returns proxy_protocol as prefixes, as
// TrustedPrefixes does trusted_proxies.
func (c *Config) ProxyProtocolPrefixes() []netip.Prefix { return prefixes(c.ProxyProtocol) }

// prefixes parses list, leaving out what does not parse.
func prefixes(list []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list {
		if p, err := parsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// parsePrefix parses an address or a prefix, unmapped and masked.
func parsePrefix(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// LoadConfig reads the config file at path and returns it decoded,
// defaulted and validated (see ParseConfig).
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("mirror: read config: %w", err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes data, the YAML text of the config file named file,
// strictly (yamlconf.Decode: unknown keys, YAML tags and more than one
// document are refused), fills in defaults and validates the result.
// Relative paths (root, dnsd.secret's file, geo.mmdb, the handoff sockets)
// are resolved against file's directory. The site section and the back
// ends are checked by frontend.Config.Check. All problems are returned
// together (errors.Join), one per line, each of the form
// "FILE:LINE:COL: KEY.PATH: what"; the geo block and locations are checked as dnsd checks them, with dnsd's errors
// ("FILE:LINE:COL: geo: network 192.0.2.0/24: listed twice").
func ParseConfig(file string, data []byte) (*Config, error) {
	cfg, pos, err := decodeConfig(file, data)
	if err != nil {
		return nil, err
	}
	if err := validateConfig(cfg, pos); err != nil {
		return nil, err
	}
	return cfg, nil
}

// decodeConfig decodes data strictly into a Config (yamlconf.Decode) and
// returns where each key was written.
func decodeConfig(file string, data []byte) (*Config, yamlconf.Positions, error) {
	cfg := &Config{}
	pos, err := yamlconf.Decode(file, data, cfg, retiredKeys...)
	if err != nil {
		return nil, nil, err
	}
	cfg.File = file
	return cfg, pos, nil
}

// validateConfig defaults and validates cfg, decoded from cfg.File with
// its keys at pos, and returns all its problems joined.
func validateConfig(cfg *Config, pos yamlconf.Positions) error {
	v := &validator{c: cfg, dir: filepath.Dir(cfg.File), pos: pos, errs: yamlconf.NewErrors(cfg.File, pos, "mirror")}
	v.validate()
	cfg.Warnings = v.errs.Warnings()
	return v.errs.Err()
}

// validator defaults and validates one Config and collects its errors.
type validator struct {
	c    *Config
	dir  string
	pos  yamlconf.Positions
	errs *yamlconf.Errors
}

// errorf records an error about the value at path (a YAML path such as
// "backends[1].url"), prefixed with where it (or its nearest written
// ancestor) was written and named by its path.
func (v *validator) errorf(path, format string, args ...any) {
	v.errs.KeyErrorf(path, format, args...)
}

// written reports whether the config file has the key at path.
func (v *validator) written(path string) bool { return v.pos.Has(path) }

// resolve returns name relative to the config file's directory.
func (v *validator) resolve(name string) string { return yamlconf.Resolve(v.dir, name) }

func (v *validator) validate() {
	c := v.c
	seen := v.listen()
	v.names()
	v.tls(seen)
	v.dnsd()
	v.acme()
	v.join()
	v.content()
	v.contentIndex()
	v.timeouts()
	v.redirect()
	if !v.written("capacity") {
		c.Capacity = DefaultCapacity
	}
	if !(c.Capacity > 0) || math.IsInf(c.Capacity, 1) {
		v.errorf("capacity", "must be > 0, got %g", c.Capacity)
	}
	if err := c.Bandwidth.Check(); err != nil {
		v.errorf("bandwidth", "%v", err)
	}
	if !v.written("load_window") {
		c.LoadWindow = yamlconf.Duration(probe.DefaultReportWindow)
	}
	if d := c.LoadWindow.D(); d < time.Second || d > 5*time.Minute {
		v.errorf("load_window", "must be in 1s..5m, got %s", d)
	}
	if !v.written("run_queue") {
		c.RunQueue = RunQueueLoadavg
	}
	if !c.RunQueue.valid() {
		v.errorf("run_queue", "must be loadavg, in_flight or none, got %q", c.RunQueue)
	}
	v.location("location", &c.Location)
	v.geo()
	v.proxies()
	if !v.written("max_ranges") {
		c.MaxRanges = serve.DefaultMaxRanges
	} else if c.MaxRanges < 0 {
		v.errorf("max_ranges", "must be >= 0 (0 turns ranges off), got %d", c.MaxRanges)
	}
	// The site section and the back ends are the front end's to check.
	c.Site.Check(v.errs, v.pos, v.dir, c.Backends, c.Root != "")
	if len(c.TLS.Listen) > 0 && len(c.Backends) > 0 {
		v.siteOverTLS()
	}
}

// siteOverTLS checks a front end with tls.listen: handoff can not pass a
// TLS connection, and a redirect to a back end's http public URL would
// downgrade the clients that came over https.
func (v *validator) siteOverTLS() {
	c := v.c
	switch c.Site.Mode {
	case frontend.ModeHandoff:
		v.errorf("site.mode", "handoff passes the clients' TCP connections to the back ends, which can not take a TLS connection: tls.listen needs site.mode proxy or redirect")
	case frontend.ModeRedirect:
		for i, b := range c.Backends {
			if strings.HasPrefix(strings.ToLower(b.PublicURL), "http://") {
				v.errorf(fmt.Sprintf("backends[%d].public_url", i), "%q: with tls.listen, site.mode redirect would send https clients to http; give the back end's https URL", b.PublicURL)
			}
		}
	}
}

// listen checks the public and admin addresses and admin_tls and
// returns the addresses taken (the public ones and admin).
func (v *validator) listen() map[string]bool {
	c := v.c
	if len(c.Listen) == 0 {
		v.errorf("listen", "at least one address is required")
	}
	seen := make(map[string]bool)
	for i, addr := range c.Listen {
		path := fmt.Sprintf("listen[%d]", i)
		if err := yamlconf.CheckHostPort(addr); err != nil {
			v.errorf(path, "%q: %v", addr, err)
			continue
		}
		if seen[addr] && !anyPort(addr) {
			v.errorf(path, "%q is listed twice", addr)
		}
		seen[addr] = true
	}
	if c.Admin != "" {
		if err := yamlconf.CheckHostPort(c.Admin); err != nil {
			v.errorf("admin", "%q: %v", c.Admin, err)
		} else if seen[c.Admin] && !anyPort(c.Admin) {
			v.errorf("admin", "%q is also a public listen address", c.Admin)
		}
		seen[c.Admin] = true
	} else if c.AdminTLS.Enabled() {
		v.errorf("admin_tls", "needs admin (the admin listen address)")
	}
	c.AdminTLS.Check(v.errs, "admin_tls", v.dir)
	if c.AdminTLS.Enabled() {
		c.AdminTLS = c.AdminTLS.Resolve(v.dir)
	}
	c.Limits.Check(v.errs, v.pos, "limits")
	yamlconf.CheckAdminHosts(v.errs, "admin_hosts", c.AdminHosts)
	return seen
}

// anyPort reports whether addr asks for a port picked by the kernel (port
// 0): such addresses never clash with each other.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}

func (v *validator) names() {
	c := v.c
	checkHost := func(key, name string) {
		switch {
		case name == "":
			v.errorf(key, "is required")
		case !group.ValidHostName(name):
			v.errorf(key, "%q is not a host name", name)
		}
	}
	checkHost("group", c.Group)
	checkHost("host", c.Host)
	if c.Group != "" && strings.EqualFold(strings.TrimSuffix(c.Group, "."), strings.TrimSuffix(c.Host, ".")) {
		v.errorf("host", "must differ from group %q (redirects go to member host names)", c.Group)
	}
	switch {
	case c.Member == "":
		v.errorf("member", "is required")
	case !yamlconf.IsMemberName(c.Member):
		v.errorf("member", "%q must match [a-z0-9-]+", c.Member)
	}
}

func (v *validator) dnsd() {
	d := &v.c.DNSD
	if !v.written("dnsd") {
		d.PushInterval = yamlconf.Duration(group.DefaultPushInterval)
		d.ViewInterval = yamlconf.Duration(group.DefaultViewInterval)
		if v.c.Dispatcher {
			v.errorf("dispatcher", "needs dnsd (the group view says where to send clients)")
		}
		return
	}
	switch {
	case d.URL != "" && len(d.URLs) > 0:
		v.errorf("dnsd.urls", "url and urls are mutually exclusive")
	case d.URL != "":
		if err := yamlconf.CheckURL(d.URL); err != nil {
			v.errorf("dnsd.url", "%v", err)
		}
		d.URLs = []string{d.URL}
	case v.written("dnsd.urls") && len(d.URLs) == 0:
		v.errorf("dnsd.urls", "at least one URL is required")
	case len(d.URLs) == 0:
		v.errorf("dnsd.url", "is required (or urls)")
	default:
		seen := make(map[string]bool)
		for i, u := range d.URLs {
			path := fmt.Sprintf("dnsd.urls[%d]", i)
			if err := yamlconf.CheckURL(u); err != nil {
				v.errorf(path, "%v", err)
			} else if key := strings.TrimSuffix(u, "/"); seen[key] {
				v.errorf(path, "%q is listed twice", u)
			} else {
				seen[key] = true
			}
		}
	}
	if !v.written("dnsd.push") {
		d.Push = PushAll
	} else if d.Push != PushAll && d.Push != PushOne {
		v.errorf("dnsd.push", "%q: want all or one", d.Push)
	}
	if d.CAFile != "" {
		if !slices.ContainsFunc(d.URLs, func(u string) bool { return strings.HasPrefix(u, "https://") }) {
			v.errorf("dnsd.ca_file", "is only used with an https url")
		} else if msg := yamlconf.CheckCAFile(v.resolve(d.CAFile), d.CAFile); msg != "" {
			v.errorf("dnsd.ca_file", "%s", msg)
		} else {
			d.CAFile = v.resolve(d.CAFile)
		}
	}
	data, warning, err := d.SecretSource.Read(v.dir)
	if warning != "" {
		v.errs.Warnf("dnsd.secret", "dnsd.secret: %s", warning)
	}
	switch {
	case err != nil:
		v.errorf("dnsd.secret", "%v", err)
	case data == "":
		v.errorf("dnsd", "secret is required (pushes are authenticated): the secret, or {file: PATH}")
	}
	d.Secret = data
	if !v.written("dnsd.push_interval") {
		d.PushInterval = yamlconf.Duration(group.DefaultPushInterval)
	} else if d.PushInterval <= 0 {
		v.errorf("dnsd.push_interval", "must be > 0, got %s", d.PushInterval.D())
	}
	if !v.written("dnsd.view_interval") {
		d.ViewInterval = yamlconf.Duration(group.DefaultViewInterval)
	} else if d.ViewInterval <= 0 {
		v.errorf("dnsd.view_interval", "must be > 0, got %s", d.ViewInterval.D())
	}
}

func (v *validator) join() {
	j := &v.c.Join
	if !j.Enabled {
		if v.written("join") && (len(j.Addresses) > 0 || j.Probe != "" || j.LeaveWait != 0 || j.CheckInterval != 0) {
			v.errorf("join.enabled", "the join settings are written but enabled is not true")
		}
		return
	}
	switch {
	case v.c.Dispatcher:
		v.errorf("join.enabled", "a dispatcher is no member: it can not join")
	case !v.written("dnsd"):
		v.errorf("join.enabled", "needs dnsd (the dnsd to join)")
	}
	if len(j.Addresses) == 0 {
		v.errorf("join.addresses", "at least one address is required")
	}
	seen := make(map[netip.Addr]bool)
	for i, s := range j.Addresses {
		path := fmt.Sprintf("join.addresses[%d]", i)
		a, err := netip.ParseAddr(s)
		switch {
		case err != nil || a.Zone() != "":
			v.errorf(path, "%q is not an IP address", s)
		case seen[a.Unmap()]:
			v.errorf(path, "%q is listed twice", s)
		default:
			seen[a.Unmap()] = true
			j.Addresses[i] = a.Unmap().String()
		}
	}
	if j.Probe != "" {
		if err := yamlconf.CheckURL(j.Probe); err != nil {
			v.errorf("join.probe", "%v", err)
		}
	}
	// LeaveWait stays 0 when left out: the group's ttl.max (group.Joiner).
	switch d := j.LeaveWait.D(); {
	case d == 0 && v.written("join.leave_wait"):
		v.errorf("join.leave_wait", "0s meant the group's ttl.max before this release: leave the key out for it, or write a wait in (0, %s]", group.MaxLeaveWait)
	case d < 0 || d > group.MaxLeaveWait:
		v.errorf("join.leave_wait", "must be in (0, %s] (leave it out for the group's ttl.max), got %s", group.MaxLeaveWait, d)
	}
	if !v.written("join.check_interval") {
		j.CheckInterval = yamlconf.Duration(group.DefaultJoinCheckInterval)
	} else if d := j.CheckInterval.D(); d < time.Second || d > time.Hour {
		v.errorf("join.check_interval", "must be in 1s..1h, got %s", d)
	}
}

func (v *validator) content() {
	c := v.c
	switch {
	case c.Dispatcher && c.Root != "":
		v.errorf("root", "a dispatcher serves no content: root must be absent")
	case c.Dispatcher && len(c.Backends) > 0:
		v.errorf("backends", "a dispatcher serves no content: backends must be absent")
	case c.Root != "" && len(c.Backends) > 0:
		v.errorf("backends", "root and backends are mutually exclusive")
	case c.Root == "" && len(c.Backends) == 0 && !c.Dispatcher:
		v.errorf("root", "one of root and backends is required (or dispatcher: true)")
	}
	if c.Root != "" {
		root := v.resolve(c.Root)
		fi, err := os.Stat(root)
		switch {
		case err != nil:
			v.errorf("root", "cannot use %q: %v", c.Root, yamlconf.WithoutPath(err))
		case !fi.IsDir():
			v.errorf("root", "%q is not a directory", c.Root)
		default:
			v.rootSafe(c.Root, root)
			c.Root = root
		}
	}
	v.trace()
}

// trace checks content.trace: a local path under root.
func (v *validator) trace() {
	c := v.c
	switch t := c.Content.Trace; {
	case t == "" && v.written("content.trace"):
		v.errorf("content.trace", "must not be empty (leave it out for no trace)")
	case t == "":
	case c.Root == "":
		v.errorf("content.trace", "needs root: the trace is a file of the document root")
	case !filepath.IsLocal(filepath.FromSlash(t)):
		v.errorf("content.trace", "%q must be a path relative to root, inside it", t)
	}
	switch g := c.Content.Generation; {
	case g == "" && v.written("content.generation"):
		v.errorf("content.generation", "must not be empty (leave it out for the trace's)")
	case g == "" || (g == GenerationTrace && c.Content.Trace != ""):
	case g == GenerationTrace:
		v.errorf("content.generation", "trace needs content.trace")
	case g == GenerationNewest && c.Content.Trace != "":
		v.errorf("content.generation", "newest excludes content.trace: the trace gives the generation")
	case g == GenerationNewest && !c.Content.Index:
		v.errorf("content.generation", "newest needs content.index: the newest mtime is the index's")
	case g != GenerationNewest:
		v.errorf("content.generation", "%q: want %s or %s", g, GenerationTrace, GenerationNewest)
	}
}

// contentIndex validates the content block: an index needs a document
// root (a site front end's back ends index their own).
func (v *validator) contentIndex() {
	if v.c.Content.Index && v.c.Root == "" {
		v.errorf("content.index", "needs root: only a document root is indexed")
	}
	for i, p := range v.c.Content.InPlace {
		at := fmt.Sprintf("content.in_place[%d]", i)
		switch _, err := path.Match(p, ""); {
		case p == "" || strings.HasPrefix(p, "/"):
			v.errorf(at, "%q: want a path below the root, without a leading /", p)
		case err != nil:
			v.errorf(at, "%q: %v", p, err)
		}
	}
}

// systemDirs are directories that are never a document root: a mirror
// with one of them as root would serve the machine's configuration,
// credentials or kernel interfaces. Under the ones marked beneath, no
// directory is a root either; /usr and /var/lib only as themselves
// (/usr/share/nginx/html and /var/lib/mirror are common homes for content).
var systemDirs = []struct {
	dir     string
	beneath bool
}{
	{"/etc", true}, {"/proc", true}, {"/sys", true}, {"/dev", true}, {"/boot", true},
	{"/root", true}, {"/run", true}, {"/bin", true}, {"/sbin", true}, {"/lib", true},
	{"/usr", false}, {"/var/lib", false},
}

// rootSafe refuses a document root root (resolved, a directory; written
// is how the config wrote it) that
// would serve what must stay private: after filepath.Abs and
// filepath.EvalSymlinks, the file system's root, a system directory
// (systemDirs), or a directory holding the config file, dnsd's secret
// file or CA file, admin_tls's certificate or key, or a key of
// tls.certificates. Each problem is
// an error at root's line.
func (v *validator) rootSafe(written, root string) {
	real := realPath(root)
	if real == string(filepath.Separator) {
		v.errorf("root", "%q is the file system's root: every file of the machine would be served", written)
		return
	}
	for _, sd := range systemDirs {
		for _, dir := range []string{sd.dir, realPath(sd.dir)} {
			if real == dir || sd.beneath && within(dir, real) {
				v.errorf("root", "%q is in the system directory %s: it must not be served", written, sd.dir)
				return
			}
		}
	}
	d := v.c.DNSD
	private := []struct{ key, what, path string }{
		{"", "the config file", v.c.File},
		{"dnsd.secret", "the push secret", d.SecretSource.File},
		{"dnsd.ca_file", "the CA file", d.CAFile},
		{"tls.acme.dir", "the ACME directory (account and certificate keys)", v.c.TLS.ACME.Dir},
		{"admin_tls.cert_file", "the admin TLS certificate", v.c.AdminTLS.CertFile},
		{"admin_tls.key_file", "the admin TLS key", v.c.AdminTLS.KeyFile},
	}
	for i, f := range v.c.TLS.Certificates {
		private = append(private, struct{ key, what, path string }{fmt.Sprintf("tls.certificates[%d].key_file", i), "a TLS key", f.KeyFile})
	}
	for _, p := range private {
		if p.path == "" {
			continue
		}
		name := v.resolve(p.path)
		if _, err := os.Stat(name); err != nil && p.key != "tls.acme.dir" {
			continue // not there, so not served (its own key says why); the ACME directory is made at start
		}
		if within(real, realPath(name)) {
			what := p.what
			if p.key != "" {
				what += " (" + p.key + ")"
			}
			v.errorf("root", "%q holds %s: it would be served", written, what)
		}
	}
}

// realPath is name absolute with its symbolic links resolved, or as
// absolute as it gets when that fails.
func realPath(name string) string {
	if abs, err := filepath.Abs(name); err == nil {
		name = abs
	}
	if real, err := filepath.EvalSymlinks(name); err == nil {
		name = real
	}
	return name
}

// within reports whether name is dir or below it (both clean and
// absolute).
func within(dir, name string) bool {
	rel, err := filepath.Rel(dir, name)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func (v *validator) timeouts() {
	t := &v.c.Timeouts
	positive := func(key string, d *yamlconf.Duration, def time.Duration) {
		path := "timeouts." + key
		if !v.written(path) {
			*d = yamlconf.Duration(def)
		} else if *d <= 0 {
			v.errorf(path, "must be > 0, got %s", d.D())
		}
	}
	offOrPositive := func(key string, d yamlconf.Duration) {
		if d < 0 {
			v.errorf("timeouts."+key, "must be >= 0 (0 is off), got %s", d.D())
		}
	}
	positive("read_header", &t.ReadHeader, serve.DefaultReadHeaderTimeout)
	offOrPositive("read", t.Read)
	offOrPositive("write", t.Write)
	if !v.written("timeouts.send") {
		t.Send = yamlconf.Duration(serve.DefaultSendTimeout)
	} else {
		offOrPositive("send", t.Send)
	}
	positive("idle", &t.Idle, serve.DefaultIdleTimeout)
	positive("shutdown", &t.Shutdown, serve.DefaultShutdownTimeout)
}

func (v *validator) redirect() {
	r := &v.c.Redirect
	if !v.written("redirect.enabled") {
		r.Enabled = true
	} else if !r.Enabled && v.c.Dispatcher {
		v.errorf("redirect.enabled", "a dispatcher only redirects: it can not be false")
	}
	if !v.written("redirect.law") {
		r.Law = group.LawFairShare
	} else if !slices.Contains(group.Laws, r.Law) {
		v.errorf("redirect.law", "unknown law %q (want one of %s)", r.Law, strings.Join(group.Laws, ", "))
	}
	if !v.written("redirect.time_constant") {
		r.TimeConstant = yamlconf.Duration(group.DefaultTimeConstant)
	} else if d := r.TimeConstant.D(); d < 100*time.Millisecond || d > 10*time.Second {
		v.errorf("redirect.time_constant", "%s: want 100ms..10s", d)
	}
	if !v.written("redirect.max_share") {
		r.MaxShare = group.DefaultMaxShare
	}
	if !(r.MaxShare > 0 && r.MaxShare <= 1) {
		v.errorf("redirect.max_share", "must be in (0, 1], got %g", r.MaxShare)
	}
	if !v.written("redirect.scheme") {
		r.Scheme = group.SchemeAuto
	} else if !slices.Contains(group.Schemes, r.Scheme) {
		v.errorf("redirect.scheme", "%q: want one of %s", r.Scheme, strings.Join(group.Schemes, ", "))
	}
	if !v.written("redirect.never") {
		r.Never = []string{"/"}
	}
	for i, p := range r.Never {
		path := fmt.Sprintf("redirect.never[%d]", i)
		if !strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
			v.errorf(path, "%q: want a path starting with / and without .. segments", p)
		}
	}
}

// proxies validates trusted_proxies and proxy_protocol.
func (v *validator) proxies() {
	v.prefixList("trusted_proxies", v.c.TrustedProxies)
	v.prefixList("proxy_protocol", v.c.ProxyProtocol)
}

// prefixList validates list, the addresses and prefixes at key.
func (v *validator) prefixList(key string, list []string) {
	seen := make(map[netip.Prefix]bool)
	for i, s := range list {
		path := fmt.Sprintf("%s[%d]", key, i)
		p, err := parsePrefix(s)
		switch {
		case err != nil:
			v.errorf(path, "%q is not an address or a prefix", s)
		case seen[p]:
			v.errorf(path, "%q is listed twice", s)
		default:
			seen[p] = true
		}
	}
}

// location validates and normalises the location l written at path.
func (v *validator) location(path string, l *yamlconf.Location) { l.Check(v.errs, path, "") }

// geo validates the client location settings, as dnsd does, and resolves
// geo.mmdb.
func (v *validator) geo() { v.c.Geo.MMDB = v.c.Geo.Check(v.errs, "geo", v.dir) }

// ServerOptionsFromConfig returns the serve.ServerOptions that cfg's timeouts
// and limits describe, for handler h; the Logger and Registerer are left to the caller.
func ServerOptionsFromConfig(cfg *Config, h http.Handler) serve.ServerOptions {
	t := cfg.Timeouts
	return serve.ServerOptions{
		Handler:           h,
		ReadHeaderTimeout: t.ReadHeader.D(),
		ReadTimeout:       t.Read.D(),
		WriteTimeout:      t.Write.D(),
		SendTimeout:       t.Send.D(),
		IdleTimeout:       t.Idle.D(),
		MaxHeaderBytes:    int(cfg.Limits.MaxHeaderBytes),
		ShutdownTimeout:   t.Shutdown.D(),
	}
}

// RedirectRulesFromConfig returns the rules that cfg describes. They have
// no watermarks: the Redirector takes the group's from the view
// (RedirectRules.WithWatermarks).
func RedirectRulesFromConfig(cfg *Config) group.RedirectRules {
	r := cfg.Redirect
	return group.RedirectRules{
		Group: cfg.Group, Host: cfg.Host, Dispatcher: cfg.Dispatcher, Enabled: r.Enabled, Law: r.Law,
		MaxShare: r.MaxShare, MinSize: int64(r.MinSize), Never: slices.Clone(r.Never), Scheme: r.Scheme,
		TrustedProxies: cfg.TrustedPrefixes(), InPlace: slices.Clone(cfg.Content.InPlace),
	}
}
