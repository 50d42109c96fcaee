package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transmirror/transmirror/mirror"
)

func TestRunQueueSource(t *testing.T) {
	const head = `listen: ["127.0.0.1:0"]
group: www.example.org
member: fra1
host: fra1.mirrors.example.org
root: root
`
	tests := []struct {
		name    string
		yaml    string
		want    mirror.RunQueueSource
		wantM   float64 // with the host's run queue at 7 and nothing in flight
		readsRQ bool    // whether the host's run queue is read
	}{
		{"default", "", mirror.RunQueueLoadavg, 7, true},
		{"loadavg", "run_queue: loadavg\n", mirror.RunQueueLoadavg, 7, true},
		{"in_flight", "run_queue: in_flight\n", mirror.RunQueueInFlight, 0, false},
		{"none", "run_queue: none\n", mirror.RunQueueNone, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
				t.Fatal(err)
			}
			cfg, err := mirror.ParseConfig(filepath.Join(dir, "mirror.yaml"), []byte(head+tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RunQueue != tt.want {
				t.Errorf("run_queue = %q, want %q", cfg.RunQueue, tt.want)
			}
			read := false
			m, err := build(cfg, deps{runQueue: func() (float64, error) { read = true; return 7, nil }})
			if err != nil {
				t.Fatal(err)
			}
			defer m.release()
			if got := m.reporter.Snapshot(time.Now()); got.M != tt.wantM || read != tt.readsRQ {
				t.Errorf("m = %g with the host's run queue read: %v, want %g and %v", got.M, read, tt.wantM, tt.readsRQ)
			}
		})
	}

	t.Run("unknown value", func(t *testing.T) {
		_, err := mirror.ParseConfig("mirror.yaml", []byte(head+"run_queue: host\n"))
		const want = `mirror.yaml:6:1: run_queue: must be loadavg, in_flight or none, got "host"`
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %s", err, want)
		}
	})
}
