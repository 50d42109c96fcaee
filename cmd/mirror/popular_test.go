package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/transmirror/transmirror/mirror"
	"github.com/transmirror/transmirror/probe"
)

// TestReportTop: a member built for a document root counts the GETs of
// its public chain on the group name and its own host (a range from byte
// 0 only, no HEAD, not the health path) and its load report carries them,
// most requested first, with no rescue; a dispatcher counts the requests
// it redirects.
func TestReportTop(t *testing.T) {
	type req struct{ method, host, path, rng string }
	tests := []struct {
		name       string
		dispatcher bool
		reqs       []req
		want       []probe.PathCount
	}{
		{name: "member", reqs: []req{
			{"GET", testGroup, "/a.iso", ""}, {"GET", testGroup, "/a.iso", "bytes=0-9"}, {"GET", "m1.mirrors.test", "/a.iso", ""},
			{"GET", testGroup, "/a.iso", "bytes=10-"}, {"HEAD", testGroup, "/a.iso", ""},
			{"GET", testGroup, "/b.txt", ""}, {"GET", testGroup, "/missing", ""}, {"GET", testGroup, "/missing", ""},
			{"GET", "127.0.0.1", "/b.txt", ""}, {"GET", testGroup, mirror.HealthPath, ""},
		}, want: []probe.PathCount{{Path: "/a.iso", Count: 3}, {Path: "/missing", Count: 2}, {Path: "/b.txt", Count: 1}}},
		{name: "dispatcher", dispatcher: true, reqs: []req{
			{"GET", testGroup, "/a.iso", ""}, {"GET", testGroup, "/a.iso", ""}, {"GET", testGroup, "/b.txt", ""},
		}, want: []probe.PathCount{{Path: "/a.iso", Count: 2}, {Path: "/b.txt", Count: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "root")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, data := range map[string]string{"a.iso": "0123456789abcdef", "b.txt": "b\n"} {
				if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			yaml := fmt.Sprintf("listen: [\"127.0.0.1:0\"]\ngroup: %s\nmember: m1\nhost: m1.mirrors.test\nroot: root\n", testGroup)
			if tt.dispatcher {
				yaml = fmt.Sprintf("listen: [\"127.0.0.1:0\"]\ngroup: %s\nmember: d\nhost: d.mirrors.test\ndispatcher: true\ndnsd: {url: \"http://127.0.0.1:1\", secret: %q}\n", testGroup, testSecret)
			}
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
			for _, q := range tt.reqs {
				r := httptest.NewRequest(q.method, "http://"+q.host+q.path, nil)
				if q.rng != "" {
					r.Header.Set("Range", q.rng)
				}
				m.handler.ServeHTTP(httptest.NewRecorder(), r)
			}
			rep := m.reporter.Snapshot(time.Now())
			if !reflect.DeepEqual(rep.Top, tt.want) || rep.Rescued != 0 {
				t.Errorf("report top %v rescued %d, want %v and 0", rep.Top, rep.Rescued, tt.want)
			}
			if err := rep.Validate(); err != nil {
				t.Errorf("report: %v", err)
			}
			if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
				t.Errorf("metrics lint: %v %v", problems, err)
			}
		})
	}
}

// fixedCounts is a redirect decision's counts by reason.
type fixedCounts map[string]uint64

func (c fixedCounts) Counts() (redirected, skipped map[string]uint64) { return c, nil }

func TestReportPathsRescued(t *testing.T) {
	tests := []struct {
		name    string
		rescues redirectCounts
		want    uint64
	}{
		{"no decision", nil, 0},
		{"none rescued", fixedCounts{"overload": 5}, 0},
		{"rescued", fixedCounts{"overload": 5, "rescue": 3}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (reportPaths{rescues: tt.rescues}).Rescued(); got != tt.want {
				t.Errorf("Rescued = %d, want %d", got, tt.want)
			}
		})
	}
}
