package content

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// fakeWatcher tells of a change when the test sends on events.
type fakeWatcher struct {
	events  chan struct{}
	watched chan []string
}

func (f *fakeWatcher) Watch(dirs []string)     { f.watched <- dirs }
func (f *fakeWatcher) Events() <-chan struct{} { return f.events }
func (f *fakeWatcher) Close() error            { return nil }

func TestRun(t *testing.T) {
	root := t.TempDir()
	write(t, root, "a", 1, t0)
	fw := &fakeWatcher{events: make(chan struct{}, 1), watched: make(chan []string, 10)}
	ticks, settles := make(chan time.Time), make(chan time.Time)
	after := func(d time.Duration) <-chan time.Time {
		if d == DefaultSettle {
			return settles
		}
		return ticks
	}
	// The clock stands still: every scan takes no time, so an early
	// rescan waits DefaultSettle.
	s := NewScanner(root, ScanOptions{After: after, Clock: fixedClock(t0), watcher: func(string, int) watcher { return fw }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	steps := []struct {
		name  string
		edit  func()
		wake  func()
		files int
	}{
		{"the first scan", func() {}, func() {}, 1},
		{"the interval", func() { write(t, root, "b", 1, t0) }, func() { ticks <- t0 }, 2},
		{"a change told", func() { write(t, root, "c", 1, t0) }, func() { fw.events <- struct{}{}; settles <- t0 }, 3},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.edit()
			st.wake()
			if dirs := <-fw.watched; len(dirs) != 1 || dirs[0] != "." {
				t.Fatalf("watched %v", dirs)
			}
			if n := s.Current().Len(); n != st.files {
				t.Fatalf("%d files, want %d", n, st.files)
			}
		})
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSettle(t *testing.T) {
	tests := []struct {
		name            string
		min, last, want time.Duration
	}{
		{"a quick scan waits the minimum", 2 * time.Second, 10 * time.Millisecond, 2 * time.Second},
		{"a slow scan waits nine times its time", 2 * time.Second, 7 * time.Second, 63 * time.Second},
		{"no scan yet", 2 * time.Second, 0, 2 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := settle(tc.min, tc.last); got != tc.want {
				t.Fatalf("settle(%v, %v) = %v, want %v", tc.min, tc.last, got, tc.want)
			}
		})
	}
}

// TestInotify: a file made in a watched directory is told.
func TestInotify(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Log("no inotify here: rescans only")
		return
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := newWatcher(root, 10)
	defer w.Close()
	if _, ok := w.(noWatcher); ok {
		t.Fatal("inotify is not available")
	}
	w.Watch([]string{".", "sub"})
	write(t, root, "sub/new", 1, t0)
	select {
	case <-w.Events():
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s of a file made in a watched directory")
	}
}
