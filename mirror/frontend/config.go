package frontend

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/scheduler/site"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

// Site modes: how the front end hands a request to the back end it picked.
const (
	// ModeProxy streams the request and the response through the
	// front end (httputil.ReverseProxy); the default.
	ModeProxy = "proxy"
	// ModeRedirect answers 302 to the back end's public_url.
	ModeRedirect = "redirect"
	// ModeHandoff passes the client's TCP connection to a back end
	// process on the same host over its handoff_socket.
	ModeHandoff = "handoff"
)

// Target keys: what names a request's target for the policy
// (site.target_key).
const (
	// TargetKeyPath keys a request on its escaped path only, the
	// default: a file mirror's query does not change the file, and a
	// unique query per request would make a new target of each.
	TargetKeyPath = "path"
	// TargetKeyPathQuery keys it on the path and the query (the request
	// URI), for content that does vary with the query.
	TargetKeyPathQuery = "path_query"
)

// Defaults of the site section.
const (
	// DefaultPolicy is site.policy.name.
	DefaultPolicy = site.LARD
	// DefaultHealthPath is site.health.path.
	DefaultHealthPath = api.HealthyPath
	// DefaultHealthInterval is site.health.interval.
	DefaultHealthInterval = 2 * time.Second
	// DefaultHealthTimeout is site.health.timeout.
	DefaultHealthTimeout = time.Second
	// DefaultHealthRise is site.health.rise.
	DefaultHealthRise = 2
	// DefaultHealthFall is site.health.fall.
	DefaultHealthFall = 3
	// DefaultPassiveErrors is site.health.passive_errors.
	DefaultPassiveErrors = 5
	// DefaultCacheMemory is site.cache.memory.
	DefaultCacheMemory = 256 << 20
	// DefaultCacheMaxObject is site.cache.max_object.
	DefaultCacheMaxObject = 1 << 20
	// DefaultWeight is backends[].weight.
	DefaultWeight = 1
)

// Backend is one back end of the site front end (an entry of backends
// in mirror.yaml).
type Backend struct {
	// Name is the back end's unique name.
	Name string `yaml:"name"`
	// URL is the back end's base URL, http or https.
	URL string `yaml:"url"`
	// Weight is its static weight (default 1, >= 0).
	Weight float64 `yaml:"weight"`
	// Memory is the size of its memory cache, e.g. 8GiB.
	Memory yamlconf.ByteSize `yaml:"memory"`
	// PublicURL is where clients reach it directly (site.mode redirect).
	PublicURL string `yaml:"public_url"`
	// HandoffSocket is its Unix socket for connection handoff (site.mode
	// handoff), relative to the config file's directory.
	HandoffSocket string `yaml:"handoff_socket"`
	// Bandwidth is what its uplink carries (1Gbit/s, 100MB/s); 0 or absent
	// for no limit. The policies then see a back end that sends at its
	// bandwidth as loaded as one with t_high requests in flight per unit
	// of weight.
	Bandwidth yamlconf.Bandwidth `yaml:"bandwidth"`
	// AdminURL is its admin server's base URL: the front end fetches the
	// back end's report there (api.SiteReport) every health interval, for
	// its cache's real size and, in redirect mode, its in-flight requests
	// and completions. Required in redirect mode by the policies that
	// read loads or sizes.
	AdminURL string `yaml:"admin_url"`
}

// Config is the site section of mirror.yaml. Policy, Mode and Health
// are the front end's (a mirror with backends); Cache is the back end's
// (a mirror with a root). Sections of the other role are defaulted and
// validated but unused.
type Config struct {
	// Policy picks the back end of each request.
	Policy PolicyConfig `yaml:"policy"`
	// Mode is proxy (default), redirect or handoff.
	Mode string `yaml:"mode"`
	// TargetKey is what the policy sees as a request's target (its
	// Request.Key): TargetKeyPath (the default) or TargetKeyPathQuery.
	TargetKey string `yaml:"target_key"`
	// Health configures the active and passive health checks of back ends.
	Health HealthConfig `yaml:"health"`
	// Admission bounds the requests in flight over all back ends and
	// queues the rest (proxy and handoff modes).
	Admission AdmissionConfig `yaml:"admission"`
	// Content says the back ends hold different files: the front end
	// routes a request only to the back ends whose content index holds its
	// file (see content.go). It needs each back end's admin_url, and
	// content.index on the back ends; a back end whose index is not known
	// is taken to hold everything.
	Content bool `yaml:"content"`
	// Cache is the back-end role's memory cache in front of the root.
	Cache CacheConfig `yaml:"cache"`
	// HandoffSocket is, for a back end (a mirror with root), the Unix
	// socket on which it takes connections handed off by a front end in
	// handoff mode (see ListenHandoff), relative to the config file's
	// directory; "" for none. The front end's backends[].handoff_socket
	// names the same path.
	HandoffSocket string `yaml:"handoff_socket"`
}

