package serve

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/webtest"
)

// vmRSS returns the process's resident set size from /proc/self/status.
func vmRSS(t testing.TB) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Fatalf("reading the RSS: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// TestFileServerLargeFile streams a 1 GiB sparse file through a real
// client and checks that the process (server and client both) does not
// grow with it: the file is never read into memory.
func TestFileServerLargeFile(t *testing.T) {
	const size = 1 << 30
	const maxGrowth = 64 << 20
	root := t.TempDir()
	big := filepath.Join(root, "big.iso")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Truncate(big, size); err != nil {
		t.Fatal(err)
	}
	fs, err := NewFileServer(root, FileServerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	base := startServer(t, ServerOptions{Handler: fs, Registerer: prometheus.NewRegistry()})

	runtime.GC()
	debug.FreeOSMemory()
	before := vmRSS(t)
	var (
		mu   sync.Mutex
		peak = before
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				rss := vmRSS(t)
				mu.Lock()
				peak = max(peak, rss)
				mu.Unlock()
			}
		}
	})

	start := time.Now()
	resp, err := (&http.Client{Timeout: 5 * time.Minute}).Get(base + "/big.iso")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("after %d bytes: %v", n, err)
	}
	after := vmRSS(t)
	peak = max(peak, after)

	if resp.StatusCode != 200 || n != size || resp.ContentLength != size {
		t.Fatalf("status %d, %d bytes read, Content-Length %d; want 200, %d", resp.StatusCode, n, resp.ContentLength, size)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-iso9660-image" {
		t.Errorf("Content-Type %q", ct)
	}
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	t.Logf("1 GiB in %v (%.0f MiB/s); VmRSS before %s, peak %s, after %s, growth %s",
		elapsed.Round(time.Millisecond), float64(size)/(1<<20)/elapsed.Seconds(),
		mib(before), mib(peak), mib(after), mib(peak-before))
	if peak-before > maxGrowth {
		t.Errorf("RSS grew by %s while streaming, want under %s", mib(peak-before), mib(maxGrowth))
	}

	t.Run("range at the end", func(t *testing.T) {
		req := webtest.NewRequest(t, "GET", base+"/big.iso", map[string]string{"Range": "bytes=-16"})
		resp, body := webtest.Do(t, req)
		if resp.StatusCode != 206 || body != strings.Repeat("\x00", 16) ||
			resp.Header.Get("Content-Range") != fmt.Sprintf("bytes %d-%d/%d", size-16, size-1, size) {
			t.Errorf("%d %q %q", resp.StatusCode, resp.Header.Get("Content-Range"), body)
		}
	})
}
