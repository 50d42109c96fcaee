package zones

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestZeroRule: a key left out takes its default; a key written is taken
// as written, and a written 0 is an error naming the key and its range
// unless 0 means off or none for it (health.jitter, server.rrl.slip).
func TestZeroRule(t *testing.T) {
	dir := t.TempDir()
	zone, err := os.ReadFile(filepath.Join("testdata", "good", "example.org.zone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "example.org.zone"), zone, 0o600); err != nil {
		t.Fatal(err)
	}
	const head = "zones: [{origin: example.org, file: example.org.zone}]\n"
	const group = "groups:\n  - name: www.example.org\n    members: [{name: a, host: a.example.org, addresses: [192.0.2.1], capacity: 10%s}]\n"
	tests := []struct {
		name    string
		yaml    string
		wantErr string // "" for none
		warn    string // a warning's substring, "" for none
		check   func(t *testing.T, c *Config)
	}{
		{name: "all left out", yaml: head + strings.Replace(group, "%s", "", 1), check: func(t *testing.T, c *Config) {
			s, g := c.Server, c.Groups[0]
			if s.MaxUDPSize != DefaultMaxUDPSize || s.UDPSockets != 0 || s.RRL.Slip != DefaultRRLSlip || s.RRL.Rate != DefaultRRLRate ||
				g.Answers != DefaultAnswers || g.TTL.Min != DefaultTTLMin || g.TTL.Unseen != DefaultTTLMin ||
				g.Members[0].Weight != DefaultWeight || c.Health.Jitter != c.Health.Interval/10 {
				t.Errorf("defaults not applied: %+v %+v %+v", s, g, c.Health)
			}
		}},
		{name: "udp_sockets 0", yaml: head + "server: {udp_sockets: 0}\n", wantErr: "server: udp_sockets 0 must be in 1..256 (leave it out for one per CPU)"},
		{name: "max_udp_size 0", yaml: head + "server: {max_udp_size: 0}\n", wantErr: "server: max_udp_size 0 must be in 512..4096"},
		{name: "tcp_idle_timeout 0", yaml: head + "server: {tcp_idle_timeout: 0s}\n", wantErr: "server: tcp_idle_timeout 0s must be > 0"},
		{name: "max_tcp_queries 0", yaml: head + "server: {max_tcp_queries: 0}\n", wantErr: "server: max_tcp_queries 0 must be > 0"},
		{name: "rrl rate 0", yaml: head + "server: {rrl: {rate: 0}}\n", wantErr: "server: rrl: rate 0 must be in (0, 1000000]"},
		{name: "rrl window 0", yaml: head + "server: {rrl: {window: 0s}}\n", wantErr: "server: rrl: window 0s must be in (0, 1m]"},
		{name: "rrl table_size 0", yaml: head + "server: {rrl: {table_size: 0}}\n", wantErr: "server: rrl: table_size 0 must be in 64..16777216"},
		{name: "rrl slip 0 is none, with a warning", yaml: head + "server: {rrl: {slip: 0}}\n", warn: "slip 0 meant the default (every 2nd limited response truncated) before this release and means none now: write 2",
			check: func(t *testing.T, c *Config) {
				if c.Server.RRL.Slip != -1 {
					t.Errorf("slip %d, want -1 (none)", c.Server.RRL.Slip)
				}
			}},
		{name: "rrl slip -1 loads, with a warning", yaml: head + "server: {rrl: {slip: -1}}\n", warn: "slip -1 is the old way to write none: write 0"},
		{name: "answers 0", yaml: head + strings.Replace(group, "%s", "", 1) + "    answers: 0\n", wantErr: `group "www.example.org.": answers 0 must be >= 1`},
		{name: "ttl min 0", yaml: head + strings.Replace(group, "%s", "", 1) + "    ttl: {min: 0}\n", wantErr: `group "www.example.org.": ttl min 0 must be >= 1`},
		{name: "ttl unseen 0", yaml: head + strings.Replace(group, "%s", "", 1) + "    ttl: {unseen: 0}\n", wantErr: `group "www.example.org.": ttl unseen 0 must be within [min 20, max 300]`},
		{name: "low_watermark 0", yaml: head + strings.Replace(group, "%s", "", 1) + "    policy: {low_watermark: 0}\n", wantErr: "want 0 < low_watermark (0)"},
		{name: "max_lag 0", yaml: head + strings.Replace(group, "%s", "", 1) + "    max_lag: 0s\n", wantErr: `group "www.example.org.": max_lag 0s must be in 1m0s..8760h0m0s (leave it out for off)`},
		{name: "max_lag 10s", yaml: head + strings.Replace(group, "%s", "", 1) + "    max_lag: 10s\n", wantErr: "max_lag 10s must be in 1m0s..8760h0m0s"},
		{name: "max_lag 1h", yaml: head + strings.Replace(group, "%s", "", 1) + "    max_lag: 1h\n", check: func(t *testing.T, c *Config) {
			if c.Groups[0].MaxLag.D() != time.Hour {
				t.Errorf("max_lag %s, want 1h", c.Groups[0].MaxLag.D())
			}
		}},
		{name: "master without max_lag", yaml: head + strings.Replace(group, "%s", "", 1) + "    master: http://master.example.org/trace\n", wantErr: `group "www.example.org.": master needs max_lag`},
		{name: "master empty", yaml: head + strings.Replace(group, "%s", "", 1) + "    max_lag: 1h\n    master: ''\n", wantErr: "master must not be empty"},
		{name: "master not http", yaml: head + strings.Replace(group, "%s", "", 1) + "    max_lag: 1h\n    master: ftp://master.example.org/trace\n", wantErr: `master "ftp://master.example.org/trace": want an http or https URL`},
		{name: "master with user", yaml: head + strings.Replace(group, "%s", "", 1) + "    max_lag: 1h\n    master: http://u:p@master.example.org/trace\n", wantErr: "master: the URL must not carry user information"},
		{name: "master", yaml: head + strings.Replace(group, "%s", "", 1) + "    max_lag: 1h\n    master: https://master.example.org/debian/project/trace/master\n"},
		{name: "weight 0", yaml: head + strings.Replace(group, "%s", ", weight: 0", 1), wantErr: `member "a": weight 0 must be > 0`},
		{name: "health rise 0", yaml: head + "health: {rise: 0}\n", wantErr: "health: rise 0 must be in 1..100"},
		{name: "health jitter 0 is none", yaml: head + "health: {jitter: 0s}\n", check: func(t *testing.T, c *Config) {
			if c.Health.Jitter != 0 {
				t.Errorf("jitter %s, want 0", c.Health.Jitter.D())
			}
		}},
		{name: "etcd lease_ttl 0", yaml: head + "cluster: {node: a, etcd: {endpoints: ['http://127.0.0.1:2379'], lease_ttl: 0s}}\n", wantErr: "cluster: etcd lease_ttl 0s must be within 2s..5m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse(filepath.Join(dir, "c.yaml"), []byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			set, err := Build(cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			warnings := strings.Join(set.Warnings, "\n")
			if tt.warn == "" && warnings != "" || !strings.Contains(warnings, tt.warn) {
				t.Errorf("warnings %q, want %q", warnings, tt.warn)
			}
			if tt.check != nil {
				tt.check(t, set.Config)
			}
		})
	}
}
