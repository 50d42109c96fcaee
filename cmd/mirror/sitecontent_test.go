package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/probetest"
)

// startLoops runs m's loops until the test ends.
func startLoops(t *testing.T, m *wired) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runLoops(ctx, m) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// buildYAML builds and serves a mirror from yaml (a file in dir), with
// its loops running, and returns its public and admin base URLs and its
// registry.
func buildYAML(t *testing.T, dir, yaml string) (public, admin string, reg *prometheus.Registry) {
	t.Helper()
	cfg, err := mirror.ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	reg = prometheus.NewPedanticRegistry()
	m, err := build(cfg, deps{reg: reg, runQueue: func() (float64, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.release() })
	public, admin = webtest.Serve(t, m.handler), webtest.Serve(t, m.admin)
	startLoops(t, m)
	return public, admin, reg
}

// TestSiteContentWiring: a front end with site.content over two back
// ends with content.index, one of which lacks a directory, polls their
// indexes and sends the directory's files only to the one that has them.
func TestSiteContentWiring(t *testing.T) {
	var backends []string
	for i, files := range [][]string{{"a/1", "b/1"}, {"a/1"}} {
		dir := t.TempDir()
		for _, f := range files {
			p := filepath.Join(dir, "root", f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(f+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		name := fmt.Sprintf("b%d", i+1)
		pub, adm, _ := buildYAML(t, dir, fmt.Sprintf("listen: [\"127.0.0.1:0\"]\ngroup: %s\nmember: %s\nhost: %s.mirrors.test\nroot: root\ncontent: {index: true}\n", testGroup, name, name))
		backends = append(backends, fmt.Sprintf("  - {name: %s, url: '%s', admin_url: '%s'}\n", name, pub, adm))
	}
	front, _, reg := buildYAML(t, t.TempDir(), fmt.Sprintf("listen: [\"127.0.0.1:0\"]\ngroup: %s\nmember: fe\nhost: fe.mirrors.test\nsite: {content: true, policy: {name: wrr}}\nbackends:\n%s", testGroup, strings.Join(backends, "")))
	// A miss needs both indexes known: until then an unknown back end
	// holds everything.
	misses := func() float64 { return webtest.SampleSum(t, reg, "transmirror_mirror_site_content_misses_total", nil) }
	probetest.Until(t, 10*time.Second, func() string {
		webtest.Do(t, webtest.NewRequest(t, http.MethodGet, front+"/c/0", nil))
		if misses() == 0 {
			return "an index is not known yet"
		}
		return ""
	})
	for k := range 20 {
		resp, body := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, fmt.Sprintf("%s/b/1?k=%d", front, k), nil))
		if resp.StatusCode != http.StatusOK || body != "b/1\n" {
			t.Fatalf("GET /b/1 #%d: %s %q; want 200 from b1", k, resp.Status, body)
		}
	}
	before := misses()
	resp, _ := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, front+"/c/1", nil))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /c/1: %s, want 404 (nobody has it)", resp.Status)
	}
	if got := misses() - before; got != 1 {
		t.Errorf("misses %g, want 1", got)
	}
}

// TestSiteContentBesideSiblings: a front end with site.content that is a
// member of a group (dnsd) keeps two content maps, its back ends' and its
// siblings', whose metrics share one registry.
func TestSiteContentBesideSiblings(t *testing.T) {
	yaml := fmt.Sprintf("listen: [\"127.0.0.1:0\"]\ngroup: %s\nmember: fe\nhost: fe.mirrors.test\n"+
		"dnsd: {url: 'http://127.0.0.1:9', secret: s}\nsite: {content: true}\n"+
		"backends:\n  - {name: b1, url: 'http://127.0.0.1:9', admin_url: 'http://127.0.0.1:9'}\n", testGroup)
	cfg, err := mirror.ParseConfig(filepath.Join(t.TempDir(), "mirror.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	m, err := build(cfg, deps{reg: prometheus.NewPedanticRegistry(), runQueue: func() (float64, error) { return 0, nil }})
	if err != nil {
		t.Fatalf("build: %v", err)
	}
	m.release()
}