// AdmissionConfig is LARD's admission limit: at most Limit requests in
// flight over all back ends; the next ones wait, in arrival order, for
// one to complete.
type AdmissionConfig struct {
	// Limit is the bound. Left out, it is LARD's S = (n−1)·t_high +
	// t_low − 1 for n back ends (the sum of their weights) with lard,
	// lard-r and tb-ccrd, and no bound with the other policies (Limit
	// stays 0 for that); -1 is no bound. A written 0 is an error: it
	// meant LARD's S before, and reading it as "no limit", as 0 reads
	// elsewhere, would take the bound away without a word.
	Limit int `yaml:"limit"`
	// Queue is how many requests may wait (default 4096); the next one
	// gets 503 with Retry-After.
	Queue int `yaml:"queue"`
	// MaxWait is how long a request waits at most (default 10s), then 503.
	MaxWait yamlconf.Duration `yaml:"max_wait"`
}

// PolicyConfig names a policy of scheduler/site and sets its
// parameters. An absent parameter takes the policy's default (see
// site.DefaultParams); a written one must be > 0, but forward_cost may
// be 0, its default.
type PolicyConfig struct {
	// Name is one of wrr, least-conn, client-hash, lard (default), lard-r,
	// ward, tb-ccrd, chbl.
	Name string `yaml:"name"`
	// TLow and THigh are LARD's load thresholds (lard, lard-r, tb-ccrd).
	TLow  float64 `yaml:"t_low"`
	THigh float64 `yaml:"t_high"`
	// MaxTargets bounds the target tables (lard, lard-r, tb-ccrd).
	MaxTargets int `yaml:"max_targets"`
	// ReplicaHold is LARD/R's K.
	ReplicaHold yamlconf.Duration `yaml:"replica_hold"`
	// WardInterval is how often ward re-plans its core.
	WardInterval yamlconf.Duration `yaml:"ward_interval"`
	// ForwardCost is ward's relative cost of forwarding, for the paper's
	// architecture in which back ends forward to each other; leave it out
	// (0) for this front end, which dispatches every request.
	ForwardCost float64 `yaml:"forward_cost"`
	// WardBalance is ward's s: a back end may carry s times its fair
	// share before ward copies a hot file to every back end (> 1).
	WardBalance float64 `yaml:"ward_balance"`
	// SketchEntries is the number of files ward counts.
	SketchEntries int `yaml:"sketch_entries"`
	// MaxObjectBytes is the largest object tb-ccrd models as cached; keep
	// it equal to the back ends' site.cache.max_object.
	MaxObjectBytes yamlconf.ByteSize `yaml:"max_object"`
	// BalanceFactor is chbl's c (>= 1).
	BalanceFactor float64 `yaml:"balance_factor"`
	// VirtualNodes is chbl's ring points per unit of weight.
	VirtualNodes int `yaml:"virtual_nodes"`
	// PrefixV4 and PrefixV6 are client-hash's prefix lengths, and the
	// client networks of the target budget.
	PrefixV4 int `yaml:"prefix_v4"`
	PrefixV6 int `yaml:"prefix_v6"`
	// ClientTargets and ClientWindow bound the new targets that one
	// client network adds to lard's and lard-r's tables (default 100 per
	// 1s); see site.LARD.
	ClientTargets int               `yaml:"client_targets"`
	ClientWindow  yamlconf.Duration `yaml:"client_window"`
}

// Params returns the policy parameters as scheduler/site takes them.
func (p PolicyConfig) Params() site.Params {
	return site.Params{
		TLow:           p.TLow,
		THigh:          p.THigh,
		MaxTargets:     p.MaxTargets,
		ReplicaHold:    p.ReplicaHold.D(),
		WardInterval:   p.WardInterval.D(),
		ForwardCost:    p.ForwardCost,
		WardBalance:    p.WardBalance,
		SketchEntries:  p.SketchEntries,
		MaxObjectBytes: int64(p.MaxObjectBytes),
		BalanceFactor:  p.BalanceFactor,
		VirtualNodes:   p.VirtualNodes,
		PrefixV4:       p.PrefixV4,
		PrefixV6:       p.PrefixV6,
		ClientTargets:  p.ClientTargets,
		ClientWindow:   p.ClientWindow.D(),
	}
}

