package serve

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/webtest"
	"github.com/transmirror/transmirror/zones/yamlconf"
)

func TestCache(t *testing.T) {
	tr := newTree(t)
	big := strings.Repeat("B", 2048)
	if err := os.WriteFile(filepath.Join(tr.root, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	// 100-byte data.bin fits; 2 KiB big.txt is above max_object.
	c, err := NewCache(frontend.CacheConfig{Memory: 4096, MaxObject: 1024}, CacheOptions{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{Cache: c})})
	uncached := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{})})
	hits := func() float64 { return webtest.SampleSum(t, reg, "transmirror_mirror_cache_hits_total", nil) }
	misses := func() float64 { return webtest.SampleSum(t, reg, "transmirror_mirror_cache_misses_total", nil) }

	steps := []struct {
		name               string
		method, path       string
		header             map[string]string
		before             func(t *testing.T)
		wantStatus         int
		wantBody           string
		wantHits, wantMiss float64
	}{
		{name: "first request misses", method: "GET", path: "/data.bin", wantStatus: 200, wantBody: dataBin, wantMiss: 1},
		{name: "second request hits", method: "GET", path: "/data.bin", wantStatus: 200, wantBody: dataBin, wantHits: 1, wantMiss: 1},
		{name: "a range is served from memory", method: "GET", path: "/data.bin", header: map[string]string{"Range": "bytes=10-19"},
			wantStatus: 206, wantBody: dataBin[10:20], wantHits: 2, wantMiss: 1},
		{name: "HEAD hits", method: "HEAD", path: "/data.bin", wantStatus: 200, wantHits: 3, wantMiss: 1},
		{name: "a changed file misses", method: "GET", path: "/data.bin",
			before: func(t *testing.T) {
				later := dataMtime.Add(time.Hour)
				if err := os.Chtimes(filepath.Join(tr.root, "data.bin"), later, later); err != nil {
					t.Fatal(err)
				}
			},
			wantStatus: 200, wantBody: dataBin, wantHits: 3, wantMiss: 2},
		{name: "a file above max_object is never cached", method: "GET", path: "/big.txt", wantStatus: 200, wantBody: big, wantHits: 3, wantMiss: 3},
		{name: "and misses again", method: "GET", path: "/big.txt", wantStatus: 200, wantBody: big, wantHits: 3, wantMiss: 4},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			resp, body := webtest.Do(t, webtest.NewRequest(t, s.method, base+s.path, s.header))
			if resp.StatusCode != s.wantStatus || body != s.wantBody {
				t.Errorf("status %d body %q, want %d %q", resp.StatusCode, body, s.wantStatus, s.wantBody)
			}
			if h, m := hits(), misses(); h != s.wantHits || m != s.wantMiss {
				t.Errorf("hits %g misses %g, want %g %g", h, m, s.wantHits, s.wantMiss)
			}
			// The same headers as without the cache (Etag, Last-Modified,
			// Content-Type, Content-Range, ...).
			ref, _ := webtest.Do(t, webtest.NewRequest(t, s.method, uncached+s.path, s.header))
			for _, k := range []string{"Etag", "Last-Modified", "Content-Type", "Content-Length", "Content-Range", "Accept-Ranges"} {
				if got, want := resp.Header.Get(k), ref.Header.Get(k); got != want {
					t.Errorf("%s %q, want %q as without the cache", k, got, want)
				}
			}
		})
	}
	t.Run("cache_bytes", func(t *testing.T) {
		if got := webtest.SampleSum(t, reg, "transmirror_mirror_cache_bytes", nil); got != float64(len(dataBin)+len("data.bin")) {
			t.Errorf("cache_bytes %g", got)
		}
	})
}

func TestCacheEvictsByBytes(t *testing.T) {
	tr := newTree(t)
	// Room for two of the three 400-byte files (plus their names).
	for _, n := range []string{"1", "2", "3"} {
		if err := os.WriteFile(filepath.Join(tr.root, n+".txt"), []byte(strings.Repeat(n, 400)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewCache(frontend.CacheConfig{Memory: 820, MaxObject: 1024}, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{Cache: c})})
	for _, n := range []string{"1", "2", "3"} {
		webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+"/"+n+".txt", nil))
	}
	if got := c.Len(); got != 2 {
		t.Errorf("%d files cached, want 2", got)
	}
}

func TestCacheOff(t *testing.T) {
	c, err := NewCache(frontend.CacheConfig{Memory: 0}, CacheOptions{})
	if err != nil || c != nil {
		t.Errorf("memory 0: got %v, %v; want no cache and no error", c, err)
	}
}

func TestCacheMissDelay(t *testing.T) {
	tr := newTree(t)
	if err := os.WriteFile(filepath.Join(tr.root, "mib.bin"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	const delay = 200 * time.Millisecond
	c, err := NewCache(frontend.CacheConfig{Memory: 4 << 20, MaxObject: 2 << 20, MissDelayPerMiB: yamlconf.Duration(delay)}, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{Cache: c})})
	start := time.Now()
	webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+"/mib.bin", nil))
	if d := time.Since(start); d < delay {
		t.Errorf("a 1 MiB miss took %v, want at least the miss delay %v", d, delay)
	}
}
