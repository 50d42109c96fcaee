package members_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/dnsd/dispatch"
	"github.com/transmirror/transmirror/dnsd/internal/testenv"
	"github.com/transmirror/transmirror/dnsd/members"
	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/zones"
)

// specWatcher records the specs it is given and probes nothing.
type specWatcher struct {
	mu    sync.Mutex
	specs map[string]probe.MemberSpec
}

func (w *specWatcher) Add(s probe.MemberSpec) error       { return w.Update(s) }
func (w *specWatcher) Remove(group, member string) error  { return nil }
func (w *specWatcher) Push(probe.Report, time.Time) error { return nil }
func (w *specWatcher) SetHealth(probe.HealthConfig)       {}
func (w *specWatcher) State(string, string) (probe.MemberStatus, bool) {
	return probe.MemberStatus{}, false
}

func (w *specWatcher) Update(s probe.MemberSpec) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.specs[s.Group+" "+s.Member] = s
	return nil
}

// TestProbesPublicOnly: the probes of a member added at run time to a
// group without allow_private may connect to public addresses only (the
// check at dial time that a host name can not get around); those of the
// config file's members and of a group with allow_private are not
// limited.
func TestProbesPublicOnly(t *testing.T) {
	dir := t.TempDir()
	config := `
listen: ["127.0.0.1:0"]
zones:
  - {origin: example.org., file: example.org.zone}
groups:
  - name: pub.example.org.
    secret: ` + testenv.Secret + `
    members:
      - {name: static1, host: static1.example.org., addresses: [10.0.1.1], capacity: 1000, probe: "http://10.0.1.1/v1/load"}
  - name: priv.example.org.
    secret: ` + testenv.Secret + `
    allow_private: true
    members:
      - {name: static2, host: static2.example.org., addresses: [10.0.1.2], capacity: 1000, probe: "http://10.0.1.2/v1/load"}
`
	for name, text := range map[string]string{"example.org.zone": testenv.Zone, "dnsd.yaml": config} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	set, err := zones.Load(filepath.Join(dir, "dnsd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	disp, err := dispatch.New(dispatch.Options{Registry: reg, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	w := &specWatcher{specs: make(map[string]probe.MemberSpec)}
	ctl, err := members.New(members.Options{Registry: reg, Answers: disp, Server: testenv.Server(t, reg, disp), Watcher: w})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.Load(set); err != nil {
		t.Fatal(err)
	}
	for _, add := range []struct{ group, name, addr, probe string }{
		{"pub.example.org.", "run1", "8.8.8.8", "http://probe.mirrors.example.net/v1/load"},
		{"priv.example.org.", "run2", "10.0.1.3", "http://10.0.1.3/v1/load"},
	} {
		if _, err := ctl.Add(add.group, api.MemberInfo{Name: add.name, Host: add.name + ".example.net.", Addresses: []string{add.addr},
			Capacity: 100, Probe: add.probe}); err != nil {
			t.Fatalf("add %s: %v", add.name, err)
		}
	}
	for _, tc := range []struct {
		key        string
		publicOnly bool
	}{
		{"pub.example.org. run1", true},
		{"pub.example.org. static1", false},
		{"priv.example.org. run2", false},
		{"priv.example.org. static2", false},
	} {
		t.Run(tc.key, func(t *testing.T) {
			w.mu.Lock()
			s, ok := w.specs[tc.key]
			w.mu.Unlock()
			if !ok || s.PublicOnly != tc.publicOnly {
				t.Errorf("spec %+v (watched: %v), want PublicOnly %v", s, ok, tc.publicOnly)
			}
		})
	}
}
