package serve

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/transmirror/transmirror/mirror/frontend"
	"github.com/transmirror/transmirror/mirror/webtest"
)

func TestLimitRanges(t *testing.T) {
	many := "bytes=" + strings.Repeat("0-99,", 16)
	tests := []struct {
		name string
		h    string
		size int64
		max  int
		want string
	}{
		{"one range kept", "bytes=0-99", 1000, 16, "bytes=0-99"},
		{"open range made explicit", "bytes=500-", 1000, 16, "bytes=500-999"},
		{"suffix made explicit", "bytes=-100", 1000, 16, "bytes=900-999"},
		{"suffix longer than the file", "bytes=-5000", 1000, 16, "bytes=0-999"},
		{"end past the file clipped", "bytes=900-5000", 1000, 16, "bytes=900-999"},
		{"disjoint kept, sorted", "bytes=500-599,0-99", 1000, 16, "bytes=0-99,500-599"},
		{"overlapping merged", "bytes=0-99,50-149", 1000, 16, "bytes=0-149"},
		{"adjacent merged", "bytes=0-99,100-199", 1000, 16, "bytes=0-199"},
		{"contained merged", "bytes=0-999,10-20,-5", 1000, 16, "bytes=0-999"},
		{"same range many times", strings.TrimSuffix(many, ","), 1000, 16, "bytes=0-99"},
		{"spaces and empty elements", "bytes= 0-9 , ,20-29", 1000, 16, "bytes=0-9,20-29"},
		{"unsatisfiable dropped", "bytes=0-9,5000-6000", 1000, 16, "bytes=0-9"},
		{"empty suffix dropped", "bytes=-0,0-9", 1000, 16, "bytes=0-9"},
		{"at the limit", strings.TrimSuffix(many, ","), 1000, 16, "bytes=0-99"},
		{"over the limit: whole file", many + "0-99", 1000, 16, ""},
		{"ranges off", "bytes=0-99", 1000, -1, ""},
		{"none satisfiable left for 416", "bytes=5000-6000", 1000, 16, "bytes=5000-6000"},
		{"bad range left for ServeContent", "bytes=0-99,x-y", 1000, 16, "bytes=0-99,x-y"},
		{"reversed left for ServeContent", "bytes=99-0", 1000, 16, "bytes=99-0"},
		{"negative start left", "bytes=--5", 1000, 16, "bytes=--5"},
		{"other unit left", "items=0-5", 1000, 16, "items=0-5"},
		{"empty file", "bytes=0-5", 0, 16, "bytes=0-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LimitRanges(tt.h, tt.size, tt.max); got != tt.want {
				t.Errorf("LimitRanges(%q, %d, %d) = %q, want %q", tt.h, tt.size, tt.max, got, tt.want)
			}
		})
	}
}

// TestManyRanges sends 8,000 overlapping ranges of a 2 MB file (from disk)
// and of a small one (from the memory cache), and max_ranges of them: no
// reply is larger than the file and a little overhead (16 coalesced into
// one part), and an If-Range that does not match gets the whole file.
func TestManyRanges(t *testing.T) {
	tr := newTree(t)
	big := strings.Repeat("0123456789abcdef", 2<<20/16)
	if err := os.WriteFile(filepath.Join(tr.root, "big.bin"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	cache, err := NewCache(frontend.CacheConfig{Memory: 1 << 20, MaxObject: 1 << 16}, CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := startServer(t, ServerOptions{Handler: tr.fileServer(t, FileServerOptions{Cache: cache}), MaxHeaderBytes: 1 << 20})
	// overlapping is n ranges of length bytes starting in [0, spread).
	// The review's shape: 8,000 ranges of 250 bytes add up to less than
	// the 2 MB file, so ServeContent sent them all, each a part of its
	// own (a 3.2 MB multipart reply and 380 times the CPU of the file).
	overlapping := func(n, spread, length int) string {
		specs := make([]string, n)
		for i := range specs {
			start := i * 7 % spread
			specs[i] = fmt.Sprintf("%d-%d", start, start+length-1)
		}
		return "bytes=" + strings.Join(specs, ",")
	}
	tests := []struct {
		name     string
		path     string
		size     int
		rng      string
		ifRange  string
		status   int
		maxBytes int
	}{
		{"8000 overlapping, from disk", "/big.bin", len(big), overlapping(8000, 1000, 250), "", 200, len(big)},
		{"8000 overlapping, from memory", "/data.bin", len(dataBin), overlapping(8000, 50, 25), "", 200, len(dataBin)},
		{"16 overlapping, coalesced", "/big.bin", len(big), overlapping(16, 1000, 250), "", 206, 15*7 + 250},
		{"16 overlapping from memory, coalesced", "/data.bin", len(dataBin), overlapping(16, 50, 25), "", 206, len(dataBin)},
		{"16 overlapping, If-Range not matching", "/big.bin", len(big), overlapping(16, 1000, 250), `"other"`, 200, len(big)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 2 { // the second time from the cache, when it fits
				h := map[string]string{"Range": tt.rng}
				if tt.ifRange != "" {
					h["If-Range"] = tt.ifRange
				}
				resp, body := webtest.Do(t, webtest.NewRequest(t, http.MethodGet, base+tt.path, h))
				if resp.StatusCode != tt.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
				}
				if len(body) > tt.maxBytes+512 {
					t.Errorf("%d bytes for a file of %d", len(body), tt.size)
				}
				if tt.status == 206 && resp.Header.Get("Content-Range") == "" {
					t.Errorf("206 of one part without Content-Range (Content-Type %q)", resp.Header.Get("Content-Type"))
				}
			}
		})
	}
}
