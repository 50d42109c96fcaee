package mirror

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/serve"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

func TestLoadConfigGood(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"listen", strings.Join(cfg.Listen, " "), "127.0.0.1:8080 [::1]:8080"},
		{"admin", cfg.Admin, "127.0.0.1:9180"},
		{"group", cfg.Group, "www.example.org"},
		{"member", cfg.Member, "fra1"},
		{"host", cfg.Host, "fra1.mirrors.example.org"},
		{"dnsd url", cfg.DNSD.URL, "http://127.0.0.1:9053"},
		{"dnsd secret from file", cfg.DNSD.Secret, "s3cret-push-key"},
		{"dnsd push_interval default", cfg.DNSD.PushInterval.D(), 2 * time.Second},
		{"root resolved against the config", cfg.Root, filepath.Join("testdata", "root")},
		{"no backends", len(cfg.Backends), 0},
		{"listing", cfg.Listing, false},
		{"read_header", cfg.Timeouts.ReadHeader.D(), 5 * time.Second},
		{"read default off", cfg.Timeouts.Read.D(), time.Duration(0)},
		{"write off", cfg.Timeouts.Write.D(), time.Duration(0)},
		{"idle", cfg.Timeouts.Idle.D(), 2 * time.Minute},
		{"shutdown default", cfg.Timeouts.Shutdown.D(), 30 * time.Second},
		{"send default", cfg.Timeouts.Send.D(), 60 * time.Second},
		{"redirect enabled default", cfg.Redirect.Enabled, true},
		{"max_share default", cfg.Redirect.MaxShare, 0.8},
		{"min_size", cfg.Redirect.MinSize, yamlconf.ByteSize(1 << 20)},
		{"never", strings.Join(cfg.Redirect.Never, " "), "/ /index.html"},
		{"capacity", cfg.Capacity, 200.0},
		{"bandwidth", cfg.Bandwidth, yamlconf.Bandwidth(125e6)},
		{"lat", *cfg.Location.Lat, 50.11},
		{"lon", *cfg.Location.Lon, 8.68},
		{"country upper-cased", cfg.Location.Country, "DE"},
		{"continent upper-cased", cfg.Location.Continent, "EU"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestConfigRedactsSecret(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%s"} {
		t.Run(format, func(t *testing.T) {
			if s := fmt.Sprintf(format, cfg); strings.Contains(s, cfg.DNSD.Secret) || !strings.Contains(s, "<redacted>") {
				t.Errorf("%s shows the secret or no redaction: %s", format, s)
			}
		})
	}
}

