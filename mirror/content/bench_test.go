package content

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"
)

// benchFiles is the tree's size for BenchmarkIndexMillion: generating a
// million files takes a few minutes and about 1 GB of disk (the files
// are empty or sparse: inodes and directory entries only).
var benchFiles = flag.Int("content.files", 1_000_000, "files of BenchmarkIndexMillion's generated tree")

// BenchmarkIndexMillion scans a generated tree of -content.files files
// (a Debian-like pool: 1,000 directories of 1,000 files) and reports the
// first scan's wall time (ns/op) and CPU time, the index's bytes per file
// (its arrays, and the heap it holds after a GC), the peak heap during
// the first scan, the full index's wire size (and gzipped), then the
// rescan after 1% of the files changed (a new mtime): its time and peak
// heap, and its change set's wire size.
func BenchmarkIndexMillion(b *testing.B) {
	root := b.TempDir()
	start := time.Now()
	files := genTree(b, root, *benchFiles)
	b.Logf("generated %d files in %s", len(files), time.Since(start).Round(time.Second))
	ctx := context.Background()
	var s *Scanner
	var first scanCost
	var held uint64
	b.ResetTimer()
	for range b.N {
		s = nil
		before := heapAlloc()
		s = NewScanner(root, ScanOptions{})
		first = measure(b, func() error { _, err := s.Scan(ctx); return err })
		held = heapAlloc() - min(before, heapAlloc())
	}
	b.StopTimer()
	x := s.Current()
	n := float64(x.Len())
	b.ReportMetric(first.cpu.Seconds(), "cpu-s/scan")
	b.ReportMetric(float64(x.Bytes())/n, "index-B/file")
	b.ReportMetric(float64(held)/n, "heap-B/file")
	b.ReportMetric(float64(first.peak)/n, "peak-heap-B/file")
	b.ReportMetric(float64(first.live)/n, "peak-live-B/file")
	full := encodeIndex(b, x)
	b.ReportMetric(float64(len(full)), "full-wire-B")
	b.ReportMetric(float64(gzipLen(full)), "full-gzip-B")
	changed := touchPercent(b, root, files)
	again := measure(b, func() error { _, err := s.Scan(ctx); return err })
	b.ReportMetric(again.wall.Seconds(), "rescan-s")
	b.ReportMetric(again.cpu.Seconds(), "rescan-cpu-s")
	b.ReportMetric(float64(again.peak)/n, "rescan-peak-heap-B/file")
	b.ReportMetric(float64(again.live)/n, "rescan-peak-live-B/file")
	ch, _, ok := s.Since(x.Version())
	if !ok || len(ch.Changes) != changed {
		b.Fatalf("since: ok %v, %d changes, want %d", ok, len(ch.Changes), changed)
	}
	wire := encodeChanges(b, ch)
	b.ReportMetric(float64(len(wire)), "1%-changes-wire-B")
	b.ReportMetric(float64(gzipLen(wire)), "1%-changes-gzip-B")
}

// scanCost is what one scan took.
type scanCost struct {
	wall, cpu  time.Duration
	peak, live uint64 // see peakHeap
}

func measure(b *testing.B, scan func() error) scanCost {
	var c scanCost
	start, cpu0 := time.Now(), cpuTime()
	c.peak, c.live = peakHeap(func() {
		if err := scan(); err != nil {
			b.Error(err)
		}
	})
	c.wall, c.cpu = time.Since(start), cpuTime()-cpu0
	return c
}

// genTree makes n empty files under root, 1,000 to a directory, with
// names like a mirror's pool, and returns their paths.
func genTree(b *testing.B, root string, n int) []string {
	files := make([]string, 0, n)
	at := time.Unix(1700000000, 0)
	for d := 0; len(files) < n; d++ {
		dir := fmt.Sprintf("pool/main/%c/pkg%05d", 'a'+d%26, d)
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < 1000 && len(files) < n; i++ {
			p := fmt.Sprintf("%s/pkg%05d_%d.%d-1_amd64.deb", dir, d, i/10, i%10)
			f, err := os.Create(filepath.Join(root, p))
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
			os.Chtimes(filepath.Join(root, p), at, at)
			files = append(files, p)
		}
	}
	return files
}

// touchPercent gives every hundredth file a new mtime and returns how
// many it changed.
func touchPercent(b *testing.B, root string, files []string) int {
	at := time.Unix(1700086400, 0)
	n := 0
	for i := 0; i < len(files); i += 100 {
		if err := os.Chtimes(filepath.Join(root, files[i]), at, at); err != nil {
			b.Fatal(err)
		}
		n++
	}
	return n
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakHeap runs f and returns, above what was there before (sampled
// every 2ms), the most heap that objects took (garbage not yet collected
// included: with GOGC=100 up to twice what is live) and the most that was
// live at the end of a GC cycle.
func peakHeap(f func()) (objects, live uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	read := func() (uint64, uint64) {
		metrics.Read(sample)
		return sample[0].Value.Uint64(), sample[1].Value.Uint64()
	}
	base0, base1 := read()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			o, l := read()
			objects, live = max(objects, o), max(live, l)
			return objects - min(base0, objects), live - min(base1, live)
		case <-tick.C:
			o, l := read()
			objects, live = max(objects, o), max(live, l)
		}
	}
}

// heapAlloc is the heap that live objects hold, after a GC.
func heapAlloc() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// gzipLen is the size of p gzipped as the Handler gzips it.
func gzipLen(p []byte) int {
	e := &encoded{plain: p}
	return len(e.gzipped())
}
