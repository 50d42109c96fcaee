package frontend

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/zones/yamlconf"
)

// siteFile is the part of mirror.yaml that Check is about.
type siteFile struct {
	Root     string    `yaml:"root"`
	Backends []Backend `yaml:"backends"`
	Site     Config    `yaml:"site"`
}

// parse decodes data as the config file named file and checks its site
// section and back ends as the mirror does.
func parse(file string, data []byte) (*siteFile, error) {
	var f siteFile
	pos, err := yamlconf.Decode(file, data, &f)
	if err != nil {
		return nil, err
	}
	errs := yamlconf.NewErrors(file, pos, "mirror")
	f.Site.Check(errs, pos, filepath.Dir(file), f.Backends, f.Root != "")
	return &f, errs.Err()
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	fe := "backends:\n  - {name: b1, url: 'http://10.0.0.1:8080', memory: 1GiB}\n"
	tests := []struct {
		name string
		yaml string
		want string // "" means valid
	}{
		{"no site section", fe, ""},
		{"full", fe + "site:\n  policy: {name: chbl, balance_factor: 1.5, virtual_nodes: 50}\n  mode: proxy\n  health: {path: /ping, interval: 5s, timeout: 2s, rise: 1, fall: 2, passive_errors: 0}\n", ""},
		{"unknown policy", fe + "site:\n  policy: {name: fastest}\n", "mirror.yaml:4:12: site.policy.name: \"fastest\": want one of wrr, least-conn"},
		{"policy without name", fe + "site:\n  policy: {t_low: 5}\n", "site.policy.name: is required"},
		{"bad parameter", fe + "site:\n  policy:\n    name: lard\n    t_low: 50\n    t_high: 10\n", "mirror.yaml:7:5: site.policy.t_high: t_high 10 must be above t_low 50"},
		{"written zero", fe + "site:\n  policy: {name: lard, t_low: 0}\n", "site.policy.t_low: must not be 0"},
		{"unknown param", fe + "site:\n  policy: {name: lard, t_lo: 5}\n", "site.policy.t_lo: unknown field"},
		{"bad mode", fe + "site: {mode: dsr}\n", "mirror.yaml:3:8: site.mode: \"dsr\": want one of proxy, redirect, handoff"},
		{"target_key path", fe + "site: {target_key: path}\n", ""},
		{"target_key path_query", fe + "site: {target_key: path_query}\n", ""},
		{"bad target_key", fe + "site: {target_key: query}\n", "mirror.yaml:3:8: site.target_key: \"query\": want path or path_query"},
		{"empty target_key", fe + "site: {target_key: ''}\n", "site.target_key: \"\": want path or path_query"},
		{"client budget", fe + "site: {policy: {name: lard, client_targets: 10, client_window: 5s}}\n", ""},
		{"client_targets 0", fe + "site: {policy: {name: lard, client_targets: 0}}\n", "site.policy.client_targets: must not be 0"},
		{"client_targets negative", fe + "site: {policy: {name: lard, client_targets: -3}}\n", "site.policy.client_targets: client_targets -3 must be in [1,"},
		{"client_window negative", fe + "site: {policy: {name: lard-r, client_window: -1s}}\n", "site.policy.client_window: client_window -1s must not be negative"},
		{"redirect needs public_url", fe + "site: {mode: redirect}\n", "mirror.yaml:2:6: backends[0].public_url: is required by site.mode redirect"},
		{"redirect", "backends:\n  - {name: b1, url: 'http://10.0.0.1', public_url: 'http://b1.example.org/', admin_url: 'http://10.0.0.1:8081'}\nsite: {mode: redirect}\n", ""},
		{"redirect wrr needs no reports", "backends:\n  - {name: b1, url: 'http://10.0.0.1', public_url: 'http://b1.example.org/'}\nsite: {mode: redirect, policy: {name: wrr}}\n", ""},
		{"content", "backends:\n  - {name: b1, url: 'http://10.0.0.1', admin_url: 'http://10.0.0.1:8081'}\nsite: {content: true}\n", ""},
		{"content off", fe + "site: {content: false}\n", ""},
		{"content needs admin_url", fe + "site: {content: true}\n", "mirror.yaml:2:6: backends[0].admin_url: is required by site.content"},
		{"content not a bool", fe + "site: {content: maybe}\n", "site.content"},
		{"content on a back end", "root: /srv\nsite: {content: true}\n", "mirror.yaml:2:8: site.content: is for a front end"},
		{"redirect lard needs reports", "backends:\n  - {name: b1, url: 'http://10.0.0.1', public_url: 'http://b1.example.org/'}\nsite: {mode: redirect}\n",
			"mirror.yaml:2:6: backends[0].admin_url: is required by policy lard in site.mode redirect"},
		{"bad admin_url", "backends:\n  - {name: b1, url: 'http://10.0.0.1', admin_url: 'b1:8081'}\n", "backends[0].admin_url: "},
		{"tb-ccrd learns memory from reports", "backends:\n  - {name: b1, url: 'http://10.0.0.1', admin_url: 'http://10.0.0.1:8081'}\nsite: {policy: {name: tb-ccrd}}\n", ""},
		{"backend bandwidth", "backends:\n  - {name: b1, url: 'http://10.0.0.1', bandwidth: 1Gbit/s}\n", ""},
		{"bad backend bandwidth", "backends:\n  - {name: b1, url: 'http://10.0.0.1', bandwidth: -1}\n", "backends[0].bandwidth"},
		{"ward_balance", fe + "site: {policy: {name: ward, ward_balance: 1}}\n", "site.policy.ward_balance"},
		{"forward_cost 0", fe + "site: {policy: {name: ward, forward_cost: 0}}\n", ""},
		{"admission", fe + "site: {admission: {limit: -2}}\n", "site.admission.limit: must be -1 (none) or > 0 (leave it out for LARD's), got -2"},
		{"admission limit 0", fe + "site: {admission: {limit: 0}}\n", "site.admission.limit: 0 meant LARD's limit (n−1)·t_high + t_low − 1 before this release: leave the key out for it, write -1 for none or a number > 0"},
		{"admission queue", fe + "site: {admission: {queue: -1, max_wait: 0s}}\n", "site.admission.queue: must be >= 0, got -1"},
		{"bad public_url", "backends:\n  - {name: b1, url: 'http://10.0.0.1', public_url: 'ftp://b1'}\n", "backends[0].public_url: \"ftp://b1\": want an http or https URL"},
		{"handoff needs socket", fe + "site: {mode: handoff}\n", "backends[0].handoff_socket: is required by site.mode handoff"},
		{"tb-ccrd needs memory", "backends:\n  - {name: b1, url: 'http://10.0.0.1'}\nsite: {policy: {name: tb-ccrd}}\n", "backends[0].memory: is required by policy tb-ccrd"},
		{"health path", fe + "site: {health: {path: ping}}\n", "site.health.path: \"ping\": want a path starting with /"},
		{"health interval", fe + "site: {health: {interval: 0s}}\n", "site.health.interval: must be > 0"},
		{"health fall", fe + "site: {health: {fall: 0}}\n", "site.health.fall: must be >= 1"},
		{"cache on a front end", fe + "site: {cache: {memory: 1GiB}}\n", "site.cache: is for a back end"},
		{"cache on a back end", "root: .\nsite: {cache: {memory: 64MiB, max_object: 512KiB}}\n", ""},
		{"back end handoff socket", "root: .\nsite: {handoff_socket: run/be1.sock}\n", ""},
		{"handoff socket on a front end", fe + "site: {handoff_socket: run/fe.sock}\n", "site.handoff_socket: is for a back end"},
		{"cache max_object", "root: .\nsite: {cache: {max_object: 0}}\n", "site.cache.max_object: must be > 0"},
		{"duplicate backend", "backends: [{name: b1, url: 'http://a'}, {name: b1, url: 'http://b'}]\n", `backends[1].name: "b1" is listed twice`},
		{"negative weight", "backends: [{name: b1, url: 'http://a', weight: -1}]\n", "backends[0].weight: must be >= 0"},
		{"backend without url", "backends: [{name: b1}]\n", "backends[0].url: is required"},
		{"cache bad size", "root: .\nsite: {cache: {memory: lots}}\n", "site.cache.memory: invalid size \"lots\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(filepath.Join(dir, "mirror.yaml"), []byte(tt.yaml))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want == "":
			case err == nil:
				t.Fatalf("no error, want %q", tt.want)
			case !strings.Contains(err.Error(), tt.want):
				t.Errorf("error\n%v\ndoes not contain\n%s", err, tt.want)
			}
		})
	}
}

