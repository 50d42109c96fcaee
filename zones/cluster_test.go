package zones

import (
	"errors"
	"strings"
	"testing"
)

func TestClusterDefaults(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "example.org.zone", "$ORIGIN example.org.\n@ 300 IN SOA ns1 hostmaster 1 3600 600 604800 60\n@ 300 IN NS ns1\nns1 300 IN A 192.0.2.1\n")
	writeFile(t, dir, "etcd.pass", "s3cret\n")
	tests := []struct {
		name, cluster string
		check         func(t *testing.T, c ClusterConfig)
	}{
		{"absent", "", func(t *testing.T, c ClusterConfig) {
			if c.Enabled() {
				t.Errorf("enabled without a cluster block: %+v", c)
			}
		}},
		{"defaults", "cluster: {etcd: {endpoints: ['http://127.0.0.1:2379']}}\nserver: {nsid: ns1-nsid, identity: ns1.example.org}\n", func(t *testing.T, c ClusterConfig) {
			e := c.Etcd
			if !c.Enabled() || c.Node != "ns1-nsid" || e.Prefix != DefaultEtcdPrefix || e.DialTimeout.D() != DefaultEtcdDialTimeout ||
				e.RequestTimeout.D() != DefaultEtcdRequestTimeout || e.LeaseTTL.D() != DefaultEtcdLeaseTTL || e.TLS() ||
				c.Quorum.Enabled || c.Quorum.DownShare != DefaultQuorumDownShare {
				t.Errorf("cluster = %+v", c)
			}
		}},
		{"node from identity, prefix ends with a slash", "cluster: {etcd: {endpoints: ['https://etcd1:2379'], prefix: /tm/prod}}\nserver: {identity: ns2.example.org}\n", func(t *testing.T, c ClusterConfig) {
			if c.Node != "ns2.example.org" || c.Etcd.Prefix != "/tm/prod/" || !c.Etcd.TLS() {
				t.Errorf("cluster = %+v", c)
			}
		}},
		{"quorum", "cluster: {node: a, etcd: {endpoints: ['http://127.0.0.1:2379']}, quorum: {enabled: true, down_share: 0.6}}\n", func(t *testing.T, c ClusterConfig) {
			if !c.Quorum.Enabled || c.Quorum.DownShare != 0.6 {
				t.Errorf("quorum = %+v", c.Quorum)
			}
		}},
		{"password file", "cluster: {node: a, etcd: {endpoints: ['http://127.0.0.1:2379'], username: dnsd, password: {file: etcd.pass}}}\n", func(t *testing.T, c ClusterConfig) {
			if c.Etcd.Password != "s3cret" {
				t.Errorf("password = %q", c.Etcd.Password)
			}
			if s := c.Etcd.String(); strings.Contains(s, "s3cret") {
				t.Errorf("String shows the password: %s", s)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := writeFile(t, dir, "dnsd.yaml", "zones: [{origin: example.org., file: example.org.zone}]\n"+tt.cluster)
			s, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s.Config.Cluster)
			again, err := Build(s.Config)
			if err != nil {
				t.Fatalf("Build(own output): %v", err)
			}
			if err := RestartChanges(s.Config, again.Config); err != nil {
				t.Errorf("RestartChanges(same) = %v", err)
			}
		})
	}
}

func TestClusterNeedsRestart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "example.org.zone", "$ORIGIN example.org.\n@ 300 IN SOA ns1 hostmaster 1 3600 600 604800 60\n@ 300 IN NS ns1\nns1 300 IN A 192.0.2.1\n")
	load := func(extra string) *Config {
		s, err := Load(writeFile(t, dir, "dnsd.yaml", "zones: [{origin: example.org., file: example.org.zone}]\n"+extra))
		if err != nil {
			t.Fatal(err)
		}
		return s.Config
	}
	cur := load("")
	next := load("cluster: {node: a, etcd: {endpoints: ['http://127.0.0.1:2379'], username: u, password: pw}}\n")
	err := RestartChanges(cur, next)
	if !errors.Is(err, ErrNeedsRestart) || !strings.Contains(err.Error(), "cluster: changed") || strings.Contains(err.Error(), "pw}") {
		t.Errorf("RestartChanges = %v", err)
	}
}