func TestParseConfigDefaults(t *testing.T) {
	root := t.TempDir()
	data := []byte("listen: [':80']\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\nroot: " + root + "\n")
	cfg, err := ParseConfig("mirror.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"root absolute kept", cfg.Root, root},
		{"read_header", cfg.Timeouts.ReadHeader.D(), serve.DefaultReadHeaderTimeout},
		{"idle", cfg.Timeouts.Idle.D(), serve.DefaultIdleTimeout},
		{"shutdown", cfg.Timeouts.Shutdown.D(), serve.DefaultShutdownTimeout},
		{"send", cfg.Timeouts.Send.D(), serve.DefaultSendTimeout},
		{"capacity", cfg.Capacity, float64(DefaultCapacity)},
		{"no bandwidth limit", cfg.Bandwidth, yamlconf.Bandwidth(0)},
		{"listing off", cfg.Listing, false},
		{"redirect on", cfg.Redirect.Enabled, true},
		{"law", cfg.Redirect.Law, group.LawFairShare},
		{"time_constant", cfg.Redirect.TimeConstant.D(), group.DefaultTimeConstant},
		{"never", strings.Join(cfg.Redirect.Never, " "), "/"},
		{"admin off", cfg.Admin, ""},
		{"admin TLS off", cfg.AdminTLS.Enabled(), false},
		{"max_conns_per_client", cfg.Limits.MaxConnsPerClient, yamlconf.DefaultMaxConnsPerClient},
		{"max_header_bytes", cfg.Limits.MaxHeaderBytes, yamlconf.ByteSize(yamlconf.DefaultMaxHeaderBytes)},
		{"dnsd off", cfg.DNSD.URL, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestLoadConfigBad(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"typo key", "typo.yaml", []string{"typo.yaml:8:3: timeouts.idel: unknown field"}},
		{"root and backends", "root_and_backends.yaml", []string{"root_and_backends.yaml:6:1: backends: root and backends are mutually exclusive"}},
		{"neither root nor backends", "neither.yaml", []string{"neither.yaml:1:1: root: one of root and backends is required"}},
		{"capacity zero", "capacity_zero.yaml", []string{"capacity_zero.yaml:6:1: capacity: must be > 0, got 0"}},
		{"watermarks retired", "watermarks.yaml", []string{
			"watermarks.yaml:7:3: redirect.low_watermark: retired key: remove it: the mirror takes the group's policy.low_watermark from dnsd's group view",
		}},
		{"bad max_share", "max_share.yaml", []string{
			"max_share.yaml:7:3: redirect.max_share: must be in (0, 1], got 1.5",
		}},
		{"bad URLs", "bad_url.yaml", []string{
			`bad_url.yaml:6:3: dnsd.url: "ftp://dnsd.example.org/": want an http or https URL`,
			`bad_url.yaml:10:5: backends[0].url: "http://": URL has no host`,
			`bad_url.yaml:12:5: backends[1].url: invalid URL "::not a url"`,
		}},
		{"bad law", "law.yaml", []string{
			`law.yaml:7:3: redirect.law: unknown law "fair" (want one of fair_share, watermark)`,
			`law.yaml:8:3: redirect.time_constant: 20s: want 100ms..10s`,
		}},
		{"load window too short", "load_window.yaml", []string{`load_window.yaml:6:1: load_window: must be in 1s..5m, got 100ms`}},
		{"bad duration", "bad_duration.yaml", []string{`bad_duration.yaml:7:16: timeouts.read_header: invalid duration "5 parsecs"`}},
		{"bad bandwidth", "bad_bandwidth.yaml", []string{`bad_bandwidth.yaml:6:12: bandwidth: invalid bandwidth "100 megabits": want e.g. 1Gbit/s, 100Mbit/s or 12.5MB/s`}},
		{"bad size", "bad_size.yaml", []string{`bad_size.yaml:8:13: backends[0].memory: invalid size "8 gigs"`}},
		{"secret_file retired", "secret_file.yaml", []string{"secret_file.yaml:9:3: dnsd.secret_file: retired key: write secret: {file: PATH}"}},
		{"wrong type", "wrong_type.yaml", []string{"wrong_type.yaml:1:9: listen: wrong type: want sequence, got string"}},
		{"all errors collected", "many.yaml", []string{
			`many.yaml:1:10: listen[0]: "8080": want HOST:PORT`,
			`many.yaml:1:27: listen[2]: ":8080" is listed twice`,
			`many.yaml:2:1: admin: ":8080" is also a public listen address`,
			`many.yaml:3:1: group: "www..example.org" is not a host name`,
			`many.yaml:4:1: member: "FRA1" must match [a-z0-9-]+`,
			`many.yaml:6:1: root: "../root/index.html" is not a directory`,
			`many.yaml:8:3: timeouts.read_header: must be > 0, got 0s`,
			`many.yaml:9:3: timeouts.write: must be >= 0 (0 is off), got -1s`,
			`many.yaml:10:1: capacity: must be > 0, got -3`,
			`many.yaml:11:1: bandwidth: 100 B/s is below 1000 B/s (8kbit/s): write the unit, e.g. 100Mbit/s (0: no limit)`,
			`many.yaml:12:1: location: lat and lon go together`,
			`many.yaml:14:3: location: country "Germany": want a two-letter code`,
			`many.yaml:15:3: location: continent "XX": want one of AF AN AS EU NA OC SA`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadConfig(filepath.Join("testdata", "bad", tt.file))
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, want)
				}
			}
			for line := range strings.SplitSeq(err.Error(), "\n") {
				if !strings.HasPrefix(line, filepath.Join("testdata", "bad", tt.file)+":") {
					t.Errorf("line %q does not start with file:line:col", line)
				}
			}
		})
	}
}

