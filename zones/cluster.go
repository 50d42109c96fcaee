package zones

import (
	"cmp"
	"fmt"
	"github.com/transmirror/transmirror/zones/yamlconf"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults of the cluster block.
const (
	// DefaultEtcdPrefix is the key prefix of a deployment in etcd.
	DefaultEtcdPrefix = "/transmirror/"
	// DefaultEtcdDialTimeout bounds connecting to an etcd endpoint.
	DefaultEtcdDialTimeout = 2 * time.Second
	// DefaultEtcdRequestTimeout bounds one request to etcd (a membership
	// change waits at most this long before it is refused).
	DefaultEtcdRequestTimeout = 2 * time.Second
	// DefaultEtcdLeaseTTL is the lifetime of a node's lease in etcd, which
	// its shared load reports and its presence hang on.
	DefaultEtcdLeaseTTL = 10 * time.Second
	// DefaultQuorumDownShare is the share of the live nodes that must see
	// a member down, and be more than, for quorum to take it out.
	DefaultQuorumDownShare = 0.5
	// DefaultPendingInterval is how often a node shares the pending load
	// of its answers with the other nodes.
	DefaultPendingInterval = 250 * time.Millisecond
)

// ClusterConfig makes this dnsd one node of an NS set whose run-time
// membership, drains and pushed load reports are shared through etcd.
// Absent (the default), dnsd is a single node and keeps them in its
// state file. A change of it needs a restart.
type ClusterConfig struct {
	// Node is this dnsd's name in the NS set, unique in it (default
	// server.nsid, else server.identity, else the host name).
	Node string `yaml:"node"`
	// Etcd is the store the nodes share.
	Etcd EtcdConfig `yaml:"etcd"`
	// Quorum, when enabled, takes a member out of the answers only when
	// enough of the nodes see it down (off by default: each node serves
	// its own probes' view).
	Quorum QuorumConfig `yaml:"quorum"`
	// PendingInterval is how often this node shares with the others the
	// pending load of the answers it gave (the hidden load that the
	// members' reports do not show yet), so that each node's picks count
	// every node's answers (default 250ms, 50ms..10s).
	PendingInterval Duration `yaml:"pending_interval"`
}

// QuorumConfig is the multi-vantage health check of an NS set: every node
// shares its view of each member, and a member is down only when more
// than DownShare of the live nodes (those present in etcd) see it down.
// While etcd can not be reached each node serves its own view.
type QuorumConfig struct {
	// Enabled turns quorum on (default off).
	Enabled bool `yaml:"enabled"`
	// DownShare is the share of the live nodes, within (0,1), that a
	// member's down votes must exceed (default 0.5: a strict majority).
	DownShare float64 `yaml:"down_share"`
}

// Enabled reports whether the cluster block asks for a shared store.
func (c ClusterConfig) Enabled() bool { return len(c.Etcd.Endpoints) > 0 }

// EtcdConfig is how dnsd talks to etcd (API v3).
type EtcdConfig struct {
	// Endpoints are the client URLs of the etcd members
	// (http://host:port, https://host:port).
	Endpoints []string `yaml:"endpoints"`
	// Prefix is where this deployment's keys live (default
	// DefaultEtcdPrefix); deployments sharing an etcd use different ones.
	Prefix string `yaml:"prefix"`
	// CAFile verifies the etcd servers' certificates (default: the
	// system's roots); CertFile and KeyFile are this node's client
	// certificate, both or neither. Relative to the config file.
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// Username and Password authenticate to etcd (its auth). Build sets
	// Password from PasswordSource when the file has password.
	Username string `yaml:"username"`
	Password string `yaml:"-"`
	// PasswordSource is password as written: the password, or
	// {file: PATH} relative to the config file's directory.
	PasswordSource yamlconf.Secret `yaml:"password"`
	// DialTimeout bounds connecting (default 2s).
	DialTimeout Duration `yaml:"dial_timeout"`
	// RequestTimeout bounds one request (default 2s).
	RequestTimeout Duration `yaml:"request_timeout"`
	// LeaseTTL is the lifetime of this node's lease (default 10s, 2s..5m):
	// its shared load reports and its entry in the node list go when it
	// has not renewed the lease for that long.
	LeaseTTL Duration `yaml:"lease_ttl"`
}

// TLS reports whether the etcd connection uses TLS.
func (e EtcdConfig) TLS() bool {
	if e.CAFile != "" || e.CertFile != "" {
		return true
	}
	for _, ep := range e.Endpoints {
		if strings.HasPrefix(ep, "https://") {
			return true
		}
	}
	return false
}

// String returns the block as %+v shows it, with the password redacted.
func (e EtcdConfig) String() string {
	type plain EtcdConfig
	p := plain(e)
	p.Password = redact(p.Password)
	return fmt.Sprintf("%+v", p)
}

// cluster defaults and validates the cluster block.
func (b *builder) cluster() {
	c := &b.c.Cluster
	if !b.written("cluster") && !c.Enabled() {
		return
	}
	e := &c.Etcd
	if len(e.Endpoints) == 0 {
		b.errorf("cluster", "cluster: etcd.endpoints: at least one etcd client URL is required")
		return
	}
	b.clusterNode(c)
	b.etcdEndpoints(e)
	if e.Prefix == "" {
		e.Prefix = DefaultEtcdPrefix
	}
	if !strings.HasPrefix(e.Prefix, "/") || strings.ContainsAny(e.Prefix, " \t\n") {
		b.errorf("cluster.etcd.prefix", "cluster: etcd prefix %q: want a key path starting with /", e.Prefix)
	}
	if !strings.HasSuffix(e.Prefix, "/") {
		e.Prefix += "/"
	}
	b.etcdFiles(e)
	b.etcdTimes(e)
	yamlconf.Default(b.c.pos, "cluster.pending_interval", &c.PendingInterval, Duration(DefaultPendingInterval))
	if d := c.PendingInterval.D(); d < 50*time.Millisecond || d > 10*time.Second {
		b.errorf("cluster.pending_interval", "cluster: pending_interval %s must be within 50ms..10s", d)
	}
	q := &c.Quorum
	yamlconf.Default(b.c.pos, "cluster.quorum.down_share", &q.DownShare, DefaultQuorumDownShare)
	if !(q.DownShare > 0 && q.DownShare < 1) {
		b.errorf("cluster.quorum.down_share", "cluster: quorum down_share %g must be within (0,1), both excluded", q.DownShare)
	}
}

// clusterNode defaults the node's name (the NSID, the identity, the host
// name) and checks it.
func (b *builder) clusterNode(c *ClusterConfig) {
	if c.Node == "" {
		c.Node = cmp.Or(b.c.Server.NSID, b.c.Server.Identity)
	}
	if c.Node == "" {
		if h, err := os.Hostname(); err == nil {
			c.Node = h
		}
	}
	if c.Node == "" || strings.ContainsAny(c.Node, "/ \t\n") || len(c.Node) > 255 {
		b.errorf("cluster.node", "cluster: node %q: want a name without slashes or white space, at most 255 bytes", c.Node)
	}
}

// etcdEndpoints checks the etcd client URLs: http or https, a host and a
// port only, each once.
func (b *builder) etcdEndpoints(e *EtcdConfig) {
	seen := map[string]bool{}
	for i, ep := range e.Endpoints {
		path := fmt.Sprintf("cluster.etcd.endpoints[%d]", i)
		u, err := url.Parse(ep)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "":
			b.errorf(path, "cluster: etcd endpoint %q: want http://host:port or https://host:port", ep)
		case u.User != nil || (u.Path != "" && u.Path != "/"):
			b.errorf(path, "cluster: etcd endpoint %q: a host and port only (credentials go in username/password)", ep)
		case seen[ep]:
			b.errorf(path, "cluster: etcd endpoint %q: listed twice", ep)
		}
		seen[ep] = true
	}
}

