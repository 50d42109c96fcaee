package content

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// write makes the file root/p of size bytes with mtime at.
func write(t testing.TB, root, p string, size int, at time.Time) {
	t.Helper()
	full := filepath.Join(root, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(full, at, at); err != nil {
		t.Fatal(err)
	}
}

func fixedClock(at time.Time) func() time.Time { return func() time.Time { return at } }

var t0 = time.Unix(1700000000, 0)

func TestScanTree(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	write(t, root, "a", 1, t0)
	write(t, root, "dir/b c", 2, t0)
	write(t, root, "dir/sub/d", 3, t0.Add(time.Second/2))
	write(t, outside, "secret", 4, t0)
	links := map[string]string{
		"link-in":     "dir/b c",                                     // a file inside: counted, with its target's size
		"link-out":    filepath.Join(outside, "secret"),              // outside: skipped
		"link-up":     "../" + filepath.Base(outside),                // a directory outside: skipped
		"link-dir":    "dir",                                         // a directory inside: not followed
		"dir/dangles": "nowhere",                                     // skipped
		"dir/loop":    "loop",                                        // skipped
		"dir/rel-out": "../../" + filepath.Base(outside) + "/secret", // skipped
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, root, "bad\xffname", 1, t0)
	for _, workers := range []int{1, 4} {
		res, err := scanTree(context.Background(), root, workers, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []Entry{e("a", 1, t0.UnixNano()), e("dir/b c", 2, t0.UnixNano()),
			e("dir/sub/d", 3, t0.UnixNano()+5e8), e("link-in", 2, t0.UnixNano())}
		if !reflect.DeepEqual(res.files, want) {
			t.Errorf("workers %d: files %v, want %v", workers, res.files, want)
		}
		if res.skipped != 1 || len(res.dirs) != 3 {
			t.Errorf("workers %d: skipped %d, dirs %v; want 1 and 3 dirs", workers, res.skipped, res.dirs)
		}
	}
}

func TestScanTreeBounds(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"a", "b", "c/d"} {
		write(t, root, p, 1, t0)
	}
	tests := []struct {
		name     string
		root     string
		maxFiles int
		ctx      func() context.Context
		err      string
	}{
		{"too many", root, 2, context.Background, "more than 2 files"},
		{"no root", filepath.Join(root, "nope"), 0, context.Background, "no such file"},
		{"cancelled", root, 0, func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, "canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scanTree(tc.ctx(), tc.root, 2, tc.maxFiles, 1)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("scanTree = %v, want %q", err, tc.err)
			}
		})
	}
}
