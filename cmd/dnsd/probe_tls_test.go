package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/transmirror/transmirror/probe"
	"github.com/transmirror/transmirror/probe/api"
	"github.com/transmirror/transmirror/probe/probetest"
)

// TestProbeCAFile: dnsd pulls a mirror's load report over https from a
// certificate of a private CA when health.ca_file holds that CA, and
// counts the member down (a TLS failure) when it does not.
func TestProbeCAFile(t *testing.T) {
	dir := t.TempDir()
	ca := probetest.NewCA(t, dir, "ca")
	crt, key := ca.Leaf(t, dir, "mirror")
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	const group = "www.example.test."
	mirror := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(probe.Report{Group: group, Member: "fra1", Seq: 1, Time: time.Now(), R: 1,
			Load: probe.LoadOf(1, 0), Capacity: 1000})
	}))
	mirror.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	mirror.StartTLS()
	t.Cleanup(mirror.Close)

	zone := "$ORIGIN example.test.\n$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 604800 60\n@ IN NS ns1\nns1 IN A 127.0.0.1\n"
	if err := os.WriteFile(filepath.Join(dir, "example.test.zone"), []byte(zone), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		health string
		want   string
	}{
		{"the private CA in ca_file: up", "ca_file: ca.crt", "up"},
		{"the system's roots only: down", "fall: 1", "down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := filepath.Join(dir, "dnsd.yaml")
			text := fmt.Sprintf(`listen: ["127.0.0.1:0"]
admin: 127.0.0.1:0
health: {interval: 50ms, timeout: 40ms, rise: 1, %s}
zones:
  - {origin: example.test., file: example.test.zone}
groups:
  - name: %s
    members:
      - {name: fra1, host: fra1.example.test., addresses: [192.0.2.1], capacity: 1000, probe: "%s/v1/load"}
`, tc.health, group, mirror.URL)
			if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := api.NewClient("http://"+startDNSD(t, config), api.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var last api.MemberView
			deadline := time.Now().Add(10 * time.Second)
			for {
				v, err := c.Group(t.Context(), group)
				if err == nil && len(v.Members) == 1 {
					if last = v.Members[0]; last.State == tc.want {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("fra1 %+v after 10s (%v), want %s", last, err, tc.want)
				}
				time.Sleep(10 * time.Millisecond) // polling with a deadline
			}
		})
	}
}
