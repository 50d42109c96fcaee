package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe/probetest"
)

// TestFaultCorruptGeoIP: the GeoIP database is replaced in place by a
// file that is not a usable database, and dnsd is told to reload (POST
// /-/reload, then SIGHUP). Each reload is refused with an error naming the
// file (in the response body, in the log), exported by
// config_last_reload_successful and config_reloads_total; the old
// database keeps serving (answers still by the client's location); a good
// file again reloads. The corruptions: empty, not a database, truncated,
// no metadata, and — the ones that open — an inverted search tree and an
// inverted data section (which only a verification of every record finds).
func TestFaultCorruptGeoIP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join("..", "scheduler", "geo", "testdata", "regions.mmdb"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "dnsd.yaml", readFileT(t, filepath.Join("testdata", "geo.yaml")))
	writeFile(t, dir, "example.test.zone", readFileT(t, filepath.Join("testdata", "example.test.zone")))
	dbPath := writeFile(t, dir, "regions.mmdb", string(good))
	d := startDNSD(t, true, "-config", filepath.Join(dir, "dnsd.yaml"))

	meta := bytes.LastIndex(good, []byte("\xab\xcd\xefMaxMind.com"))
	if meta < 0 {
		t.Fatal("regions.mmdb has no metadata marker")
	}
	// The data section follows the search tree and 16 zero bytes.
	dataAt := bytes.Index(good, make([]byte, 16)) + 16
	if dataAt < 16 || dataAt >= meta {
		t.Fatal("regions.mmdb: no data section found")
	}
	flip := func(from, to int) []byte {
		b := bytes.Clone(good)
		for i := from; i < to; i++ {
			b[i] ^= 0xff
		}
		return b
	}
	cases := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", bytes.Repeat([]byte("not a database "), 200)},
		{"truncated to half", good[:len(good)/2]},
		{"metadata cut off", good[:meta+8]},
		{"search tree inverted", flip(0, dataAt-16)},
		{"data section inverted", flip(dataAt, meta)},
	}
	reloads := func(result string) float64 {
		return metricSum(scrape(t, d.Admin), "transmirror_dnsd_config_reloads_total", `result="`+result+`"`)
	}
	failures := reloads("failure")
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(dbPath, tc.data, 0o644); err != nil { // in place, as a careless copy does
				t.Fatal(err)
			}
			code, body := postReload(t, d.Admin)
			t.Logf("POST /-/reload with the database %s: %d %s", tc.name, code, strings.TrimSpace(body))
			if code != http.StatusBadRequest || !strings.Contains(body, "regions.mmdb") {
				t.Errorf("POST /-/reload: %d %q, want 400 naming regions.mmdb", code, body)
			}
			if i == 0 { // and once by signal, for the log
				logs := strings.Count(d.Logs(), "reload failed")
				d.Signal(syscall.SIGHUP)
				probetest.Until(t, 10*time.Second, func() string {
					if strings.Count(d.Logs(), "reload failed") == logs {
						return "no 'reload failed' log line after SIGHUP"
					}
					return ""
				})
			}
			m := scrape(t, d.Admin)
			if !strings.Contains(m, "transmirror_dnsd_config_last_reload_successful 0") {
				t.Errorf("config_last_reload_successful is not 0 after the refused reload")
			}
			checkByLocation(t, d)
		})
	}
	n := reloads("failure") - failures
	t.Logf("%d refused reloads counted in config_reloads_total{result=failure} (%d POSTs and a SIGHUP)", int(n), len(cases))
	if int(n) != len(cases)+1 {
		t.Errorf("config_reloads_total{result=failure} rose by %g, want %d", n, len(cases)+1)
	}
	// A good database again: the reload goes through.
	if err := os.WriteFile(dbPath, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := postReload(t, d.Admin); code != http.StatusOK {
		t.Fatalf("POST /-/reload with the good database: %d %s", code, body)
	}
	if m := scrape(t, d.Admin); !strings.Contains(m, "transmirror_dnsd_config_last_reload_successful 1") {
		t.Errorf("config_last_reload_successful is not 1 after a good reload")
	}
	checkByLocation(t, d)
}

// checkByLocation asks dnsd for the group with a client subnet in each
// region of the test database and checks that the answers are that
// region's members.
func checkByLocation(t *testing.T, d *dnsdProc) {
	t.Helper()
	for subnet, region := range map[string]string{"198.51.100.0/24": "EU", "203.0.113.0/24": "NA", "192.0.2.0/24": "AS"} {
		r := d.Dig(t, "+subnet="+subnet, faultGroup, "A")
		if r.Status != "NOERROR" || len(r.Answer) == 0 {
			t.Errorf("subnet %s: %s, %d answers", subnet, r.Status, len(r.Answer))
			continue
		}
		for _, x := range r.Answer {
			if e2eRegion[x.Data] != region {
				t.Errorf("subnet %s (%s): answer %s is in %q: not answered by location", subnet, region, x.Data, e2eRegion[x.Data])
			}
		}
	}
}

// postReload asks dnsd to reload and returns the status and body.
func postReload(t *testing.T, admin string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+admin+"/-/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
