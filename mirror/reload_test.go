package mirror

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/mirror/webtest"
)

// reloadBaseYAML is webtest.ReloadBaseYAML.
const reloadBaseYAML = webtest.ReloadBaseYAML

// reloadDir is a webtest.ReloadDir, where parse writes each config as
// mirror.yaml.
type reloadDir string

func newReloadDir(t *testing.T) reloadDir { return reloadDir(webtest.ReloadDir(t)) }

func (d reloadDir) parse(t *testing.T, yaml string) *Config {
	t.Helper()
	p := filepath.Join(string(d), "mirror.yaml")
	cfg, err := ParseConfig(p, []byte(yaml))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return cfg
}

func TestRestartChanges(t *testing.T) {
	dir := newReloadDir(t)
	cur := dir.parse(t, reloadBaseYAML)
	edit := func(old, new string) string { return strings.Replace(reloadBaseYAML, old, new, 1) }
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error; none: reloadable
		not  string   // must not appear in the error
	}{
		{"unchanged", reloadBaseYAML, nil, ""},
		{"capacity", edit("capacity: 100", "capacity: 250"), nil, ""},
		{"bandwidth", edit("capacity: 100", "capacity: 100\nbandwidth: 1Gbit/s"), nil, ""},
		{"host", edit("host: a.mirrors", "host: a2.mirrors"), nil, ""},
		{"redirect", reloadBaseYAML + "redirect: {max_share: 0.2, never: [/, /index.html]}\n", nil, ""},
		{"geo", reloadBaseYAML + "geo: {networks: [{prefix: 10.0.0.0/8, location: {country: DE}}], default: {continent: EU}}\n", nil, ""},
		{"location", reloadBaseYAML + "location: {lat: 50.1, lon: 8.7}\n", nil, ""},
		{"listen", edit(":8080", ":8081"),
			[]string{`mirror.yaml: listen: changed from ["127.0.0.1:8080"] to ["127.0.0.1:8081"]: needs a restart`}, ""},
		{"admin", edit(":9180", ":9181"), []string{`admin: changed from "127.0.0.1:9180" to "127.0.0.1:9181"`}, ""},
		{"group", edit("group: www", "group: ftp"), []string{`group: changed from "www.example.test" to "ftp.example.test"`}, ""},
		{"member", edit("member: a", "member: b"), []string{`member: changed from "a" to "b"`}, ""},
		{"root", edit("root: root", "root: root2"), []string{"root: changed from", `root2"`}, ""},
		{"dnsd url", edit("8053", "8054"), []string{`dnsd.url: changed from "http://127.0.0.1:8053" to "http://127.0.0.1:8054"`}, ""},
		{"dnsd secret not shown", edit("s3cret", "other"), []string{"mirror.yaml: dnsd.secret: changed: needs a restart"}, "s3cret"},
		{"dnsd push interval", edit("s3cret}", "s3cret, push_interval: 1s}"), []string{"dnsd.push_interval: changed from 2s to 1s"}, ""},
		{"timeouts", reloadBaseYAML + "timeouts: {idle: 10s}\n", []string{"timeouts.idle: changed from 2m0s to 10s"}, ""},
		{"limits", reloadBaseYAML + "limits: {max_conns_per_client: 8}\n", []string{"limits.max_conns_per_client: changed from 256 to 8"}, ""},
		{"load window", reloadBaseYAML + "load_window: 30s\n", []string{"load_window: changed from 10s to 30s"}, ""},
		{"listing", reloadBaseYAML + "listing: true\n", []string{"listing: changed from false to true"}, ""},
		{"proxy protocol", reloadBaseYAML + "proxy_protocol: [10.0.0.0/8]\n", []string{`proxy_protocol: changed from [] to ["10.0.0.0/8"]: needs a restart`}, ""},
		{"content index", reloadBaseYAML + "content: {index: true}\n", []string{"content.index: changed from false to true: needs a restart"}, ""},
		{"site cache", reloadBaseYAML + "site: {cache: {memory: 1MiB}}\n", []string{"site.cache.memory: changed from 268435456 to 1048576"}, ""},
		{"two keys, a reloadable one beside", edit("member: a", "member: b") + "listing: true\nload_window: 30s\nredirect: {max_share: 0.1}\n",
			[]string{"member: changed", "listing: changed", "load_window: changed"}, "redirect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := RestartChanges(cur, dir.parse(t, tt.yaml))
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("RestartChanges: %v, want nil (reloadable)", err)
				}
				return
			}
			if !errors.Is(err, ErrNeedsRestart) {
				t.Fatalf("RestartChanges: %v, want ErrNeedsRestart", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.not != "" && strings.Contains(err.Error(), tt.not) {
				t.Errorf("error %q shows %q", err, tt.not)
			}
		})
	}
}
