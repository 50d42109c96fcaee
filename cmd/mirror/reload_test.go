package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/group"
	"github.com/transmirror/transmirror/mirror/webtest"
)

// reloadBaseYAML is webtest.ReloadBaseYAML.
const reloadBaseYAML = webtest.ReloadBaseYAML

// reloadDir is a webtest.ReloadDir, where parse writes each config as
// mirror.yaml.
type reloadDir string

func newReloadDir(t *testing.T) reloadDir { return reloadDir(webtest.ReloadDir(t)) }

func (d reloadDir) parse(t *testing.T, yaml string) *mirror.Config {
	t.Helper()
	p := filepath.Join(string(d), "mirror.yaml")
	cfg, err := mirror.ParseConfig(p, []byte(yaml))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return cfg
}

func TestPrepareReload(t *testing.T) {
	dir := newReloadDir(t)
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name      string
		yaml      string
		want      string // substring of the error; "": the reload commits
		capacity  float64
		bandwidth float64
		maxShare  float64
		host      string
	}{
		{"capacity, bandwidth, rules and host", strings.NewReplacer("capacity: 100", "capacity: 250\nbandwidth: 1Gbit/s", "host: a.", "host: a2.").Replace(reloadBaseYAML) +
			"redirect: {max_share: 0.2}\ngeo: {default: {continent: EU}}\n", "", 250, 125e6, 0.2, "a2.mirrors.example.test"},
		{"restart-only key", strings.NewReplacer("member: a", "member: b", "capacity: 100", "capacity: 250\nbandwidth: 1Gbit/s").Replace(reloadBaseYAML), "member: changed", 100, 0, group.DefaultMaxShare, "a.mirrors.example.test"},
		{"corrupt mmdb", strings.Replace(reloadBaseYAML, "capacity: 100", "capacity: 250", 1) + "geo: {mmdb: bad.mmdb}\n", "bad.mmdb", 100, 0, group.DefaultMaxShare, "a.mirrors.example.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := build(dir.parse(t, reloadBaseYAML), deps{clock: func() time.Time { return now }, runQueue: func() (float64, error) { return 0, nil }})
			if err != nil {
				t.Fatal(err)
			}
			defer m.release()
			next, err := mirror.ParseConfig(filepath.Join(string(dir), "mirror.yaml"), []byte(tt.yaml))
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			r, err := m.PrepareReload(next)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("PrepareReload: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("PrepareReload: %v, want an error with %q", err, tt.want)
			case err == nil:
				r.Commit()
			}
			st := m.Status(now)
			if got := m.reporter.Snapshot(now).Capacity; got != tt.capacity {
				t.Errorf("report capacity %g, want %g", got, tt.capacity)
			}
			if st.Load.Capacity != tt.capacity {
				t.Errorf("status capacity %g, want %g", st.Load.Capacity, tt.capacity)
			}
			if got := m.reporter.Snapshot(now).Bandwidth; got != tt.bandwidth || st.Load.Bandwidth != tt.bandwidth {
				t.Errorf("report bandwidth %g, status %g, want %g", got, st.Load.Bandwidth, tt.bandwidth)
			}
			if st.Redirect.MaxShare != tt.maxShare {
				t.Errorf("max_share %g, want %g", st.Redirect.MaxShare, tt.maxShare)
			}
			if st.Host != tt.host {
				t.Errorf("status host %q, want %q", st.Host, tt.host)
			}
		})
	}
}

// TestNewFails: New returns the error of what it could not open (and
// releases what it had opened) instead of failing on its way out.
func TestNewFails(t *testing.T) {
	dir := newReloadDir(t)
	tests := []struct {
		name, yaml, want string
	}{
		{"corrupt mmdb", reloadBaseYAML + "geo: {mmdb: bad.mmdb}\n", "bad.mmdb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := build(dir.parse(t, tt.yaml), deps{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || m != nil {
				t.Fatalf("New = %v, %v; want nil and an error with %q", m, err, tt.want)
			}
		})
	}
}

// TestReloadWhileServing commits reloads while requests on the group name
// are served (run with -race): every request is answered.
func TestReloadWhileServing(t *testing.T) {
	dir := newReloadDir(t)
	if err := os.WriteFile(filepath.Join(string(dir), "root", "f.txt"), []byte("f\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := build(dir.parse(t, reloadBaseYAML), deps{runQueue: func() (float64, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.release()
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		defer close(errc)
		for {
			select {
			case <-done:
				return
			default:
			}
			req := httptest.NewRequest(http.MethodGet, "http://www.example.test/f.txt", nil)
			req.RemoteAddr = "198.51.100.7:1234"
			w := httptest.NewRecorder()
			m.handler.ServeHTTP(w, req)
			if w.Code != http.StatusOK {
				errc <- fmt.Errorf("GET: %d", w.Code)
				return
			}
		}
	}()
	for i := range 50 {
		yaml := strings.Replace(reloadBaseYAML, "capacity: 100", fmt.Sprintf("capacity: %d", 100+i), 1) +
			fmt.Sprintf("redirect: {max_share: 0.%d}\ngeo: {networks: [{prefix: 198.51.100.0/24, location: {country: DE}}]}\n", 1+i%9)
		r, err := m.PrepareReload(dir.parse(t, yaml))
		if err != nil {
			t.Fatal(err)
		}
		r.Commit()
	}
	close(done)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if got := m.reporter.Snapshot(time.Now()).Capacity; got != 149 {
		t.Errorf("capacity %g after the last reload, want 149", got)
	}
}
