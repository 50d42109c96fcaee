package e2e

import (
	"encoding/json"
	"fmt"
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

// mirrorReloadYAML is a mirror without dnsd; %s is the rest of the config.
const mirrorReloadYAML = `listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
group: www.example.test
member: r1
host: r1.mirrors.example.test
root: root
%s`

// TestMirrorReload reloads the real mirror with SIGHUP and POST /-/reload:
// a new capacity is in the next load report; a broken config or a change
// that needs a restart is refused (logged, in the reply, exported) while
// the old config keeps serving.
func TestMirrorReload(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "root"), "hello.txt", "hello\n")
	if err := os.WriteFile(filepath.Join(dir, "corrupt.mmdb"), []byte("\x00\x01 not a MaxMind database \xab\xcd"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "mirror.yaml", fmt.Sprintf(mirrorReloadYAML, "capacity: 1000\n"))
	m := runMirror(t, cfg, "mirror")
	hc := &http.Client{Timeout: 5 * time.Second}
	capacity := func() (float64, error) {
		resp, err := hc.Get("http://" + m.Admin + "/v1/load")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var r struct{ Capacity float64 }
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return 0, err
		}
		return r.Capacity, nil
	}
	if c, err := capacity(); err != nil || c != 1000 {
		t.Fatalf("capacity at start: %v %v, want 1000", c, err)
	}

	tests := []struct {
		name     string
		rest     string // the config after the common keys
		post     bool   // POST /-/reload, else SIGHUP
		want     string // in the failed reload's log line or reply; "" for success
		capacity float64
	}{
		{"capacity by SIGHUP", "capacity: 2500\n", false, "", 2500},
		{"invalid by SIGHUP", "capacity: -1\n", false, "capacity: must be > 0", 2500},
		{"restart-only key by SIGHUP", "capacity: 3000\nload_window: 30s\n", false, "load_window: changed from 10s to 30s: needs a restart", 2500},
		{"corrupt mmdb by SIGHUP", "capacity: 3000\ngeo: {mmdb: corrupt.mmdb}\n", false, "corrupt.mmdb", 2500},
		{"invalid by POST", "capacity: 0\n", true, "capacity: must be > 0", 2500},
		{"restart-only key by POST", "capacity: 3000\nlisting: true\n", true, "listing: changed from false to true: needs a restart", 2500},
		{"capacity by POST", "capacity: 4000\nredirect: {max_share: 0.3}\n", true, "", 4000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			writeFile(t, dir, "mirror.yaml.tmp", fmt.Sprintf(mirrorReloadYAML, tt.rest))
			if err := os.Rename(filepath.Join(dir, "mirror.yaml.tmp"), cfg); err != nil {
				t.Fatal(err)
			}
			failedBefore := strings.Count(m.Logs(), "reload failed")
			reloadedBefore := strings.Count(m.Logs(), `msg=reloaded`)
			if tt.post {
				resp, err := hc.Post("http://"+m.Admin+"/-/reload", "application/json", nil)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				wantCode, wantBody := http.StatusOK, `"status":"reloaded"`
				if tt.want != "" {
					wantCode, wantBody = http.StatusBadRequest, tt.want
				}
				if resp.StatusCode != wantCode || !strings.Contains(string(body), wantBody) {
					t.Errorf("POST /-/reload: %d %s, want %d with %q", resp.StatusCode, body, wantCode, wantBody)
				}
			} else {
				m.Signal(syscall.SIGHUP)
			}
			// The reload is over once its log line is written.
			probetest.Until(t, 10*time.Second, func() string {
				logs := m.Logs()
				switch {
				case tt.want == "" && strings.Count(logs, `msg=reloaded`) == reloadedBefore:
					return "no 'reloaded' log line"
				case tt.want != "" && strings.Count(logs, "reload failed") == failedBefore:
					return "no 'reload failed' log line"
				}
				return ""
			})
			if tt.want != "" {
				lines := strings.Split(m.Logs(), "\n")
				var last string
				for _, l := range lines {
					if strings.Contains(l, "reload failed") {
						last = l
					}
				}
				if !strings.Contains(last, tt.want) {
					t.Errorf("reload failure logged as %q, want it to say %q", last, tt.want)
				}
			}
			if c, err := capacity(); err != nil || c != tt.capacity {
				t.Errorf("load report capacity %v (%v), want %v", c, err, tt.capacity)
			}
			resp, err := hc.Get("http://" + m.HTTP + "/hello.txt")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || string(body) != "hello\n" {
				t.Errorf("public GET /hello.txt: %d %q", resp.StatusCode, body)
			}
			metrics := scrape(t, m.Admin)
			wantOK := 1.0
			if tt.want != "" {
				wantOK = 0
			}
			if got := metricSum(metrics, "transmirror_mirror_config_last_reload_successful"); got != wantOK {
				t.Errorf("transmirror_mirror_config_last_reload_successful %v, want %v", got, wantOK)
			}
		})
	}
	metrics := scrape(t, m.Admin)
	if f, s := metricSum(metrics, "transmirror_mirror_config_reloads_total", `result="failure"`),
		metricSum(metrics, "transmirror_mirror_config_reloads_total", `result="success"`); f != 5 || s != 2 {
		t.Errorf("config_reloads_total: %v failures, %v successes; want 5 and 2", f, s)
	}
	if ts := metricSum(metrics, "transmirror_mirror_config_last_reload_success_timestamp_seconds"); ts < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Errorf("config_last_reload_success_timestamp_seconds %v, want about now", ts)
	}
}