// HealthConfig configures the health checks of back ends: an active
// GET of Path on each back end's url every Interval, with rise/fall
// hysteresis, plus passive counting of failed proxied requests.
type HealthConfig struct {
	// Path is requested on each back end's url (default /-/healthy); any
	// 2xx answer is a success.
	Path string `yaml:"path"`
	// Interval is the time between checks of one back end (default 2s).
	Interval yamlconf.Duration `yaml:"interval"`
	// Timeout bounds one check (default 1s). Checks of one back end never
	// overlap: a slow one delays the next.
	Timeout yamlconf.Duration `yaml:"timeout"`
	// Rise is the consecutive successes that bring a down back end up
	// (default 2).
	Rise int `yaml:"rise"`
	// Fall is the consecutive failed checks that take it down (default 3).
	Fall int `yaml:"fall"`
	// PassiveErrors is the consecutive failed requests (connection
	// refused, reset, timed out) that take it down (default 5; 0 turns
	// passive checks off).
	PassiveErrors int `yaml:"passive_errors"`
}

// CacheConfig is the back-end role's memory cache (mirror.Cache). It is
// here with the rest of the site section, which is one block of the
// config file validated in one place (Check refuses it on a front end),
// and because tb-ccrd's site.policy.max_object models the same cache (one
// name for both).
type CacheConfig struct {
	// Memory is the cache's size (default 256MiB; 0 turns it off).
	Memory yamlconf.ByteSize `yaml:"memory"`
	// MaxObject is the largest file cached (default 1MiB, > 0).
	MaxObject yamlconf.ByteSize `yaml:"max_object"`
	// MissDelayPerMiB is a test and benchmark knob, not a key of the
	// config file: a cache miss sleeps this long per MiB of the file
	// before serving it, to stand in for a disk that the page cache of a
	// test machine hides; misses take turns, as on one disk (0: off).
	// cmd/mirror sets it from its -bench-miss-delay-per-mib flag.
	MissDelayPerMiB yamlconf.Duration `yaml:"-"`
}

// Check defaults and validates c, the site section of a mirror config
// (key "site"), and backends, its back ends (key "backends"), as written
// at pos in a config file in the directory dir; hasRoot says whether the
// mirror serves a document root (the back-end role). Each problem goes
// to errs, named by its key path ("site.policy.t_high: ...",
// "backends[0].public_url: ..."). Relative handoff sockets are resolved
// against dir. What the mirror's roles say of backends as a whole (root
// and backends are mutually exclusive) is the caller's to check.
func (c *Config) Check(errs *yamlconf.Errors, pos yamlconf.Positions, dir string, backends []Backend, hasRoot bool) {
	v := &checker{c: c, backends: backends, hasRoot: hasRoot, dir: dir, pos: pos, errs: errs}
	v.backendList()
	v.site()
}

// checker defaults and validates one site section and its back ends.
type checker struct {
	c        *Config
	backends []Backend
	hasRoot  bool
	dir      string
	pos      yamlconf.Positions
	errs     *yamlconf.Errors
}

func (v *checker) errorf(path, format string, args ...any) {
	v.errs.KeyErrorf(path, format, args...)
}

func (v *checker) written(path string) bool { return v.pos.Has(path) }

func (v *checker) resolve(name string) string { return yamlconf.Resolve(v.dir, name) }

// backendList checks each back end's name, url and weight.
func (v *checker) backendList() {
	names := make(map[string]bool)
	for i := range v.backends {
		b := &v.backends[i]
		path := fmt.Sprintf("backends[%d]", i)
		switch {
		case b.Name == "":
			v.errorf(path+".name", "is required")
		case names[b.Name]:
			v.errorf(path+".name", "%q is listed twice", b.Name)
		}
		names[b.Name] = true
		if b.URL == "" {
			v.errorf(path+".url", "is required")
		} else if err := yamlconf.CheckURL(b.URL); err != nil {
			v.errorf(path+".url", "%v", err)
		}
		if !v.written(path + ".weight") {
			b.Weight = DefaultWeight
		}
		if !(b.Weight >= 0) || math.IsInf(b.Weight, 1) {
			v.errorf(path+".weight", "must be >= 0, got %g", b.Weight)
		}
	}
}

