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
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/transmirror/transmirror/mirror"
	contentindex "github.com/transmirror/transmirror/mirror/content"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestContentIndex: with content.index the admin listener serves the
// document root's index, which a Replica decodes; without it the route
// is not there.
func TestContentIndex(t *testing.T) {
	tests := []struct {
		name   string
		index  bool
		status int
	}{
		{"on", true, http.StatusOK},
		{"off", false, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "root")
			if err := os.MkdirAll(filepath.Join(root, "dists"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "dists", "Release"), []byte("r\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			yaml := fmt.Sprintf("listen: [\"127.0.0.1:0\"]\ngroup: %s\nmember: m1\nhost: m1.mirrors.test\nroot: root\ncontent: {index: %v}\n", testGroup, tc.index)
			cfg, err := mirror.ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewPedanticRegistry()
			m, err := build(cfg, deps{reg: reg, runQueue: func() (float64, error) { return 0, nil }})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.release() })
			admin := webtest.Serve(t, m.admin)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- runLoops(ctx, m) }()
			t.Cleanup(func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			})
			r := contentindex.NewReplica(contentindex.Limits{})
			probetest.Until(t, 10*time.Second, func() string {
				resp, body := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, admin+api.ContentIndex.Path(), nil))
				if resp.StatusCode != tc.status {
					return fmt.Sprintf("status %d, want %d", resp.StatusCode, tc.status)
				}
				if !tc.index {
					return ""
				}
				if err := r.Update(strings.NewReader(body)); err != nil {
					return err.Error()
				}
				if _, ok := r.Index().Lookup("dists/Release"); !ok {
					return "dists/Release not indexed yet"
				}
				return ""
			})
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range problems {
				t.Errorf("promlint: %s: %s", p.Metric, p.Text)
			}
			if got := testutil.CollectAndCount(reg, "transmirror_mirror_content_index_files"); got != map[bool]int{true: 1}[tc.index] {
				t.Errorf("%d content_index_files series", got)
			}
		})
	}
}

// TestGenerationNewest: with content.generation newest the load report's
// generation is the newest mtime in the root's index, and it follows a
// file that lands later.
func TestGenerationNewest(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	put := func(name string, at time.Time) {
		p := filepath.Join(root, name)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	older, newer := time.Unix(1_700_000_000, 0), time.Unix(1_700_003_600, 0)
	put("a", older)
	yaml := fmt.Sprintf("listen: [\"127.0.0.1:0\"]\ngroup: %s\nmember: m1\nhost: m1.mirrors.test\nroot: root\ncontent: {index: true, generation: newest}\n", testGroup)
	cfg, err := mirror.ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	m, err := build(cfg, deps{runQueue: func() (float64, error) { return 0, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.release() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runLoops(ctx, m) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for _, want := range []time.Time{older, newer} {
		if want == newer {
			put("b", newer)
		}
		probetest.Until(t, 10*time.Second, func() string {
			if g := m.reporter.Snapshot(time.Now()).Generation; !g.Equal(want) {
				return fmt.Sprintf("generation %v, want %v", g, want)
			}
			return ""
		})
	}
}