// TestParseConfigInline covers cases that need no file of their own.
func TestParseConfigInline(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "empty.secret"), []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := "listen: [':80']\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\n"
	tests := []struct {
		name string
		yaml string
		want string // "" means valid
	}{
		{"empty file", "", "mirror.yaml:1:1: listen: at least one address is required"},
		{"two documents", head + "root: .\n---\nroot: .\n", "mirror.yaml:6:1: more than one YAML document"},
		{"YAML tag", head + "root: !dir .\n", "mirror.yaml:5:7: root: YAML tag !dir is not supported"},
		{"backends only", head + "backends: [{name: b1, url: 'http://10.0.0.1', memory: 512MiB}]\n", ""},
		{"backends checked by the front end", head + "backends: [{name: b1, url: 'http://a'}, {name: b1, url: 'http://b'}]\n", `mirror.yaml:5:42: backends[1].name: "b1" is listed twice`},
		{"site checked by the front end", head + "root: .\nsite: {mode: dsr}\n", `mirror.yaml:6:8: site.mode: "dsr": want one of proxy, redirect, handoff`},
		{"site cache on a front end", head + "backends: [{name: b1, url: 'http://a'}]\nsite: {cache: {memory: 1GiB}}\n", "mirror.yaml:6:8: site.cache: is for a back end (a mirror with root), not a front end"},
		{"dnsd without secret", head + "root: .\ndnsd: {url: 'http://a'}\n", "dnsd: secret is required (pushes are authenticated): the secret, or {file: PATH}"},
		{"dnsd without url", head + "root: .\ndnsd: {secret: x}\n", "dnsd.url: is required"},
		{"dnsd secret file empty", head + "root: .\ndnsd: {url: 'http://a', secret: {file: empty.secret}}\n", `dnsd.secret: file empty.secret is empty`},
		{"dnsd secret file missing", head + "root: .\ndnsd: {url: 'http://a', secret: {file: nope.secret}}\n", `dnsd.secret: file nope.secret: no such file or directory`},
		{"dnsd secret mapping without a file", head + "root: .\ndnsd: {url: 'http://a', secret: {file: ''}}\n", `dnsd.secret: {file: PATH} without a PATH`},
		{"dnsd url with user", head + "root: .\ndnsd: {url: 'http://u:p@a', secret: x}\n", "dnsd.url: URL must not carry user information"},
		{"push_interval zero", head + "root: .\ndnsd: {url: 'http://a', secret: x, push_interval: 0s}\n", "dnsd.push_interval: must be > 0"},
		{"root missing", head + "root: nope\n", `root: cannot use "nope": no such file or directory`},
		{"host equals group", "listen: [':80']\ngroup: www.example.org\nmember: fra1\nhost: WWW.example.org.\nroot: .\n", "host: must differ from group"},
		{"missing names", "listen: [':80']\nroot: .\n", "mirror.yaml:1:1: group: is required"},
		{"idle zero", head + "root: .\ntimeouts: {idle: 0s}\n", "timeouts.idle: must be > 0"},
		{"send negative", head + "root: .\ntimeouts: {send: -1s}\n", "timeouts.send: must be >= 0 (0 is off), got -1s"},
		{"send off", head + "root: .\ntimeouts: {send: 0s}\n", ""},
		{"never relative", head + "root: .\nredirect: {never: [index.html]}\n", `redirect.never[0]: "index.html": want a path`},
		{"never dotdot", head + "root: .\nredirect: {never: [/a/../b]}\n", `redirect.never[0]`},
		{"redirect off", head + "root: .\nredirect: {enabled: false}\n", ""},
		{"redirect scheme", head + "root: .\nredirect: {scheme: https}\ntrusted_proxies: [10.0.0.0/8, 192.0.2.10, '2001:db8::/32']\n", ""},
		{"redirect scheme bad", head + "root: .\nredirect: {scheme: ftp}\n", `mirror.yaml:6:12: redirect.scheme: "ftp": want one of auto, http, https`},
		{"trusted_proxies bad", head + "root: .\ntrusted_proxies: [10.0.0.0/33]\n", `mirror.yaml:6:19: trusted_proxies[0]: "10.0.0.0/33" is not an address or a prefix`},
		{"trusted_proxies twice", head + "root: .\ntrusted_proxies: [10.0.0.0/8, 10.1.0.0/8]\n", `trusted_proxies[1]: "10.1.0.0/8" is listed twice`},
		{"proxy_protocol", head + "root: .\nproxy_protocol: [10.0.0.0/8, 192.0.2.10, '2001:db8::/32']\n", ""},
		{"proxy_protocol bad", head + "root: .\nproxy_protocol: [10.0.0.0/8, nowhere]\n", `mirror.yaml:6:30: proxy_protocol[1]: "nowhere" is not an address or a prefix`},
		{"proxy_protocol twice", head + "root: .\nproxy_protocol: [192.0.2.10, 192.0.2.10/32]\n", `proxy_protocol[1]: "192.0.2.10/32" is listed twice`},
		{"max_ranges negative", head + "root: .\nmax_ranges: -1\n", "mirror.yaml:6:1: max_ranges: must be >= 0 (0 turns ranges off), got -1"},
		{"max_ranges off", head + "root: .\nmax_ranges: 0\n", ""},
		{"lon out of range", head + "root: .\nlocation: {lat: 0, lon: 181}\n", "mirror.yaml:6:20: location: lon 181 must be in -180..180"},
		{"capacity infinite", head + "root: .\ncapacity: .inf\n", "capacity: must be > 0"},
		{"bad port", "listen: [':http']\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\nroot: .\n", `listen[0]: ":http": invalid port "http"`},
		{"listen on a host name", "listen: ['www.example.org:80']\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\nroot: .\n", `listen[0]: "www.example.org:80": host "www.example.org" is not an IP address`},
		{"admin on a host name", "listen: [':80']\nadmin: 'fra1.example.org:9180'\ngroup: www.example.org\nmember: fra1\nhost: fra1.example.org\nroot: .\n", `admin: "fra1.example.org:9180": host "fra1.example.org" is not an IP address`},
		{"admin_tls without admin", head + "root: .\nadmin_tls: {cert_file: a.crt, key_file: a.key}\n", "mirror.yaml:6:1: admin_tls: needs admin"},
		{"admin_tls files missing", head + "root: .\nadmin: 127.0.0.1:0\nadmin_tls: {cert_file: a.crt, key_file: a.key}\n", `mirror.yaml:7:13: admin_tls.cert_file: cannot use "a.crt": no such file or directory`},
		{"admin_tls without key", head + "root: .\nadmin: 127.0.0.1:0\nadmin_tls: {cert_file: a.crt}\n", "mirror.yaml:7:1: admin_tls: key_file is required with cert_file"},
		{"limits", head + "root: .\nlimits: {max_conns_per_client: -2}\n", "mirror.yaml:6:10: limits.max_conns_per_client: must be >= 0 (0 is no cap), got -2"},
		{"limits off", head + "root: .\nlimits: {max_conns_per_client: 0, max_header_bytes: 8KiB}\n", ""},
		{"dnsd ca_file with http", head + "root: .\ndnsd: {url: 'http://a', secret: x, ca_file: empty.secret}\n", "dnsd.ca_file: is only used with an https url"},
		{"dnsd ca_file not PEM", head + "root: .\ndnsd: {url: 'https://a', secret: x, ca_file: empty.secret}\n", `dnsd.ca_file: "empty.secret" holds no PEM certificate`},
		{"dnsd ca_file missing", head + "root: .\ndnsd: {url: 'https://a', secret: x, ca_file: ca.crt}\n", `dnsd.ca_file: cannot use "ca.crt": no such file or directory`},
		{"unknown nested key", head + "root: .\nredirect: {enabled: true, watermark: 1}\n", "mirror.yaml:6:27: redirect.watermark: unknown field"},
		{"dnsd urls", head + "root: .\ndnsd: {urls: ['http://a', 'http://b'], secret: x, push: one}\n", ""},
		{"dnsd url and urls", head + "root: .\ndnsd: {url: 'http://a', urls: ['http://b'], secret: x}\n", "mirror.yaml:6:25: dnsd.urls: url and urls are mutually exclusive"},
		{"dnsd urls empty", head + "root: .\ndnsd: {urls: [], secret: x}\n", "mirror.yaml:6:8: dnsd.urls: at least one URL is required"},
		{"dnsd urls twice", head + "root: .\ndnsd: {urls: ['http://a', 'http://a/'], secret: x}\n", `mirror.yaml:6:27: dnsd.urls[1]: "http://a/" is listed twice`},
		{"dnsd urls bad", head + "root: .\ndnsd: {urls: ['http://a', 'ftp://b'], secret: x}\n", `mirror.yaml:6:27: dnsd.urls[1]: "ftp://b": want an http or https URL`},
		{"dnsd push", head + "root: .\ndnsd: {url: 'http://a', secret: x, push: first}\n", `dnsd.push: "first": want all or one`},
		{"join", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true, addresses: [192.0.2.1, '2001:db8::1'], probe: 'http://192.0.2.1:9180/v1/load', leave_wait: 30s}\n", ""},
		{"join without dnsd", head + "root: .\njoin: {enabled: true, addresses: [192.0.2.1]}\n", "mirror.yaml:6:8: join.enabled: needs dnsd"},
		{"join without addresses", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true}\n", "mirror.yaml:7:1: join.addresses: at least one address is required"},
		{"join bad address", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true, addresses: [192.0.2.1, www.example.org, '::ffff:192.0.2.1']}\n", `join.addresses[1]: "www.example.org" is not an IP address`},
		{"join address twice", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true, addresses: [192.0.2.1, '::ffff:192.0.2.1']}\n", `join.addresses[1]: "::ffff:192.0.2.1" is listed twice`},
		{"join bad probe", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true, addresses: [192.0.2.1], probe: 'a:b'}\n", "join.probe: "},
		{"join leave_wait", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true, addresses: [192.0.2.1], leave_wait: 2h}\n", "join.leave_wait: must be in (0, 1h0m0s] (leave it out for the group's ttl.max), got 2h0m0s"},
		{"join leave_wait 0", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true, addresses: [192.0.2.1], leave_wait: 0s}\n", "join.leave_wait: 0s meant the group's ttl.max before this release: leave the key out for it"},
		{"join check_interval", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true, addresses: [192.0.2.1], check_interval: 100ms}\n", "join.check_interval: must be in 1s..1h, got 100ms"},
		{"join check_interval without enabled", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {check_interval: 10s}\n", "join.enabled: the join settings are written but enabled is not true"},
		{"join settings not enabled", head + "root: .\ndnsd: {url: 'http://a', secret: x}\njoin: {addresses: [192.0.2.1]}\n", "join.enabled: the join settings are written but enabled is not true"},
		{"content index", head + "root: .\ncontent: {index: true}\n", ""},
		{"content index off", head + "root: .\ncontent: {index: false}\n", ""},
		{"content index of a front end", head + "backends: [{name: b1, url: 'http://10.0.0.1:8080'}]\ncontent: {index: true}\n", "mirror.yaml:6:11: content.index: needs root: only a document root is indexed"},
		{"content index of a dispatcher", head + "dispatcher: true\ndnsd: {url: 'http://a', secret: x}\ncontent: {index: true}\n", "mirror.yaml:7:11: content.index: needs root"},
		{"content typo", head + "root: .\ncontent: {indx: true}\n", "mirror.yaml:6:11: content.indx: unknown field"},
		{"content index not a bool", head + "root: .\ncontent: {index: maybe}\n", "content.index"},
		{"content trace", head + "root: .\ncontent: {trace: project/trace/master}\n", ""},
		{"content trace absolute", head + "root: .\ncontent: {trace: /etc/passwd}\n", `mirror.yaml:6:11: content.trace: "/etc/passwd" must be a path relative to root, inside it`},
		{"content trace outside", head + "root: .\ncontent: {trace: ../trace}\n", `content.trace: "../trace" must be a path relative to root`},
		{"content trace empty", head + "root: .\ncontent: {trace: ''}\n", "content.trace: must not be empty"},
		{"content generation newest", head + "root: .\ncontent: {index: true, generation: newest}\n", ""},
		{"content generation trace", head + "root: .\ncontent: {trace: t, generation: trace}\n", ""},
		{"content generation newest without an index", head + "root: .\ncontent: {generation: newest}\n", "content.generation: newest needs content.index"},
		{"content generation newest and a trace", head + "root: .\ncontent: {index: true, trace: t, generation: newest}\n", "content.generation: newest excludes content.trace"},
		{"content generation trace without one", head + "root: .\ncontent: {generation: trace}\n", "content.generation: trace needs content.trace"},
		{"content generation unknown", head + "root: .\ncontent: {generation: mtime}\n", `content.generation: "mtime": want trace or newest`},
		{"content in place", head + "root: .\ncontent: {in_place: [dists/*/InRelease, repodata/]}\n", ""},
		{"content in place absolute", head + "root: .\ncontent: {in_place: [/dists/*/InRelease]}\n", `content.in_place[0]: "/dists/*/InRelease": want a path below the root`},
		{"content in place bad pattern", head + "root: .\ncontent: {in_place: [ok/, 'dists/[/InRelease']}\n", `content.in_place[1]: "dists/[/InRelease": syntax error in pattern`},
		{"content trace without root", head + "dispatcher: true\ndnsd: {url: 'http://a', secret: x}\ncontent: {trace: t}\n", "content.trace: needs root"},
		{"join dispatcher", head + "dispatcher: true\ndnsd: {url: 'http://a', secret: x}\njoin: {enabled: true, addresses: [192.0.2.1]}\n", "join.enabled: a dispatcher is no member: it can not join"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(tt.yaml))
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

// TestConfigWarnsUnprotectedSecret: a dnsd.secret file readable by
// group or others loads, with a warning naming it, its mode and where it
// was written; a private one gives none.
func TestConfigWarnsUnprotectedSecret(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		want string
	}{
		{"private", 0o600, ""},
		{"world readable", 0o644, "m.yaml:4:3: dnsd.secret: UNPROTECTED SECRET FILE group.secret: mode 0644"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			secret := filepath.Join(dir, "group.secret")
			if err := os.WriteFile(secret, []byte("s3cret-s3cret-s3cret\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(secret, tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
				t.Fatal(err)
			}
			yaml := "listen: [\"127.0.0.1:0\"]\ngroup: www.example.org\ndnsd:\n  secret: {file: group.secret}\n  url: http://127.0.0.1:9053\nmember: fra1\nhost: fra1.example.org\nroot: root\ncapacity: 10\n"
			cfg, err := ParseConfig(filepath.Join(dir, "m.yaml"), []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && len(cfg.Warnings) != 0:
				t.Errorf("warnings %q, want none", cfg.Warnings)
			case tt.want != "" && (len(cfg.Warnings) != 1 || !strings.HasPrefix(cfg.Warnings[0], filepath.Join(dir, tt.want))):
				t.Errorf("warnings %q, want one starting %q", cfg.Warnings, tt.want)
			}
		})
	}
}