// site defaults and validates the site section and the back ends'
// site-specific keys.
func (v *checker) site() {
	s := v.c
	v.sitePolicy()
	if !v.written("site.mode") {
		s.Mode = ModeProxy
	}
	switch s.Mode {
	case ModeProxy, ModeRedirect, ModeHandoff:
	default:
		v.errorf("site.mode", "%q: want one of proxy, redirect, handoff", s.Mode)
	}
	if !v.written("site.target_key") {
		s.TargetKey = TargetKeyPath
	}
	switch s.TargetKey {
	case TargetKeyPath, TargetKeyPathQuery:
	default:
		v.errorf("site.target_key", "%q: want path or path_query", s.TargetKey)
	}
	for i := range v.backends {
		b := &v.backends[i]
		path := fmt.Sprintf("backends[%d]", i)
		switch {
		case b.PublicURL != "":
			if err := yamlconf.CheckURL(b.PublicURL); err != nil {
				v.errorf(path+".public_url", "%v", err)
			}
		case s.Mode == ModeRedirect:
			v.errorf(path+".public_url", "is required by site.mode redirect")
		}
		switch {
		case b.HandoffSocket != "":
			b.HandoffSocket = v.resolve(b.HandoffSocket)
		case s.Mode == ModeHandoff:
			v.errorf(path+".handoff_socket", "is required by site.mode handoff")
		}
		if err := b.Bandwidth.Check(); err != nil {
			v.errorf(path+".bandwidth", "%v", err)
		}
		if b.AdminURL != "" {
			if err := yamlconf.CheckURL(b.AdminURL); err != nil {
				v.errorf(path+".admin_url", "%v", err)
			}
		} else if s.Content {
			v.errorf(path+".admin_url", "is required by site.content: the front end reads the back end's content index there")
		} else if s.Mode == ModeRedirect && blindInRedirect(s.Policy.Name) {
			v.errorf(path+".admin_url", "is required by policy %s in site.mode redirect: the front end sees no request after its 302, so loads and sizes come from the back end's reports", s.Policy.Name)
		}
		if (s.Policy.Name == site.TBCCRD || s.Policy.Name == site.WARD) && b.Memory <= 0 && b.AdminURL == "" {
			v.errorf(path+".memory", "is required by policy %s without admin_url (it models the back ends' caches)", s.Policy.Name)
		}
	}
	v.siteHealth()
	v.siteAdmission()
	v.siteCache()
	if s.Content && (v.hasRoot || len(v.backends) == 0) {
		v.errorf("site.content", "is for a front end (a mirror with backends)")
	}
	if s.HandoffSocket != "" {
		if !v.hasRoot {
			v.errorf("site.handoff_socket", "is for a back end (a mirror with root)")
		}
		s.HandoffSocket = v.resolve(s.HandoffSocket)
	}
}

// blindInRedirect reports whether policy reads in-flight counts or
// response sizes, which redirect mode only has from back-end reports.
func blindInRedirect(policy string) bool {
	switch policy {
	case site.WRR, site.ClientHash:
		return false
	}
	return true
}

func (v *checker) sitePolicy() {
	p := &v.c.Policy
	if !v.written("site.policy.name") {
		if v.written("site.policy") {
			v.errorf("site.policy.name", "is required")
		}
		p.Name = DefaultPolicy
	}
	// One rule for zero: a written 0 is an error (leave the key out for
	// the policy's default); forward_cost, where 0 is no forwarding, is
	// apart (forwardCost).
	for key, zero := range map[string]bool{
		"t_low": p.TLow == 0, "t_high": p.THigh == 0, "max_targets": p.MaxTargets == 0,
		"replica_hold": p.ReplicaHold == 0, "ward_interval": p.WardInterval == 0,
		"ward_balance": p.WardBalance == 0, "sketch_entries": p.SketchEntries == 0,
		"max_object": p.MaxObjectBytes == 0, "balance_factor": p.BalanceFactor == 0,
		"virtual_nodes": p.VirtualNodes == 0, "prefix_v4": p.PrefixV4 == 0, "prefix_v6": p.PrefixV6 == 0,
		"client_targets": p.ClientTargets == 0, "client_window": p.ClientWindow == 0,
	} {
		if zero && v.written("site.policy."+key) {
			v.errorf("site.policy."+key, "must not be 0 (leave it out for the default)")
		}
	}
	v.forwardCost(p)
	_, err := site.New(p.Name, p.Params(), rand.New(rand.NewPCG(0, 0)))
	switch {
	case err == nil:
	case errors.Is(err, site.ErrUnknownPolicy):
		v.errorf("site.policy.name", "%q: want one of %s", p.Name, strings.Join(site.Names(), ", "))
	default:
		// The joined parameter errors read "site: bad parameters: t_low
		// -1 must be positive"; put each at its key.
		for _, e := range unjoin(errors.Unwrap(err)) {
			msg := e.Error()
			if _, rest, ok := strings.Cut(msg, site.ErrBadParams.Error()+": "); ok {
				msg = rest
			}
			key, _, _ := strings.Cut(msg, " ")
			v.errorf("site.policy."+key, "%s", msg)
		}
	}
}