// etcdFiles resolves and checks the TLS files and reads the password file.
func (b *builder) etcdFiles(e *EtcdConfig) {
	for _, f := range []struct {
		key  string
		file *string
	}{{"ca_file", &e.CAFile}, {"cert_file", &e.CertFile}, {"key_file", &e.KeyFile}} {
		if *f.file == "" {
			continue
		}
		r := b.resolve(*f.file)
		if _, err := os.Stat(r); err != nil {
			b.errorf("cluster.etcd."+f.key, "cluster: etcd %s: %v", f.key, err)
		}
		*f.file = r
	}
	if (e.CertFile == "") != (e.KeyFile == "") {
		b.errorf("cluster.etcd", "cluster: etcd cert_file and key_file go together")
	}
	b.secret("cluster.etcd.password", "cluster: etcd password", e.PasswordSource, &e.Password)
	if e.Password != "" && e.Username == "" {
		b.errorf("cluster.etcd.username", "cluster: etcd username is required with a password")
	}
}

// etcdTimes defaults and bounds the dial and request timeouts and the
// lease's time to live.
func (b *builder) etcdTimes(e *EtcdConfig) {
	for _, d := range []struct {
		key      string
		v        *Duration
		def      time.Duration
		min, max time.Duration
	}{
		{"dial_timeout", &e.DialTimeout, DefaultEtcdDialTimeout, 10 * time.Millisecond, time.Minute},
		{"request_timeout", &e.RequestTimeout, DefaultEtcdRequestTimeout, 10 * time.Millisecond, time.Minute},
		{"lease_ttl", &e.LeaseTTL, DefaultEtcdLeaseTTL, 2 * time.Second, 5 * time.Minute},
	} {
		yamlconf.Default(b.c.pos, "cluster.etcd."+d.key, d.v, Duration(d.def))
		if d.v.D() < d.min || d.v.D() > d.max {
			b.errorf("cluster.etcd."+d.key, "cluster: etcd %s %s must be within %s..%s", d.key, d.v.D(), d.min, d.max)
		}
	}
	if e.LeaseTTL.D()%time.Second != 0 {
		b.errorf("cluster.etcd.lease_ttl", "cluster: etcd lease_ttl %s: etcd counts whole seconds", e.LeaseTTL.D())
	}
}