func TestCheckDefaults(t *testing.T) {
	dir := t.TempDir()
	data := "backends:\n  - {name: b1, url: 'http://10.0.0.1', handoff_socket: run/b1.sock}\n"
	cfg, err := parse(filepath.Join(dir, "mirror.yaml"), []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Site
	tests := []struct {
		name      string
		got, want any
	}{
		{"policy", s.Policy.Name, "lard"},
		{"mode", s.Mode, "proxy"},
		{"health path", s.Health.Path, "/-/healthy"},
		{"health interval", s.Health.Interval.D(), 2 * time.Second},
		{"health timeout", s.Health.Timeout.D(), time.Second},
		{"rise", s.Health.Rise, 2},
		{"fall", s.Health.Fall, 3},
		{"passive_errors", s.Health.PassiveErrors, 5},
		{"cache memory", s.Cache.Memory, yamlconf.ByteSize(256 << 20)},
		{"cache max_object", s.Cache.MaxObject, yamlconf.ByteSize(1 << 20)},
		{"miss delay off", s.Cache.MissDelayPerMiB.D(), time.Duration(0)},
		{"handoff socket resolved", cfg.Backends[0].HandoffSocket, filepath.Join(dir, "run", "b1.sock")},
		{"weight", cfg.Backends[0].Weight, 1.0},
		{"params default", s.Policy.Params().TLow, 0.0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

// TestForwardCostWarning: a written forward_cost > 0, whose meaning
// changed, loads with a warning at its key; 0 or none loads without.
func TestForwardCostWarning(t *testing.T) {
	fe := "backends:\n  - {name: b1, url: 'http://10.0.0.1:8080', memory: 1GiB}\n"
	tests := []struct {
		name string
		yaml string
		want string // "" for no warning
	}{
		{"left out", fe + "site: {policy: {name: ward}}\n", ""},
		{"zero", fe + "site: {policy: {name: ward, forward_cost: 0}}\n", ""},
		{"an old config's 0.1", fe + "site:\n  policy:\n    name: ward\n    forward_cost: 0.1\n",
			"m.yaml:6:5: site.policy.forward_cost: 0.1 models back ends that forward to each other (the paper's architecture); before, it was the cost of this front end forwarding a request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f siteFile
			pos, err := yamlconf.Decode("m.yaml", []byte(tt.yaml), &f)
			if err != nil {
				t.Fatal(err)
			}
			errs := yamlconf.NewErrors("m.yaml", pos, "mirror")
			f.Site.Check(errs, pos, t.TempDir(), f.Backends, false)
			if err := errs.Err(); err != nil {
				t.Fatal(err)
			}
			got := strings.Join(errs.Warnings(), "\n")
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("warnings %q, want %q", got, tt.want)
			}
		})
	}
}
