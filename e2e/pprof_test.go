package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPprofFlag starts dnsd and a mirror with -pprof and one mirror
// without: the profiles are on the admin listener (loopback) with the
// flag, and absent without it.
func TestPprofFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := startDNSD(t, true, "-pprof", "-zone", "example.test.="+filepath.Join("testdata", "example.test.zone"), "-admin", "127.0.0.1:0")
	cfg := writeFile(t, dir, "m.yaml", "listen: [\"127.0.0.1:0\"]\nadmin: 127.0.0.1:0\ngroup: www.example.test\nmember: p1\nhost: p1.mirrors.example.test\nroot: root\n")
	on := runMirror(t, cfg, "on", "-pprof")
	off := runMirror(t, cfg, "off")
	client := &http.Client{Timeout: 10 * time.Second}
	for _, tt := range []struct {
		name, admin string
		code        int
	}{
		{"dnsd -pprof", d.Admin, http.StatusOK},
		{"mirror -pprof", on.Admin, http.StatusOK},
		{"mirror without", off.Admin, http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := client.Get("http://" + tt.admin + "/debug/pprof/heap?debug=1")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || (tt.code == http.StatusOK && !strings.Contains(string(body), "heap profile")) {
				t.Errorf("GET /debug/pprof/heap: %d %.60q, want %d", resp.StatusCode, body, tt.code)
			}
		})
	}
}