// forwardCost warns of a written forward_cost > 0, whose meaning changed:
// it was ward's cost of this front end forwarding a request (0.1 in the
// reference of earlier releases), and now models back ends that forward
// to each other (the paper's architecture), which a front end that
// dispatches every request is not. An old config that kept the number
// selects the other model without a word; the config still loads.
func (v *checker) forwardCost(p *PolicyConfig) {
	const key = "site.policy.forward_cost"
	if v.written(key) && p.ForwardCost > 0 {
		v.errs.Warnf(key, "%s: %g models back ends that forward to each other (the paper's architecture); before, it was the cost of this front end forwarding a request: leave it out (or write 0) for this front end", key, p.ForwardCost)
	}
}

// unjoin returns the errors that errors.Join put together, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

func (v *checker) siteHealth() {
	h := &v.c.Health
	if !v.written("site.health.path") {
		h.Path = DefaultHealthPath
	} else if !strings.HasPrefix(h.Path, "/") {
		v.errorf("site.health.path", "%q: want a path starting with /", h.Path)
	}
	positive := func(key string, d *yamlconf.Duration, def time.Duration) {
		if !v.written("site.health." + key) {
			*d = yamlconf.Duration(def)
		} else if *d <= 0 {
			v.errorf("site.health."+key, "must be > 0, got %s", d.D())
		}
	}
	positive("interval", &h.Interval, DefaultHealthInterval)
	positive("timeout", &h.Timeout, DefaultHealthTimeout)
	count := func(key string, n *int, def, least int) {
		if !v.written("site.health." + key) {
			*n = def
		} else if *n < least {
			v.errorf("site.health."+key, "must be >= %d, got %d", least, *n)
		}
	}
	count("rise", &h.Rise, DefaultHealthRise, 1)
	count("fall", &h.Fall, DefaultHealthFall, 1)
	count("passive_errors", &h.PassiveErrors, DefaultPassiveErrors, 0)
}

func (v *checker) siteAdmission() {
	a := &v.c.Admission
	switch {
	case a.Limit < -1:
		v.errorf("site.admission.limit", "must be -1 (none) or > 0 (leave it out for LARD's), got %d", a.Limit)
	case a.Limit == 0 && v.written("site.admission.limit"):
		v.errorf("site.admission.limit", "0 meant LARD's limit (n−1)·t_high + t_low − 1 before this release: leave the key out for it, write -1 for none or a number > 0")
	}
	if !v.written("site.admission.queue") {
		a.Queue = DefaultAdmissionQueue
	} else if a.Queue < 0 {
		v.errorf("site.admission.queue", "must be >= 0, got %d", a.Queue)
	}
	if !v.written("site.admission.max_wait") {
		a.MaxWait = yamlconf.Duration(DefaultAdmissionMaxWait)
	} else if a.MaxWait <= 0 {
		v.errorf("site.admission.max_wait", "must be > 0, got %s", a.MaxWait.D())
	}
	if v.c.Mode == ModeRedirect && v.written("site.admission.limit") && a.Limit > 0 {
		v.errorf("site.admission.limit", "does not apply to site.mode redirect (the front end is done with a request once the 302 is written)")
	}
}

func (v *checker) siteCache() {
	c := &v.c.Cache
	if v.written("site.cache") && !v.hasRoot && len(v.backends) > 0 {
		v.errorf("site.cache", "is for a back end (a mirror with root), not a front end")
	}
	if !v.written("site.cache.memory") {
		c.Memory = DefaultCacheMemory
	}
	if !v.written("site.cache.max_object") {
		c.MaxObject = DefaultCacheMaxObject
	} else if c.MaxObject <= 0 {
		v.errorf("site.cache.max_object", "must be > 0")
	}
}
